"""Gemini CLI sessions: `~/.gemini/tmp/<project hash>/chats/session-*.json`, one JSON document, streamed.

The document: `sessionId`, `projectHash`, `startTime`, `lastUpdated` and `messages[]`, each with `id`,
`timestamp` and `type` — `user` (the prompt), `gemini` (the model's turn: `content`, `thoughts[]` each with its
own `timestamp`, `toolCalls[]`, `tokens` {input, output, cached, thoughts, tool, total}, `model`), `info`,
`error`, `warning`. A tool call carries `name`, `args`, `status`, `result` (the function responses),
`resultDisplay` and `timestamp`: when it finished. Sub-agents are tools: a call of `codebase_investigator` (the
CLI's built-in sub-agent), `delegate_to_agent` or `invoke_agent` is a sub-agent of the session, running from its
turn's timestamp to the call's, its words kept in the call's result (the CLI writes no transcript of its own
for it into the session file); calls made in one turn run side by side.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ijson

from .common import clip_text, files_from_args, open_binary, parse_timestamp, read_head, to_text
from .records import (
    MAIN,
    SUB,
    ContextRecord,
    DerivedOutcomes,
    EventRecord,
    Format,
    FormatError,
    Parser,
    Record,
    RunSource,
    header_from_defaults,
)

SUFFIXES = (".json", ".json.gz")
AGENT_TOOLS = frozenset({"codebase_investigator", "delegate_to_agent", "invoke_agent"})
WRITE_TOOLS = frozenset({"write_file", "replace", "edit"})
SHELL_TOOLS = frozenset({"run_shell_command"})


def claims(path: Path) -> bool:
    """A `.json` document that opens with a Gemini CLI session's keys."""
    if not path.name.endswith(SUFFIXES):
        return False
    head = read_head(path, 4096).lstrip()
    return head.startswith(b"{") and b'"sessionId"' in head and b'"projectHash"' in head


def _messages(handle, name: str) -> Iterator[tuple[int, dict]]:
    """The session's messages one by one (ijson)."""
    builder: ijson.ObjectBuilder | None = None
    index = -1
    for prefix, event, value in ijson.parse(handle, use_float=True):
        if builder is not None:
            builder.event(event, value)
            if prefix == "messages.item" and event == "end_map":
                done, builder = builder.value, None
                yield index, done
        elif prefix == "messages.item":
            index += 1
            if event != "start_map":
                raise FormatError("expected a message object", file=name, field=f"messages[{index}]")
            builder = ijson.ObjectBuilder()
            builder.event(event, value)


def _overview(path: Path, name: str) -> tuple[dict[str, Any], Counter]:
    """A first pass: the session's own fields and how often each model answered (for the run's header)."""
    top: dict[str, Any] = {}
    models: Counter = Counter()
    try:
        with open_binary(path) as handle:
            for prefix, event, value in ijson.parse(handle, use_float=True):
                if prefix in ("sessionId", "startTime", "lastUpdated") and event in ("string", "number"):
                    top[prefix] = value
                elif prefix == "messages.item.model" and event == "string" and value:
                    models[value] += 1
    except ijson.JSONError as exc:
        raise FormatError(f"not valid JSON ({exc})", file=name) from exc
    if not isinstance(top.get("sessionId"), str) or not top["sessionId"]:
        raise FormatError("not a Gemini CLI session: no sessionId", file=name, field="sessionId")
    return top, models


class GeminiCliParser(Parser):
    def parse(self, source: RunSource) -> Iterator[Record]:
        path = source.files[0]
        name = source.name
        file = source.relative(path)
        top, models = _overview(path, name)
        start = parse_timestamp(top.get("startTime"), file=name, field="startTime")
        end = parse_timestamp(top.get("lastUpdated"), file=name, field="lastUpdated")
        header = header_from_defaults(source, fallback_task=top["sessionId"], agent="Gemini CLI")
        if not header.backbone_model and models:
            header.backbone_model = models.most_common(1)[0][0][:100]
        yield header
        yield ContextRecord(id="main", role=MAIN, label="Gemini CLI", started_at=start, ended_at=end, file=file)
        reader = _Reader(name, file)
        try:
            with open_binary(path) as handle:
                for index, message in _messages(handle, name):
                    yield from reader.message(index, message)
        except ijson.JSONError as exc:
            raise FormatError(f"not valid JSON ({exc})", file=name) from exc
        # Every agent is timed by its own clock: the session runs from the first to the last time written in it.
        bounds = [t for t in (start, end, *reader.times) if t is not None]
        if bounds:
            yield ContextRecord(id="main", role=MAIN, started_at=min(bounds), ended_at=max(bounds))
        yield DerivedOutcomes(shell_calls=reader.shell_calls, tokens=reader.tokens or None)


