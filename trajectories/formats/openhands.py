"""OpenHands event streams: a JSON list of events, streamed with ijson.

Each event has `id`, `timestamp` (ISO, no zone: read as UTC), `source` (user/agent/environment),
and either `action` (message, run, run_ipython, read, edit, write, browse, think, finish,
delegate …) with `args`, or `observation` with `content`/`message`. The whole stream is the
main agent; `delegate` actions (OpenHands' sub-agents) are kept as spawn events.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import ijson

from .common import clip_text, files_from_args, open_binary, parse_timestamp, read_head, to_text
from .records import (
    MAIN,
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

WRITE_ACTIONS = {"edit", "write"}
SHELL_ACTIONS = {"run"}


SUFFIXES = (".json", ".json.gz")


def claims(path: Path) -> bool:
    """A `.json` file holding a list of events."""
    if not path.name.endswith(SUFFIXES):
        return False
    head = read_head(path, 4096).lstrip()
    return head.startswith(b"[") and b'"source"' in head and (b'"action"' in head or b'"observation"' in head)


class OpenHandsParser(Parser):
    def parse(self, source: RunSource) -> Iterator[Record]:
        path = source.files[0]
        name = source.name
        yield header_from_defaults(source, fallback_task=path.name.split(".json")[0], agent="OpenHands")
        yield ContextRecord(id="main", role=MAIN, label="OpenHands agent")
        shell_calls = 0
        seq = -1
        try:
            with open_binary(path) as handle:
                for index, item in enumerate(ijson.items(handle, "item", use_float=True)):
                    if not isinstance(item, dict):
                        raise FormatError("expected an event object", file=name, field=f"[{index}]")
                    ts = parse_timestamp(item.get("timestamp"), file=name, field=f"[{index}].timestamp")
                    action = item.get("action")
                    args = item.get("args") if isinstance(item.get("args"), dict) else {}
                    seq += 1
                    if action:
                        action = str(action)
                        if action in SHELL_ACTIONS:
                            shell_calls += 1
                        if action == "message":
                            kind, text = "message", to_text(args.get("content") or item.get("message"))
                        elif action == "think":
                            kind, text = "reasoning", to_text(args.get("thought"))
                        elif action == "delegate":
                            kind, text = "spawn", to_text(args.get("inputs") or args)
                        elif action in WRITE_ACTIONS:
                            kind, text = "file_write", to_text(args.get("content") or args.get("file_text") or "")
                        elif action == "finish":
                            kind, text = "message", to_text(args.get("outputs") or item.get("message"))
                        else:
                            kind, text = "tool_call", to_text(args.get("command") or args.get("code") or args)
                        yield EventRecord(
                            context="main",
                            seq=seq,
                            kind=kind,
                            timestamp=ts,
                            tool=action if action != "message" else str(item.get("source", "")),
                            text=clip_text(text),
                            files=files_from_args(args),
                            target=str(args.get("agent", "")) if action == "delegate" else "",
                        )
                    elif item.get("observation"):
                        kind = "error" if item.get("observation") == "error" else "tool_result"
                        yield EventRecord(
                            context="main",
                            seq=seq,
                            kind=kind,
                            timestamp=ts,
                            tool=str(item["observation"]),
                            text=clip_text(to_text(item.get("content") or item.get("message"))),
                        )
                    else:
                        seq -= 1
        except ijson.JSONError as exc:
            raise FormatError(f"not valid JSON ({exc})", file=name) from exc
        yield DerivedOutcomes(shell_calls=shell_calls)


FORMAT = Format(
    name="openhands", description="an OpenHands event list", parser=OpenHandsParser, suffixes=SUFFIXES, claims=claims
)
