"""Kimi Code sessions: the server event journal, the agents' wire files and the session's `state.json`.

`server/events/session_<id>.jsonl` starts with a `journal_header` line, then
`{"kind": "event", "seq", "envelope": {"type", "timestamp", "payload": {..., "agentId"}}}`; every agent
of the session writes into it, interleaved. `sessions/.../session_<id>/state.json` lists the agents
(`main`, `agent-N` with `parentAgentId` and the AgentSwarm item as label).
`sessions/.../session_<id>/agents/<agent>/wire.jsonl` is one agent's own record: a `metadata` line,
then `context.append_loop_event` lines whose `event` is a `content.part` (think or text),
`tool.call`, `tool.result`, `step.begin` or `step.end`, and `usage.record` lines; each with `time`
in epoch milliseconds. The journal is read when it is there; a session without it is read from its
wire files (one context per file).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from .common import clip_text, files_from_args, iter_json_lines, load_json_file, parse_timestamp, to_text
from .records import (
    MAIN,
    SUB,
    ContextRecord,
    DerivedOutcomes,
    EventRecord,
    FormatError,
    Parser,
    ParseWarning,
    Record,
    RunSource,
    header_from_defaults,
)

SPAWN_TOOLS = {"AgentSwarm", "Agent", "Task", "SpawnAgent"}
WRITE_TOOLS = {"Edit", "Write", "MultiEdit", "StrReplaceFile", "WriteFile", "PatchFile"}
SHELL_TOOLS = {"Bash", "Shell"}
MAIN_ID = "main"


def looks_like(first_line: Any) -> bool:
    return isinstance(first_line, dict) and (
        first_line.get("kind") == "journal_header"
        or (first_line.get("kind") == "event" and isinstance(first_line.get("envelope"), dict))
    )


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


class KimiParser(Parser):
    format_name = "kimi"

    def parse(self, source: RunSource) -> Iterator[Record]:
        events_path = next((p for p in source.files if p.name not in ("state.json", "wire.jsonl")), None)
        state_path = next((p for p in source.files if p.name == "state.json"), None)
        wires = [p for p in source.files if p.name == "wire.jsonl"]
        labels, parents = _state_agents(state_path, source) if state_path is not None else ({}, {})
        if events_path is None:
            if not wires:
                raise FormatError("no server event journal and no wire files in this Kimi session", file=source.name)
            yield from _wire_run(source, wires, labels, parents)
            return
        header = header_from_defaults(source, fallback_task=session_id_of(events_path), agent="Kimi Code")
        yield header
        warnings: list[ParseWarning] = []
        journal = source.relative(events_path)
        yield ContextRecord(id=MAIN_ID, role=MAIN, label="main agent", file=journal)
        announced = {MAIN_ID}
        seq: dict[str, int] = {}
        last_seen: dict[str, datetime] = {}
        ended: dict[str, tuple[datetime | None, str]] = {}
        tool_names: dict[str, str] = {}
        shell_calls = 0
        tokens = 0
        display = source.display(events_path)

        def announce(
            agent_id: str, ts: datetime | None, lineno: int, label: str = "", parent: str = ""
        ) -> Iterator[Record]:
            if agent_id in announced:
                return
            announced.add(agent_id)
            yield ContextRecord(
                id=agent_id,
                role=SUB,
                parent=parent or parents.get(agent_id, MAIN_ID),
                label=labels.get(agent_id) or label or agent_id,
                started_at=ts,
                line=lineno,
                file=journal,
            )

        def event(agent_id: str, **kwargs: Any) -> EventRecord:
            seq[agent_id] = seq.get(agent_id, -1) + 1
            return EventRecord(context=agent_id, seq=seq[agent_id], **kwargs)

        for lineno, obj in iter_json_lines(
            events_path, display=display, tolerate_truncated_tail=True, warnings=warnings
        ):
            if not isinstance(obj, dict) or obj.get("kind") != "event":
                continue
            envelope = obj.get("envelope")
            if not isinstance(envelope, dict):
                raise FormatError("event line without an envelope object", file=display, line=lineno, field="envelope")
            payload = envelope.get("payload") if isinstance(envelope.get("payload"), dict) else {}
            etype = str(envelope.get("type", ""))
            ts = parse_timestamp(envelope.get("timestamp"), file=display, line=lineno, field="envelope.timestamp")
            agent_id = str(payload.get("agentId") or MAIN_ID)
            if etype == "subagent.spawned":
                child = str(payload.get("subagentId", ""))
                if child:
                    yield from announce(
                        child,
                        ts,
                        lineno,
                        label=str(payload.get("description", "")),
                        parent=str(payload.get("parentAgentId") or agent_id),
                    )
                    yield event(
                        agent_id,
                        kind="spawn",
                        timestamp=ts,
                        tool=str(payload.get("subagentName", "")),
                        text=clip_text(str(payload.get("description", ""))),
                        target=child,
                        line=lineno,
                    )
                continue
            if etype in (
                "subagent.completed",
                "subagent.finished",
                "subagent.failed",
                "subagent.cancelled",
                "subagent.stopped",
            ):
                child = str(payload.get("subagentId", ""))
                if child:
                    status = etype.split(".", 1)[1]
                    ended[child] = (ts, status)
                    yield event(
                        agent_id,
                        kind="join",
                        timestamp=ts,
                        tool=etype,
                        target=child,
                        text=clip_text(to_text(payload.get("result") or payload.get("summary") or "")),
                        line=lineno,
                    )
                continue
            if agent_id != MAIN_ID:
                yield from announce(agent_id, ts, lineno)
            if ts is not None:
                last_seen[agent_id] = ts
            if etype == "tool.call.started":
                name = str(payload.get("name", ""))
                args = payload.get("args")
                tool_names[str(payload.get("toolCallId", ""))] = name
                if name in SHELL_TOOLS:
                    shell_calls += 1
                kind = "spawn" if name in SPAWN_TOOLS else "file_write" if name in WRITE_TOOLS else "tool_call"
                yield event(
                    agent_id,
                    kind=kind,
                    timestamp=ts,
                    tool=name,
                    text=clip_text(to_text(args)),
                    files=files_from_args(args),
                    line=lineno,
                )
            elif etype == "tool.result":
                call = str(payload.get("toolCallId", ""))
                text = to_text(payload.get("output"))
                if payload.get("isError") or payload.get("error"):
                    text = "[error] " + (text or to_text(payload.get("error")))
                yield event(
                    agent_id,
                    kind="tool_result",
                    timestamp=ts,
                    tool=tool_names.get(call, ""),
                    text=clip_text(text),
                    line=lineno,
                )
            elif etype == "context.spliced":
                for message in payload.get("messages") or []:
                    if isinstance(message, dict):
                        text = to_text(message.get("content"))
                        if text:
                            yield event(
                                agent_id,
                                kind="message",
                                timestamp=ts,
                                tool=str(message.get("role", "")),
                                text=clip_text(text),
                                line=lineno,
                            )
            elif etype in ("assistant.message", "message.completed", "turn.message"):
                yield event(
                    agent_id,
                    kind="message",
                    timestamp=ts,
                    tool="assistant",
                    text=clip_text(to_text(payload.get("content") or payload.get("text"))),
                    line=lineno,
                )
            elif etype == "turn.step.completed":
                usage = payload.get("usage")
                if isinstance(usage, dict):
                    tokens += sum(v for v in usage.values() if isinstance(v, int))
            elif etype.endswith(".error") or etype == "error":
                yield event(
                    agent_id,
                    kind="error",
                    timestamp=ts,
                    tool=etype,
                    text=clip_text(to_text(payload.get("message") or payload)),
                    line=lineno,
                )
        # Close each sub-agent's window: explicit completion, else its last event.
        for agent_id in sorted(announced - {MAIN_ID}):
            end_ts, status = ended.get(agent_id, (None, ""))
            if end_ts is None:
                end_ts = last_seen.get(agent_id)
                status = status or "unfinished in log"
            # Only the end and status are new here; empty fields leave what was announced.
            yield ContextRecord(
                id=agent_id, role=SUB, parent=parents.get(agent_id, MAIN_ID), ended_at=end_ts, status=status
            )
        yield from warnings
        yield DerivedOutcomes(shell_calls=shell_calls, tokens=tokens or None)


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
    shell_calls = tokens = 0
    for wire in sorted(wires, key=lambda p: (p.parent.name != MAIN_ID, p.parent.name)):
        agent_id = wire.parent.name
        if agent_id != MAIN_ID:
            parent = parents.get(agent_id, MAIN_ID)
            label = labels.get(agent_id) or agent_id
            yield ContextRecord(id=agent_id, role=SUB, parent=parent, label=label, file=source.relative(wire))
        display = source.display(wire)
        seq = -1
        names: dict[str, str] = {}
        for lineno, obj in iter_json_lines(wire, display=display, tolerate_truncated_tail=True, warnings=warnings):
            if not isinstance(obj, dict):
                continue
            ts = parse_timestamp(obj.get("time"), file=display, line=lineno, field="time")
            if obj.get("type") == "usage.record" and isinstance(obj.get("usage"), dict):
                tokens += sum(v for v in obj["usage"].values() if isinstance(v, int) and not isinstance(v, bool))
                continue
            event = obj.get("event") if obj.get("type") == "context.append_loop_event" else None
            if not isinstance(event, dict):
                continue
            record = _wire_event(event, agent_id, ts, lineno, names)
            if record is None:
                continue
            seq += 1
            record.seq = seq
            shell_calls += record.kind == "tool_call" and record.tool in SHELL_TOOLS
            yield record
    yield from warnings
    yield DerivedOutcomes(shell_calls=shell_calls, tokens=tokens or None)


def _wire_event(event: dict, agent_id: str, ts: datetime | None, lineno: int, names: dict) -> EventRecord | None:
    etype = event.get("type")
    if etype == "content.part" and isinstance(event.get("part"), dict):
        part = event["part"]
        if part.get("type") == "think":
            text = to_text(part.get("think"))
            return (
                EventRecord(agent_id, 0, "reasoning", timestamp=ts, text=clip_text(text), line=lineno) if text else None
            )
        text = to_text(part.get("text"))
        return EventRecord(agent_id, 0, "message", timestamp=ts, tool="assistant", text=clip_text(text), line=lineno)
    if etype == "tool.call":
        name, args = str(event.get("name", "")), event.get("args")
        names[str(event.get("toolCallId", ""))] = name
        kind = "spawn" if name in SPAWN_TOOLS else "file_write" if name in WRITE_TOOLS else "tool_call"
        return EventRecord(
            agent_id, 0, kind, timestamp=ts, tool=name, text=clip_text(to_text(args)), files=files_from_args(args),
            line=lineno,
        )  # fmt: skip
    if etype == "tool.result":
        result = event.get("result")
        output = result.get("output") if isinstance(result, dict) else result
        text = to_text(output)
        if isinstance(result, dict) and (result.get("isError") or result.get("error")):
            text = "[error] " + (text or to_text(result.get("error")))
        tool = names.get(str(event.get("toolCallId", "")), "")
        return EventRecord(agent_id, 0, "tool_result", timestamp=ts, tool=tool, text=clip_text(text), line=lineno)
    return None