class _Reader:
    def __init__(self, name: str, file: str):
        self.name, self.file = name, file
        self.seq = 0
        self.shell_calls = self.tokens = 0
        self.times: list = []

    def _event(self, kind: str, ts, tool: str, text: str, **more) -> EventRecord:
        self.seq += 1
        return EventRecord(context="main", seq=self.seq - 1, kind=kind, timestamp=ts, tool=tool[:100],
                           text=clip_text(text), **more)  # fmt: skip

    def message(self, index: int, message: dict) -> Iterator[Record]:
        where = f"messages[{index}]"
        ts = parse_timestamp(message.get("timestamp"), file=self.name, field=f"{where}.timestamp")
        if ts is not None:
            self.times.append(ts)
        kind = message.get("type")
        if kind == "user":
            yield self._event("message", ts, "user", to_text(message.get("content")))
            return
        if kind != "gemini":
            yield self._event("error" if kind == "error" else "other", ts, str(kind or ""),
                              to_text(message.get("content")))  # fmt: skip
            return
        usage = message.get("tokens") if isinstance(message.get("tokens"), dict) else {}
        total = usage.get("total")
        if isinstance(total, int) and not isinstance(total, bool) and total > 0:
            self.tokens += total
        for n, thought in enumerate(message.get("thoughts") or []):
            if isinstance(thought, dict):
                at = parse_timestamp(thought.get("timestamp"), file=self.name,
                                     field=f"{where}.thoughts[{n}].timestamp") or ts  # fmt: skip
                text = "\n".join(str(thought.get(k) or "") for k in ("subject", "description")).strip()
                yield self._event("reasoning", at, "thought", text)
        if message.get("content"):
            yield self._event("message", ts, str(message.get("model") or "gemini"), to_text(message.get("content")))
        calls = message.get("toolCalls") or []
        if not isinstance(calls, list):
            raise FormatError("expected a list of tool calls", file=self.name, field=f"{where}.toolCalls")
        for n, call in enumerate(calls):
            yield from self._call(call, ts, f"{where}.toolCalls[{n}]")

    def _call(self, call: Any, ts, where: str) -> Iterator[Record]:
        """One tool call's events, or the sub-agent it ran (a spawn and a join in the session)."""
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise FormatError("expected a tool call with a name", file=self.name, field=where)
        tool = call["name"]
        done = parse_timestamp(call.get("timestamp"), file=self.name, field=f"{where}.timestamp") or ts
        if done is not None:
            self.times.append(done)
        args = call.get("args") if isinstance(call.get("args"), dict) else {}
        result = to_text(call.get("resultDisplay") or _responses(call.get("result")))
        status = str(call.get("status") or "")
        if tool in AGENT_TOOLS:
            agent = f"agent-{call.get('id') or where}"
            label = str(args.get("agent_name") or call.get("displayName") or tool)[:200]
            yield ContextRecord(id=agent[:255], role=SUB, parent="main", label=label, started_at=ts, ended_at=done,
                                status=status[:50], file=self.file)  # fmt: skip
            brief = to_text(args.get("objective") or args.get("prompt") or args)
            yield self._event("spawn", ts, tool, brief, target=agent[:255])
            yield self._event("join", done, tool, result, target=agent[:255])
            return
        if tool in SHELL_TOOLS:
            self.shell_calls += 1
        kind = "file_write" if tool in WRITE_TOOLS else "tool_call"
        yield self._event(kind, ts, tool, to_text(args), files=files_from_args(args))
        yield self._event("error" if status in ("error", "cancelled") else "tool_result", done, tool, result)


def _responses(result: Any) -> str:
    """The outputs of a tool call's function responses."""
    outputs = []
    for item in result if isinstance(result, list) else []:
        response = (item.get("functionResponse") or {}).get("response") if isinstance(item, dict) else None
        if isinstance(response, dict):
            outputs.append(to_text(response.get("output", response.get("error", response))))
    return "\n".join(outputs)


FORMAT = Format(name="gemini_cli", description="a Gemini CLI session", parser=GeminiCliParser, suffixes=SUFFIXES,
                claims=claims)  # fmt: skip
