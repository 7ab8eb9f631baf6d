"""Kimi Code sessions: the server event journal, the agents' wire files and the session's `state.json`.

`server/events/session_<id>.jsonl` starts with a `journal_header` line, then
`{"kind": "event", "seq", "envelope": {"type", "timestamp", "payload": {..., "agentId"}}}`; every agent
of the session writes into it, interleaved. `sessions/.../session_<id>/state.json` lists the agents
(`main`, `agent-N` with `parentAgentId` and the AgentSwarm item as label).
`sessions/.../session_<id>/agents/<agent>/wire.jsonl` is one agent's own record: a `metadata` line,
then `context.append_message` lines (the prompt and reminders it was given), and
`context.append_loop_event` lines whose `event` is a `content.part` (think or text), `tool.call`,
`tool.result`, `step.begin` or `step.end`, and `usage.record` lines; each with `time` in epoch
milliseconds.

The journal holds every agent's tool calls but not a word it wrote; a wire file holds one agent's
words too. So both are read: an agent with a wire file is read from it, an agent without one from
the journal, and the journal says for all of them when they started, which call spawned them and when
they ended (a sub-agent's completion; the main agent's `turn.ended`, which closes the run). A session
without its journal is read from its wire files alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from .common import (
    clip_text,
    files_from_args,
    first_json_line,
    iter_json_lines,
    load_json_file,
    parse_timestamp,
    to_text,
)
from .records import (
    MAIN,
    SUB,
    ContextRecord,
    DerivedOutcomes,
    EventRecord,
    Format,
    FormatError,
    Parser,
    ParseWarning,
    Record,
    RunSource,
    display_name,
    header_from_defaults,
)

SPAWN_TOOLS = {"AgentSwarm", "Agent", "Task", "SpawnAgent"}
WRITE_TOOLS = {"Edit", "Write", "MultiEdit", "StrReplaceFile", "WriteFile", "PatchFile"}
SHELL_TOOLS = {"Bash", "Shell"}
MAIN_ID = "main"


def looks_like(first_line: Any) -> bool:
    """A server event journal, or the sessions' index (`session_index.jsonl`, passed over by `group`)."""
    return isinstance(first_line, dict) and (
        first_line.get("kind") == "journal_header"
        or (first_line.get("kind") == "event" and isinstance(first_line.get("envelope"), dict))
        or is_session_index(first_line)
    )


def claims(path: Path) -> bool:
    """An agent's wire file, or a session's state.json."""
    return wire_session_id(path) is not None or (path.name == "state.json" and state_session_id(path) is not None)


def session_id_of(events_path: Path) -> str:
    """The session an event journal belongs to: from its first events, else its file name."""
    try:
        for index, (_, obj) in enumerate(iter_json_lines(events_path)):
            envelope = obj.get("envelope") if isinstance(obj, dict) else None
            if isinstance(envelope, dict) and envelope.get("session_id"):
                return str(envelope["session_id"])
            if index > 20:
                break
    except FormatError:
        pass
    return events_path.name.split(".jsonl")[0].split("__")[0]


def state_session_id(state_path: Path) -> str | None:
    try:
        state = load_json_file(state_path)
    except FormatError:
        return None
    if isinstance(state, dict) and isinstance(state.get("agents"), dict) and state.get("id"):
        return str(state["id"])
    return None


def is_session_index(first_line: Any) -> bool:
    return isinstance(first_line, dict) and "sessionDir" in first_line and "sessionId" in first_line


