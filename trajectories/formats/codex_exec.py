"""Codex's `codex exec --json` event stream (the study's `cell/trajectory.jsonl`).

One line per event: `thread.started` (the main thread's id), `turn.started`, `item.started` /
`item.completed` with an `item` ({id, type, ...}), `turn.completed` ({usage}), `error`. Item types:
`agent_message`, `reasoning`, `command_execution` (command, aggregated_output, exit_code),
`file_change` (changes[].path), `mcp_tool_call`, `web_search`, `todo_list`, and
`collab_tool_call` — the main thread's dealings with its sub-agents: `tool` is `spawn_agent`,
`send_input`, `wait` or `close_agent`, `receiver_thread_ids` names the sub-agents, `prompt` is the brief.

The stream holds only the main thread's own items, and no timestamps: sub-agents appear as contexts
(from the threads the main thread spawned, with their briefs as labels). The rollouts (codex.py) have
all of it; the importer reads this stream when the main thread's rollout is missing — then with the
sub-agents' rollouts that are there (their events and times), and with the harness's record of when
the agent ran (a study cell's `status.json`: `agent_run.started_at_utc` .. `finished_at_utc`), which
times the main agent (its events stay untimed).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import codex
from .common import clip_text, iter_json_lines, to_text
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
    header_from_defaults,
)

COLLAB_KINDS = {"spawn_agent": "spawn", "wait": "wait", "close_agent": "join"}


def looks_like(first_line: Any) -> bool:
    return isinstance(first_line, dict) and first_line.get("type") == "thread.started" and "thread_id" in first_line


class CodexExecParser(Parser):
    def parse(self, source: RunSource) -> Iterator[Record]:
        path = source.files[0]
        name = source.name
        rollouts = [m for m in (codex.thread_meta(p) for p in source.files[1:]) if m is not None]
        clock = source.clock or (None, None)
        said = (
            "the main agent is timed by the harness's record (cell/status.json), its events are not"
            if any(clock)
            else "the main agent and its events are not timed"
        )
        said += "; sub-agents read from their own rollouts" if rollouts else "; sub-agents have no events of their own"
        warnings: list[ParseWarning] = [
            ParseWarning(f"read from the main thread's `codex exec --json` stream: {said}", file=name)
        ]
        lines = iter_json_lines(path, display=name, tolerate_truncated_tail=True, warnings=warnings)
        main_id = ""
        for lineno, obj in lines:
            if isinstance(obj, dict) and obj.get("type") == "thread.started" and obj.get("thread_id"):
                main_id = str(obj["thread_id"])
                break
            raise FormatError("expected a thread.started line first", file=name, line=lineno, field="type")
        if not main_id:
            raise FormatError("empty stream: no thread.started line", file=name)
        header = header_from_defaults(source, fallback_task=main_id, agent="Codex")
        yield header
        yield ContextRecord(
            id=main_id,
            role=MAIN,
            label="main agent",
            started_at=clock[0],
            ended_at=clock[1],
            file=source.relative(path),
        )
        seq = -1
        subagents: set[str] = set()
        completed: set[str] = set()
        started: dict[str, tuple[int, dict]] = {}  # items still in progress at the end
        shell_calls = tokens = 0
        for lineno, obj in lines:
            if not isinstance(obj, dict):
                raise FormatError("each line must be a JSON object", file=name, line=lineno)
            kind = obj.get("type")
            if kind == "turn.completed" and isinstance(obj.get("usage"), dict):
                usage = obj["usage"]
                tokens += sum(v for v in (usage.get("input_tokens"), usage.get("output_tokens")) if _int(v))
            elif kind == "error":
                seq += 1
                yield EventRecord(main_id, seq, "error", text=clip_text(to_text(obj.get("message"))), line=lineno)
            elif kind in ("item.started", "item.completed"):
                item = obj.get("item")
                if not isinstance(item, dict):
                    raise FormatError("expected an object", file=name, line=lineno, field="item")
                item_id = str(item.get("id", lineno))
                if kind == "item.started":
                    started[item_id] = (lineno, item)
                    continue
                # The completed item repeats the started one, but may leave out its brief or sender.
                begun = started.pop(item_id, (0, {}))[1]
                item = {**begun, **{k: v for k, v in item.items() if v not in (None, "", [], {})}}
                if item_id in completed:
                    continue
                completed.add(item_id)
                for record in self._item(item, main_id, lineno, subagents):
                    if isinstance(record, EventRecord):
                        seq += 1
                        record.seq = seq
                        shell_calls += record.tool == "shell" and record.kind == "tool_call"
                    yield record
        for lineno, item in started.values():  # never completed: the run ended while they ran
            for record in self._item(item, main_id, lineno, subagents):
                if isinstance(record, EventRecord):
                    seq += 1
                    record.seq = seq
                yield record
        totals = codex._Totals()
        if rollouts:
            known = {m.thread_id for m in rollouts} | {main_id}
            yield from codex.read_threads(
                rollouts, source, main_id=main_id, known=known, warnings=warnings, totals=totals
            )
        yield from warnings
        yield DerivedOutcomes(shell_calls=shell_calls + totals.shell_calls, tokens=(tokens + totals.tokens) or None)

    def _item(self, item: dict, main_id: str, lineno: int, subagents: set[str]) -> Iterator[Record]:
        itype = item.get("type")
        event = EventRecord(main_id, 0, "other", tool=str(itype or ""), line=lineno)
        if itype == "agent_message":
            event.kind, event.tool, event.text = "message", "assistant", clip_text(to_text(item.get("text")))
        elif itype == "reasoning":
            event.kind, event.tool, event.text = "reasoning", "", clip_text(to_text(item.get("text")))
        elif itype == "command_execution":
            event.kind, event.tool, event.text = "tool_call", "shell", clip_text(to_text(item.get("command")))
            yield event
            output = to_text(item.get("aggregated_output"))
            if item.get("exit_code") not in (0, None):
                output = f"[exit {item['exit_code']}] {output}"
            event = EventRecord(main_id, 0, "tool_result", tool="shell", text=clip_text(output), line=lineno)
        elif itype == "file_change":
            changes = item.get("changes") if isinstance(item.get("changes"), list) else []
            files = [str(c["path"]) for c in changes if isinstance(c, dict) and c.get("path")]
            event.kind, event.tool, event.files = "file_write", "apply_patch", files
            event.text = clip_text(
                "\n".join(f"{c.get('kind', '')} {c.get('path', '')}" for c in changes if isinstance(c, dict))
            )
        elif itype == "mcp_tool_call":
            event.kind = "tool_call"
            event.tool = ".".join(str(x) for x in (item.get("server"), item.get("tool")) if x)
            event.text = clip_text(to_text(item.get("arguments")))
        elif itype == "web_search":
            event.kind, event.tool, event.text = "tool_call", "web_search", clip_text(to_text(item.get("query")))
        elif itype == "collab_tool_call":
            tool = str(item.get("tool", ""))
            receivers = [str(r) for r in item.get("receiver_thread_ids") or [] if r]
            brief = to_text(item.get("prompt"))
            if tool == "spawn_agent":
                sender = str(item.get("sender_thread_id") or main_id)
                for child in receivers:
                    if child not in subagents:
                        subagents.add(child)
                        label = brief.strip().splitlines()[0][:200] if brief.strip() else child
                        parent = sender if sender in subagents else main_id
                        yield ContextRecord(id=child, role=SUB, parent=parent, label=label, line=lineno)
            states = item.get("agents_states") if isinstance(item.get("agents_states"), dict) else {}
            for child, state in states.items():
                if str(child) in subagents and isinstance(state, dict) and state.get("status"):
                    yield ContextRecord(id=str(child), role=SUB, status=str(state["status"]), line=lineno)
            event.kind = COLLAB_KINDS.get(tool, "tool_call")
            event.tool, event.text, event.target = tool, clip_text(brief), ",".join(receivers)[:255]
        elif itype == "todo_list":
            items = item.get("items") if isinstance(item.get("items"), list) else []
            event.text = clip_text("\n".join(to_text(i.get("text")) for i in items if isinstance(i, dict)))
        else:
            event.text = clip_text(to_text(item))
        yield event


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def cell_stream(stream: Path, found: list[RunSource], *, where: str, root: Path | None) -> list[RunSource]:
    """A study cell's `cell/trajectory.jsonl` stands in for the main thread's rollout when that is not
    under the cell's `agent/`: read with the sub-agents' rollouts that are there. `found`: the runs
    found under `agent/`, returned as they are when a main rollout is among them."""
    rollouts = [s for s in found if s.format == codex.FORMAT.name]
    orphans = [s for s in rollouts if not any(m and not m.parent_id for m in map(codex.thread_meta, s.files))]
    if found and not (orphans and len(orphans) == len(rollouts)):
        return found
    note = (
        f"{where}: the main thread's rollout is not under agent/; its events read from cell/trajectory.jsonl"
        if orphans
        else f"{where}: no rollouts under agent/; read cell/trajectory.jsonl instead"
    )
    children = [path for s in orphans for path in s.files]
    return [RunSource(name="", format=FORMAT.name, files=[stream, *children], root=root, notes=[note])]


FORMAT = Format(
    name="codex_exec",
    description="a Codex exec --json stream",
    parser=CodexExecParser,
    looks_like=looks_like,
    cell_stream=cell_stream,
)
