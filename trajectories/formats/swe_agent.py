"""SWE-agent trajectories (`*.traj`): one JSON document, streamed with ijson.

`trajectory[]` holds the steps ({thought, action, observation, execution_time, state});
`info` holds `exit_status`, `submission` and `model_stats` (tokens_sent/received). Files that keep
only `history[]` (the messages: system, user, assistant with its `action`, tool) are read from it.
SWE-agent is a single agent: one main context, no sub-agents. Steps carry no wall-clock
timestamps, so the run has no timeline; its duration is the sum of `execution_time`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ijson

from .common import clip_text, open_binary, read_head
from .records import (
    MAIN,
    SEQUENTIAL,
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

EDIT_COMMANDS = ("edit", "create", "append", "insert", "str_replace", "write")


SUFFIXES = (".traj", ".traj.gz")


def claims(path: Path) -> bool:
    """A `.traj` file holding a JSON object."""
    if not path.name.endswith(SUFFIXES):
        return False
    head = read_head(path, 2048)
    return head.lstrip().startswith(b"{")


class SweAgentParser(Parser):
    def parse(self, source: RunSource) -> Iterator[Record]:
        path = source.files[0]
        name = source.name
        header = header_from_defaults(source, fallback_task=path.name.split(".traj")[0], agent="SWE-agent")
        if not header.mode:
            header.mode = SEQUENTIAL  # a single agent: there is nothing concurrent to infer
        yield header
        yield ContextRecord(id="main", role=MAIN, label="SWE-agent")
        duration = 0.0
        seq = -1
        steps = 0
        try:
            with open_binary(path) as handle:
                for index, step in enumerate(ijson.items(handle, "trajectory.item", use_float=True)):
                    if not isinstance(step, dict):
                        raise FormatError("expected an object", file=name, field=f"trajectory[{index}]")
                    steps += 1
                    if isinstance(step.get("execution_time"), (int, float)):
                        duration += float(step["execution_time"])
                    for event in _step_events(step, index):
                        seq += 1
                        event.seq = seq
                        yield event
            if steps == 0:
                with open_binary(path) as handle:
                    for index, message in enumerate(ijson.items(handle, "history.item", use_float=True)):
                        if not isinstance(message, dict):
                            raise FormatError("expected an object", file=name, field=f"history[{index}]")
                        steps += message.get("role") == "assistant"
                        for event in _history_events(message):
                            seq += 1
                            event.seq = seq
                            yield event
                if seq >= 0:
                    yield ParseWarning("no trajectory[]: events read from history[]", file=name)
            info = _info(path, name)
        except ijson.JSONError as exc:
            raise FormatError(f"not valid JSON ({exc})", file=name) from exc
        if seq < 0:
            raise FormatError("no steps in trajectory[] and no messages in history[]: nothing to import", file=name)
        stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else {}
        tokens = sum(v for k, v in stats.items() if k in ("tokens_sent", "tokens_received") and isinstance(v, int))
        yield DerivedOutcomes(shell_calls=steps, tokens=tokens or None, duration_s=round(duration, 3) or None)


def _info(path: Path, name: str) -> dict[str, Any]:
    with open_binary(path) as handle:
        for info in ijson.items(handle, "info", use_float=True):
            return info if isinstance(info, dict) else {}
    return {}


def _history_events(message: dict) -> Iterator[EventRecord]:
    role = message.get("role")
    if role == "assistant":
        yield from _step_events(
            {"thought": message.get("thought") or message.get("content"), "action": message.get("action")}, 0
        )
    elif role == "tool":
        text = _content_text(message.get("content"))
        if text:
            yield EventRecord(context="main", seq=0, kind="tool_result", text=clip_text(text))
    elif role in ("system", "user"):
        text = _content_text(message.get("content"))
        if text:
            yield EventRecord(context="main", seq=0, kind="message", tool=str(role), text=clip_text(text))


def _content_text(content: Any) -> str:
    """A message's content: a string, or a list of {type: text, text} parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _step_events(step: dict, index: int) -> Iterator[EventRecord]:
    state = step.get("state") if isinstance(step.get("state"), dict) else {}
    thought = step.get("thought") or step.get("response") or ""
    if isinstance(thought, str) and thought.strip():
        yield EventRecord(context="main", seq=0, kind="reasoning", text=clip_text(thought))
    action = step.get("action")
    if isinstance(action, str) and action.strip():
        command = action.strip().split()[0]
        is_edit = command in EDIT_COMMANDS or (command == "str_replace_editor" and " view " not in f" {action} ")
        open_file = state.get("open_file") if isinstance(state.get("open_file"), str) else ""
        files = [open_file] if is_edit and open_file and open_file != "n/a" else []
        yield EventRecord(
            context="main",
            seq=0,
            kind="file_write" if is_edit else "tool_call",
            tool=command,
            text=clip_text(action),
            files=files,
        )
    observation = step.get("observation")
    if isinstance(observation, str) and observation:
        yield EventRecord(context="main", seq=0, kind="tool_result", text=clip_text(observation))


FORMAT = Format(
    name="swe_agent", description="a SWE-agent trajectory", parser=SweAgentParser, suffixes=SUFFIXES, claims=claims
)