def group(files: list[Path], root: Path | None) -> tuple[list[RunSource], list[FormatError]]:
    """A run per session: its server event journal with its state.json and its agents' wire files, or
    its wire files alone. A state.json with neither is an error; the sessions' index is passed over
    (the state.json files say the same)."""
    journals: list[Path] = []
    states: dict[str, Path] = {}
    wires: dict[str, list[Path]] = {}
    for file in files:
        wire_session = wire_session_id(file)
        if wire_session is not None:
            wires.setdefault(wire_session, []).append(file)
        elif file.name == "state.json":
            session = state_session_id(file)
            if session:
                states[session] = file
        elif not is_session_index(first_json_line(file)):
            journals.append(file)
    runs = []
    for journal in journals:
        session = session_id_of(journal)
        files_for_run = [journal]
        if session in states:
            files_for_run.append(states.pop(session))
        files_for_run += sorted(wires.pop(session, []))  # the agents' own words, beside the journal
        runs.append(RunSource(name=display_name(journal, root), format=FORMAT.name, files=files_for_run, root=root))
    for session, session_wires in wires.items():
        files_for_run = sorted(session_wires) + ([states.pop(session)] if session in states else [])
        name = display_name(session_wires[0].parent.parent.parent, root)
        runs.append(RunSource(name=name, format=FORMAT.name, files=files_for_run, root=root))
    errors = [
        FormatError(
            f"Kimi Code session {session}: its state.json is here but not its server event journal "
            f"(server/events/{session}.jsonl) nor its agents' wire files (agents/<agent>/wire.jsonl), "
            "which hold the events: nothing to import",
            file=display_name(state, root),
        )
        for session, state in states.items()
    ]
    return runs, errors


class KimiParser(Parser):
    def parse(self, source: RunSource) -> Iterator[Record]:
        events_path = next((p for p in source.files if p.name not in ("state.json", "wire.jsonl")), None)
        state_path = next((p for p in source.files if p.name == "state.json"), None)
        wires = {wire.parent.name: wire for wire in source.files if wire.name == "wire.jsonl"}
        labels, parents = _state_agents(state_path, source) if state_path is not None else ({}, {})
        if events_path is None:
            if not wires:
                raise FormatError("no server event journal and no wire files in this Kimi session", file=source.name)
            yield from _wire_run(source, list(wires.values()), labels, parents)
            return
        header = header_from_defaults(source, fallback_task=session_id_of(events_path), agent="Kimi Code")
        yield header
        warnings: list[ParseWarning] = []
        journal = _Journal(source, events_path, labels, parents, wires=set(wires), warnings=warnings)
        main_file = source.relative(wires[MAIN_ID]) if MAIN_ID in wires else journal.file
        yield ContextRecord(id=MAIN_ID, role=MAIN, label="main agent", file=main_file)
        # The journal: every agent's start and end, and the events of agents with no wire file.
        yield from journal.read()
        totals = _WireTotals()
        for agent_id, wire in sorted(wires.items(), key=lambda item: (item[0] != MAIN_ID, item[0])):
            if agent_id != MAIN_ID:
                yield ContextRecord(
                    id=agent_id,
                    role=SUB,
                    parent=journal.parents.get(agent_id) or parents.get(agent_id, MAIN_ID),
                    label=labels.get(agent_id) or journal.labels.get(agent_id) or agent_id,
                    file=source.relative(wire),
                )
            yield from _wire_events(wire, agent_id, source.display(wire), totals, warnings, spawned=journal.spawned)
        # Close each agent's window: its completion or its turn's end, else its last event.
        for agent_id in journal.agents():
            end_ts, status = journal.ended.get(agent_id, (None, ""))
            if end_ts is None and agent_id != MAIN_ID:
                end_ts, status = journal.last_seen.get(agent_id), "unfinished in log"
            if end_ts is None and not status:
                continue
            role = MAIN if agent_id == MAIN_ID else SUB
            yield ContextRecord(id=agent_id, role=role, ended_at=end_ts, status=status if role == SUB else "")
        yield from warnings
        tokens = totals.tokens + journal.tokens  # each agent counted from where it was read: its wire or the journal
        yield DerivedOutcomes(shell_calls=totals.shell_calls + journal.shell_calls, tokens=tokens or None)


ENDED = ("subagent.completed", "subagent.finished", "subagent.failed", "subagent.cancelled", "subagent.stopped")


