"""Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`).

One rollout file is one thread. Multi-agent runs write one rollout per sub-agent whose
`session_meta` names `parent_thread_id` (and `source.subagent.thread_spawn`); a run is the
root thread plus every descendant. Lines are `{"timestamp", "type", "payload"}`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from .common import (
    clip_text,
    files_from_args,
    files_from_patch,
    first_json_line,
    iter_json_lines,
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

SHELL_TOOLS = {"exec_command", "shell", "local_shell", "container.exec", "write_stdin"}
SPAWN_TOOLS = {"spawn_agent", "spawn_agents", "create_agent"}
WAIT_TOOLS = {"wait", "wait_agent", "wait_agents", "wait_for_agents"}
JOIN_TOOLS = {"close_agent", "collect_agent", "get_agent_result"}
PATCH_TOOLS = {"apply_patch"}


@dataclass(slots=True)
class ThreadMeta:
    path: Path
    thread_id: str
    parent_id: str | None
    root_id: str
    nickname: str
    agent_path: str
    model: str


def looks_like(first_line: Any) -> bool:
    return (
        isinstance(first_line, dict)
        and first_line.get("type") == "session_meta"
        and isinstance(first_line.get("payload"), dict)
    )


def thread_meta(path: Path) -> ThreadMeta | None:
    first = first_json_line(path)
    if not looks_like(first):
        return None
    payload = first["payload"]
    spawn = ((payload.get("source") or {}) if isinstance(payload.get("source"), dict) else {}).get("subagent") or {}
    spawn = spawn.get("thread_spawn") if isinstance(spawn, dict) else None
    # The spawn record names the thread that spawned this one; a depth-2 child's `parent_thread_id`
    # may name the session's root instead.
    parent = (spawn or {}).get("parent_thread_id") or payload.get("parent_thread_id")
    thread_id = str(payload.get("id") or path.stem)
    return ThreadMeta(
        path=path,
        thread_id=thread_id,
        parent_id=str(parent) if parent else None,
        root_id=str(payload.get("session_id") or (parent if parent else thread_id)),
        nickname=str(payload.get("agent_nickname") or (spawn or {}).get("agent_nickname") or ""),
        agent_path=str(payload.get("agent_path") or (spawn or {}).get("agent_path") or ""),
        model=str(payload.get("model") or ""),
    )


def group_rollouts(paths: list[Path]) -> list[list[ThreadMeta]]:
    """Group rollout files into runs: each root thread with all its descendants, root first."""
    metas = [m for m in (thread_meta(p) for p in paths) if m is not None]
    by_id = {m.thread_id: m for m in metas}

    def root_of(meta: ThreadMeta) -> str:
        seen = set()
        while meta.parent_id and meta.parent_id in by_id and meta.thread_id not in seen:
            seen.add(meta.thread_id)
            meta = by_id[meta.parent_id]
        return meta.thread_id

    def run_of(meta: ThreadMeta) -> str:
        top = by_id[root_of(meta)]
        # A thread whose parent is not here still belongs to its session's root (`session_id`), so
        # that a grandchild whose parent's rollout is missing stays in the run of its siblings.
        return top.root_id if top.parent_id else top.thread_id

    groups: dict[str, list[ThreadMeta]] = {}
    for meta in metas:
        groups.setdefault(run_of(meta), []).append(meta)
    return [sorted(g, key=lambda m: (m.thread_id != root, str(m.path))) for root, g in groups.items()]


def group(files: list[Path], root: Path | None) -> tuple[list[RunSource], list[FormatError]]:
    """A run per root thread, with every descendant rollout (group_rollouts); a file that is no
    rollout is passed over."""
    runs = []
    for threads in group_rollouts(files):
        paths = [m.path for m in threads]
        runs.append(RunSource(name=display_name(paths[0], root), format=FORMAT.name, files=paths, root=root))
    return runs, []


class CodexParser(Parser):
    def parse(self, source: RunSource) -> Iterator[Record]:
        metas = [m for m in (thread_meta(p) for p in source.files) if m is not None]
        warnings: list[ParseWarning] = []
        if not metas:
            raise FormatError("not a Codex rollout: first line is not a session_meta", file=source.name, line=1)
        known = {m.thread_id for m in metas}
        root = next((m for m in metas if not m.parent_id), None)
        main_id = root.thread_id if root is not None else metas[0].root_id
        header = header_from_defaults(source, fallback_task=main_id, agent="Codex")
        model = (root or metas[0]).model
        if not header.backbone_model and model:
            header.backbone_model = model
        yield header
        if root is None:
            # Only sub-agent rollouts are here (an excerpt): keep them as sub-agents of an
            # empty main agent rather than promoting a child to main.
            warnings.append(
                ParseWarning(
                    f"main thread {main_id} is not in the bundle; its sub-agents are "
                    "imported under an empty main agent",
                    file=source.name,
                )
            )
            yield ContextRecord(id=main_id, role=MAIN, label="main agent (rollout not in bundle)")
        yield from read_threads(
            metas, source, main_id=main_id, known=known, warnings=warnings, totals=(totals := _Totals())
        )
        yield from warnings
        yield DerivedOutcomes(shell_calls=totals.shell_calls, tokens=totals.tokens or None)


class _Totals:
    def __init__(self) -> None:
        self.shell_calls = self.tokens = 0


def read_threads(
    metas: list[ThreadMeta],
    source: RunSource,
    *,
    main_id: str,
    known: set[str],
    warnings: list[ParseWarning],
    totals: _Totals,
) -> Iterator[Record]:
    """Every thread's context and events, each timed by its own rollout. A thread whose parent's
    rollout is missing hangs under that parent, kept as an empty sub-agent of the main agent, so
    that it stays at its true depth."""
    aliases: dict[str, str] = {}
    for meta in metas:
        for alias in (meta.thread_id, meta.nickname, meta.agent_path):
            if alias:
                aliases[alias] = meta.thread_id
    missing: list[str] = []
    for meta in metas:
        is_main = meta.thread_id == main_id
        parent = None if is_main else (meta.parent_id or main_id)
        if parent is not None and parent not in known and parent != main_id and parent not in missing:
            missing.append(parent)
            warnings.append(
                ParseWarning(
                    f"parent thread {parent} of {meta.thread_id} is not in the bundle; kept as an empty "
                    "sub-agent of the main agent",
                    file=source.display(meta.path),
                )
            )
            yield ContextRecord(
                id=parent, role=SUB, parent=main_id, label=f"sub-agent {parent} (rollout not in bundle)"
            )
        label = meta.nickname or meta.agent_path or ("main agent" if is_main else meta.thread_id)
        if meta.nickname and meta.agent_path:
            label = f"{meta.nickname} ({meta.agent_path})"
        yield ContextRecord(
            id=meta.thread_id,
            role=MAIN if is_main else SUB,
            parent=parent,
            label=label,
            file=source.relative(meta.path),
        )
        thread = _ThreadReader(meta, source.display(meta.path), aliases)
        yield from thread.events(warnings)
        if thread.first is not None:  # the thread's own clock: its first and last line
            yield ContextRecord(
                id=meta.thread_id, role=MAIN if is_main else SUB, started_at=thread.first, ended_at=thread.last
            )
        totals.shell_calls += thread.shell_calls
        totals.tokens += thread.tokens


class _ThreadReader:
    def __init__(self, meta: ThreadMeta, display: str, aliases: dict[str, str]):
        self.meta = meta
        self.display = display
        self.aliases = aliases
        self.seq = -1
        self.shell_calls = 0
        self.tokens = 0
        self.calls: dict[str, str] = {}  # call_id -> tool name
        self.first: datetime | None = None
        self.last: datetime | None = None

    def _event(self, **kwargs: Any) -> EventRecord:
        self.seq += 1
        return EventRecord(context=self.meta.thread_id, seq=self.seq, **kwargs)

    def events(self, warnings: list) -> Iterator[EventRecord]:
        for lineno, obj in iter_json_lines(
            self.meta.path, display=self.display, tolerate_truncated_tail=True, warnings=warnings
        ):
            if not isinstance(obj, dict):
                continue
            payload = obj.get("payload")
            if not isinstance(payload, dict):
                continue
            ts = parse_timestamp(obj.get("timestamp"), file=self.display, line=lineno)
            if ts is not None:
                self.first = ts if self.first is None or ts < self.first else self.first
                self.last = ts if self.last is None or ts > self.last else self.last
            line_type = obj.get("type")
            if line_type == "response_item":
                yield from self._response_item(payload, ts, lineno)
            elif line_type == "event_msg":
                yield from self._event_msg(payload, ts, lineno)
            elif line_type == "compacted":
                yield self._event(
                    kind="other",
                    timestamp=ts,
                    tool="compacted",
                    text=clip_text(to_text(payload.get("message"))),
                    line=lineno,
                )

    def _response_item(self, payload: dict, ts: Any, lineno: int) -> Iterator[EventRecord]:
        ptype = payload.get("type")
        if ptype == "message":
            text = to_text(payload.get("content"))
            if text:
                yield self._event(
                    kind="message", timestamp=ts, tool=str(payload.get("role", "")), text=clip_text(text), line=lineno
                )
        elif ptype == "reasoning":
            text = to_text(payload.get("summary"))
            if text:
                yield self._event(kind="reasoning", timestamp=ts, text=clip_text(text), line=lineno)
        elif ptype in ("function_call", "custom_tool_call", "local_shell_call"):
            name = str(payload.get("name") or ("local_shell" if ptype == "local_shell_call" else ""))
            raw_args = payload.get("arguments", payload.get("input", payload.get("action")))
            args = _maybe_json(raw_args)
            call_id = str(payload.get("call_id") or payload.get("id") or "")
            self.calls[call_id] = name
            if name in SHELL_TOOLS:
                self.shell_calls += 1
            files: list[str] = []
            kind = "tool_call"
            target = ""
            if name in PATCH_TOOLS:
                patch = raw_args if isinstance(raw_args, str) else to_text(args)
                files = files_from_patch(patch if isinstance(patch, str) else "")
                if isinstance(args, dict) and isinstance(args.get("input"), str):
                    files = files or files_from_patch(args["input"])
                kind = "file_write"
            elif name in SPAWN_TOOLS:
                kind = "spawn"
                target = self._agent_ref(args)
            elif name in WAIT_TOOLS:
                kind = "wait"
                target = self._agent_ref(args)
            elif name in JOIN_TOOLS:
                kind = "join"
                target = self._agent_ref(args)
            else:
                files = files_from_args(args)
            yield self._event(
                kind=kind,
                timestamp=ts,
                tool=name,
                text=clip_text(to_text(args)),
                files=files,
                target=target,
                line=lineno,
            )
        elif ptype in ("function_call_output", "custom_tool_call_output"):
            call_id = str(payload.get("call_id", ""))
            name = self.calls.get(call_id, "")
            output = payload.get("output")
            if isinstance(output, dict):
                output = output.get("content", output)
            text = to_text(output)
            target = self._agent_ref(_maybe_json(text)) if name in SPAWN_TOOLS | WAIT_TOOLS | JOIN_TOOLS else ""
            yield self._event(
                kind="tool_result", timestamp=ts, tool=name, text=clip_text(text), target=target, line=lineno
            )
        elif ptype == "web_search_call":
            yield self._event(
                kind="tool_call",
                timestamp=ts,
                tool="web_search",
                text=clip_text(to_text(payload.get("action"))),
                line=lineno,
            )

    def _event_msg(self, payload: dict, ts: Any, lineno: int) -> Iterator[EventRecord]:
        ptype = payload.get("type")
        if ptype == "token_count":
            info = payload.get("info") or {}
            total = (info.get("total_token_usage") or {}) if isinstance(info, dict) else {}
            if isinstance(total, dict) and isinstance(total.get("total_tokens"), int):
                self.tokens = max(self.tokens, total["total_tokens"])  # running total per thread
        elif ptype in ("error", "stream_error", "turn_aborted"):
            yield self._event(
                kind="error",
                timestamp=ts,
                tool=str(ptype),
                text=clip_text(to_text(payload.get("message") or payload.get("reason"))),
                line=lineno,
            )

    def _agent_ref(self, args: Any) -> str:
        if isinstance(args, dict):
            for key in ("agent_id", "id", "thread_id", "agent_path", "path", "target", "name"):
                value = args.get(key)
                if isinstance(value, str) and value:
                    return self.aliases.get(value, value)
            ids = args.get("ids") or args.get("agent_ids")
            if isinstance(ids, list) and ids:
                return ",".join(self.aliases.get(str(x), str(x)) for x in ids)
        return ""


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


FORMAT = Format(name="codex", description="a Codex rollout", parser=CodexParser, looks_like=looks_like, group=group)