class _Journal:
    """The server event journal of a session, read once: which agents ran (announced as they
    start), when each ended (its completion, else its turn's `turn.ended`), which sub-agents each
    spawning call started, and the events of every agent that has no wire file of its own (an
    agent with one is read from it: the wire holds its words, the journal only its tool calls)."""

    def __init__(
        self,
        source: RunSource,
        path: Path,
        labels: dict[str, str],
        parents: dict[str, str],
        *,
        wires: set[str],
        warnings: list[ParseWarning],
    ):
        self.path, self.display, self.file = path, source.display(path), source.relative(path)
        self.state_labels, self.state_parents, self.wires, self.warnings = labels, parents, wires, warnings
        self.announced: list[str] = [MAIN_ID]
        self.labels: dict[str, str] = {}
        self.parents: dict[str, str] = {}
        self.spawned: dict[str, list[str]] = {}  # a spawning call's id -> the sub-agents it started
        self.ended: dict[str, tuple[datetime | None, str]] = {}
        self.last_seen: dict[str, datetime] = {}
        self.shell_calls = self.tokens = 0
        self.seq: dict[str, int] = {}
        self.tool_names: dict[str, str] = {}

    def agents(self) -> list[str]:
        return list(self.announced)

    def _announce(self, agent_id: str, ts: datetime | None, lineno: int, label: str = "", parent: str = ""):
        if agent_id in self.announced:
            return
        self.announced.append(agent_id)
        self.parents[agent_id] = parent or self.state_parents.get(agent_id, MAIN_ID)
        self.labels[agent_id] = self.state_labels.get(agent_id) or label or agent_id
        yield ContextRecord(
            id=agent_id,
            role=SUB,
            parent=self.parents[agent_id],
            label=self.labels[agent_id],
            started_at=ts,
            line=lineno,
            file="" if agent_id in self.wires else self.file,
        )

    def _event(self, agent_id: str, **kwargs: Any) -> EventRecord:
        self.seq[agent_id] = self.seq.get(agent_id, -1) + 1
        return EventRecord(context=agent_id, seq=self.seq[agent_id], **kwargs)

    def read(self) -> Iterator[Record]:
        for lineno, obj in iter_json_lines(
            self.path, display=self.display, tolerate_truncated_tail=True, warnings=self.warnings
        ):
            if not isinstance(obj, dict) or obj.get("kind") != "event":
                continue
            envelope = obj.get("envelope")
            if not isinstance(envelope, dict):
                raise FormatError(
                    "event line without an envelope object", file=self.display, line=lineno, field="envelope"
                )
            payload = envelope.get("payload") if isinstance(envelope.get("payload"), dict) else {}
            etype = str(envelope.get("type", ""))
            ts = parse_timestamp(envelope.get("timestamp"), file=self.display, line=lineno, field="envelope.timestamp")
            agent_id = str(payload.get("agentId") or MAIN_ID)
            own = agent_id not in self.wires  # its events are read here, not from a wire file
            if etype == "subagent.spawned":
                child = str(payload.get("subagentId", ""))
                if child:
                    call = str(payload.get("parentToolCallId") or "")
                    if call:
                        self.spawned.setdefault(call, []).append(child)
                    description = str(payload.get("description", ""))
                    parent = str(payload.get("parentAgentId") or agent_id)
                    yield from self._announce(child, ts, lineno, label=description, parent=parent)
                    if own:
                        tool = str(payload.get("subagentName", ""))
                        text = clip_text(description)
                        yield self._event(agent_id, kind="spawn", timestamp=ts, tool=tool, text=text, target=child,
                                          line=lineno)  # fmt: skip
                continue
            if etype in ENDED:
                child = str(payload.get("subagentId", ""))
                if child:
                    self.ended[child] = (ts, etype.split(".", 1)[1])
                    if own:
                        text = clip_text(to_text(payload.get("result") or payload.get("summary") or ""))
                        yield self._event(agent_id, kind="join", timestamp=ts, tool=etype, target=child, text=text,
                                          line=lineno)  # fmt: skip
                continue
            if agent_id != MAIN_ID:
                yield from self._announce(agent_id, ts, lineno)
            if etype == "turn.ended":
                if agent_id not in self.ended or agent_id == MAIN_ID:  # a sub-agent's completion says more
                    self.ended[agent_id] = (ts, str(payload.get("reason") or ""))
                continue
            if ts is not None:
                self.last_seen[agent_id] = ts
            if etype == "turn.step.completed" and own:
                usage = payload.get("usage")
                if isinstance(usage, dict):
                    self.tokens += sum(v for v in usage.values() if isinstance(v, int) and not isinstance(v, bool))
            if own:
                yield from self._own_event(agent_id, etype, payload, ts, lineno)

    def _own_event(self, agent_id: str, etype: str, payload: dict, ts, lineno: int) -> Iterator[EventRecord]:
        if etype == "tool.call.started":
            name = str(payload.get("name", ""))
            args = payload.get("args")
            self.tool_names[str(payload.get("toolCallId", ""))] = name
            self.shell_calls += name in SHELL_TOOLS
            kind = "spawn" if name in SPAWN_TOOLS else "file_write" if name in WRITE_TOOLS else "tool_call"
            yield self._event(agent_id, kind=kind, timestamp=ts, tool=name, text=clip_text(to_text(args)),
                              files=files_from_args(args), line=lineno)  # fmt: skip
        elif etype == "tool.result":
            text = to_text(payload.get("output"))
            if payload.get("isError") or payload.get("error"):
                text = "[error] " + (text or to_text(payload.get("error")))
            tool = self.tool_names.get(str(payload.get("toolCallId", "")), "")
            yield self._event(agent_id, kind="tool_result", timestamp=ts, tool=tool, text=clip_text(text), line=lineno)
        elif etype == "context.spliced":
            for message in payload.get("messages") or []:
                if isinstance(message, dict) and (text := to_text(message.get("content"))):
                    yield self._event(agent_id, kind="message", timestamp=ts, tool=str(message.get("role", "")),
                                      text=clip_text(text), line=lineno)  # fmt: skip
        elif etype in ("assistant.message", "message.completed", "turn.message"):
            text = to_text(payload.get("content") or payload.get("text"))
            yield self._event(agent_id, kind="message", timestamp=ts, tool="assistant", text=clip_text(text),
                              line=lineno)  # fmt: skip
        elif etype.endswith(".error") or etype == "error":
            yield self._event(agent_id, kind="error", timestamp=ts, tool=etype,
                              text=clip_text(to_text(payload.get("message") or payload)), line=lineno)  # fmt: skip


def _state_agents(state_path: Path, source: RunSource) -> tuple[dict[str, str], dict[str, str]]:
    """Labels (the AgentSwarm item's first line) and parents of the agents state.json lists."""
    labels: dict[str, str] = {}
    parents: dict[str, str] = {}
    state = load_json_file(state_path, display=source.display(state_path))
    agents = state.get("agents") if isinstance(state, dict) else None
    for agent_id, info in (agents or {}).items() if isinstance(agents, dict) else ():
        if not isinstance(info, dict):
            continue
        item = (info.get("labels") or {}).get("swarmItem") if isinstance(info.get("labels"), dict) else None
        if isinstance(item, str):
            labels[agent_id] = item.strip().splitlines()[0][:200] if item.strip() else ""
        if info.get("parentAgentId"):
            parents[agent_id] = str(info["parentAgentId"])
    return labels, parents


def wire_session_id(path: Path) -> str | None:
    """`sessions/.../session_<id>/agents/<agent>/wire.jsonl` → `session_<id>`."""
    if path.name == "wire.jsonl" and len(path.parts) >= 4 and path.parent.parent.name == "agents":
        return path.parent.parent.parent.name
    return None


def _wire_run(
    source: RunSource, wires: list[Path], labels: dict[str, str], parents: dict[str, str]
) -> Iterator[Record]:
    session = wire_session_id(wires[0]) or wires[0].parent.name
    header = header_from_defaults(source, fallback_task=session, agent="Kimi Code")
    yield header
    warnings = [ParseWarning("no server event journal: each agent read from its own wire.jsonl", file=source.name)]
    agent_ids = {wire.parent.name for wire in wires}
    if MAIN_ID not in agent_ids:
        warnings.append(ParseWarning("the main agent's wire.jsonl is not in the bundle", file=source.name))
    main_wire = next((wire for wire in wires if wire.parent.name == MAIN_ID), None)
    yield ContextRecord(id=MAIN_ID, role=MAIN, label="main agent", file=source.relative(main_wire) if main_wire else "")
    totals = _WireTotals()
    for wire in sorted(wires, key=lambda p: (p.parent.name != MAIN_ID, p.parent.name)):
        agent_id = wire.parent.name
        if agent_id != MAIN_ID:
            parent = parents.get(agent_id, MAIN_ID)
            label = labels.get(agent_id) or agent_id
            yield ContextRecord(id=agent_id, role=SUB, parent=parent, label=label, file=source.relative(wire))
        yield from _wire_events(wire, agent_id, source.display(wire), totals, warnings, spawned={})
    yield from warnings
    yield DerivedOutcomes(shell_calls=totals.shell_calls, tokens=totals.tokens or None)


class _WireTotals:
    def __init__(self) -> None:
        self.shell_calls = self.tokens = 0


def _wire_events(
    wire: Path, agent_id: str, display: str, totals: _WireTotals, warnings: list, *, spawned: dict[str, list[str]]
) -> Iterator[EventRecord]:
    """One agent's own record: its messages (the prompt it was given), reasoning and words, its tool
    calls and their results. `spawned` (from the journal) names the sub-agents a spawning call
    started: that call is the spawn of those agents, its result their join."""
    seq = -1
    names: dict[str, str] = {}
    for lineno, obj in iter_json_lines(wire, display=display, tolerate_truncated_tail=True, warnings=warnings):
        if not isinstance(obj, dict):
            continue
        ts = parse_timestamp(obj.get("time"), file=display, line=lineno, field="time")
        line_type = obj.get("type")
        if line_type == "usage.record" and isinstance(obj.get("usage"), dict):
            totals.tokens += sum(v for v in obj["usage"].values() if isinstance(v, int) and not isinstance(v, bool))
            continue
        if line_type == "context.append_message" and isinstance(obj.get("message"), dict):
            message = obj["message"]
            text = to_text(message.get("content"))
            record = (
                EventRecord(
                    agent_id,
                    0,
                    "message",
                    timestamp=ts,
                    tool=str(message.get("role", "")),
                    text=clip_text(text),
                    line=lineno,
                )  # fmt: skip
                if text
                else None
            )
        elif line_type == "context.append_loop_event" and isinstance(obj.get("event"), dict):
            record = _wire_event(obj["event"], agent_id, ts, lineno, names, spawned)
        else:
            continue
        if record is None:
            continue
        seq += 1
        record.seq = seq
        totals.shell_calls += record.kind == "tool_call" and record.tool in SHELL_TOOLS
        yield record


def _wire_event(
    event: dict, agent_id: str, ts: datetime | None, lineno: int, names: dict, spawned: dict[str, list[str]]
) -> EventRecord | None:
    etype = event.get("type")
    if etype == "content.part" and isinstance(event.get("part"), dict):
        part = event["part"]
        if part.get("type") == "think":  # kept even when empty: the model took a reasoning step it did not show
            text = to_text(part.get("think"))
            return EventRecord(agent_id, 0, "reasoning", timestamp=ts, text=clip_text(text), line=lineno)
        text = to_text(part.get("text"))
        return EventRecord(agent_id, 0, "message", timestamp=ts, tool="assistant", text=clip_text(text), line=lineno)
    call = str(event.get("toolCallId", ""))
    children = ",".join(spawned.get(call, []))
    if etype == "tool.call":
        name, args = str(event.get("name", "")), event.get("args")
        names[call] = name
        kind = "spawn" if name in SPAWN_TOOLS else "file_write" if name in WRITE_TOOLS else "tool_call"
        return EventRecord(
            agent_id, 0, kind, timestamp=ts, tool=name, text=clip_text(to_text(args)), files=files_from_args(args),
            target=children, line=lineno,
        )  # fmt: skip
    if etype == "tool.result":
        result = event.get("result")
        output = result.get("output") if isinstance(result, dict) else result
        text = to_text(output)
        if isinstance(result, dict) and (result.get("isError") or result.get("error")):
            text = "[error] " + (text or to_text(result.get("error")))
        kind = "join" if children else "tool_result"
        return EventRecord(
            agent_id, 0, kind, timestamp=ts, tool=names.get(call, ""), text=clip_text(text), target=children,
            line=lineno,
        )  # fmt: skip
    return None


FORMAT = Format(
    name="kimi",
    description="a Kimi Code session",
    parser=KimiParser,
    looks_like=looks_like,
    claims=claims,
    group=group,
)
