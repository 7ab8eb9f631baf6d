"""Parallax JSONL (format `parallax/1`): our documented canonical format (docs/format.md).

Line 1 is the run header; then `context` and `event` lines. Everything is validated as it
streams; the first problem raises FormatError with file, line and field.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .common import clip_text, iter_json_lines, parse_timestamp
from .records import (
    EVENT_KINDS,
    MAIN,
    MODES,
    SUB,
    ContextRecord,
    EventRecord,
    Format,
    FormatError,
    Parser,
    Record,
    RunHeader,
    RunSource,
)

FORMAT_TAG = "parallax/1"

# The largest values the integer columns hold (PositiveIntegerField, PositiveBigIntegerField).
# Larger ones are input errors: PostgreSQL would refuse the row, and a binary COPY wrap the value.
MAX_INT = 2**31 - 1
MAX_BIGINT = 2**63 - 1
_INT_OUTCOMES = {"tests_passed": MAX_INT, "tests_total": MAX_INT, "shell_calls": MAX_INT, "tokens": MAX_BIGINT}


def looks_like(first_line: Any) -> bool:
    """A Parallax header, or a Parallax body line in first place (the parser then says the header is missing)."""
    if not isinstance(first_line, dict):
        return False
    if first_line.get("type") == "run":
        return str(first_line.get("format", "")).startswith("parallax/")
    return (first_line.get("type") == "context" and "id" in first_line) or (
        first_line.get("type") == "event" and "context" in first_line and "seq" in first_line
    )


class ParallaxJsonlParser(Parser):
    def parse(self, source: RunSource) -> Iterator[Record]:
        path = source.files[0]
        name = source.name
        seen_contexts: set[str] = set()
        seqs: dict[str, set[int]] = {}
        header_done = False
        for lineno, obj in iter_json_lines(path, display=name):
            if not isinstance(obj, dict):
                raise FormatError("each line must be a JSON object", file=name, line=lineno)
            kind = obj.get("type")
            if not header_done:
                if kind != "run":
                    raise FormatError(
                        'the first line must be the run header ("type": "run")', file=name, line=lineno, field="type"
                    )
                yield parse_header(obj, name=name, line=lineno, defaults=source.header_defaults)
                header_done = True
                continue
            if kind == "context":
                ctx = parse_context(obj, name=name, line=lineno)
                if ctx.id in seen_contexts:
                    raise FormatError(f"duplicate context id {ctx.id!r}", file=name, line=lineno, field="id")
                seen_contexts.add(ctx.id)
                seqs[ctx.id] = set()
                yield ctx
            elif kind == "event":
                event = parse_event(obj, name=name, line=lineno)
                if event.context not in seen_contexts:
                    raise FormatError(
                        f"event refers to context {event.context!r}, which is not declared on an earlier line",
                        file=name,
                        line=lineno,
                        field="context",
                    )
                if event.seq in seqs[event.context]:
                    raise FormatError(
                        f"duplicate seq {event.seq} in context {event.context!r}", file=name, line=lineno, field="seq"
                    )
                seqs[event.context].add(event.seq)
                yield event
            elif kind == "run":
                raise FormatError("a second run header; one run per file", file=name, line=lineno, field="type")
            else:
                raise FormatError(
                    f"unknown line type {kind!r} (expected context or event)", file=name, line=lineno, field="type"
                )
        if not header_done:
            raise FormatError("empty file: no run header", file=name)


def _require(
    obj: dict, key: str, typ: type | tuple, *, name: str, line: int, field: str | None = None, allow_none: bool = False
) -> Any:
    field = field or key
    if key not in obj:
        raise FormatError("missing required field", file=name, line=line, field=field)
    value = obj[key]
    if value is None and allow_none:
        return None
    if isinstance(value, bool) and typ is not bool and bool not in (typ if isinstance(typ, tuple) else (typ,)):
        raise FormatError(f"expected {_type_name(typ)}, got boolean", file=name, line=line, field=field)
    if not isinstance(value, typ):
        raise FormatError(f"expected {_type_name(typ)}, got {type(value).__name__}", file=name, line=line, field=field)
    return value


def _optional(
    obj: dict, key: str, typ: type | tuple, *, name: str, line: int, field: str | None = None, default: Any = None
) -> Any:
    if obj.get(key) is None:
        return default
    return _require(obj, key, typ, name=name, line=line, field=field)


def _type_name(typ: type | tuple) -> str:
    if isinstance(typ, tuple):
        return " or ".join(t.__name__ for t in typ)
    return {"str": "string", "int": "integer", "dict": "object", "list": "array", "bool": "boolean"}.get(
        typ.__name__, typ.__name__
    )


def parse_header(obj: dict, *, name: str, line: int, defaults: dict | None = None) -> RunHeader:
    task = _require(obj, "task", dict, name=name, line=line)
    agent = _require(obj, "agent", dict, name=name, line=line)
    benchmark = _require(task, "benchmark", str, name=name, line=line, field="task.benchmark")
    task_id = _require(task, "id", str, name=name, line=line, field="task.id")
    difficulty = _optional(task, "difficulty", str, name=name, line=line, field="task.difficulty", default="")
    system = _require(agent, "system", str, name=name, line=line, field="agent.system")
    model = _optional(agent, "model", str, name=name, line=line, field="agent.model", default="")
    mode = _require(obj, "mode", str, name=name, line=line)
    if mode not in MODES:
        raise FormatError(f"must be one of {', '.join(MODES)}, got {mode!r}", file=name, line=line, field="mode")
    for key, value in (("task.benchmark", benchmark), ("task.id", task_id), ("agent.system", system)):
        if not value.strip():
            raise FormatError("must not be empty", file=name, line=line, field=key)
    outcomes = validate_outcomes(obj.get("outcomes") or {}, name=name, line=line)
    header = RunHeader(
        benchmark=benchmark.strip(),
        task_id=task_id.strip(),
        agent=system.strip(),
        mode=mode,
        difficulty=difficulty.strip(),
        backbone_model=model.strip(),
        prompt_sha256=_optional(
            task, "prompt_sha256", str, name=name, line=line, field="task.prompt_sha256", default=""
        ),
        run_id=_optional(obj, "run_id", str, name=name, line=line, default=""),
        outcomes=outcomes,
    )
    return header


def validate_outcomes(outcomes: Any, *, name: str, line: int | None, prefix: str = "outcomes") -> dict:
    """Type-check outcome fields; returns only the known, non-null ones."""
    if not isinstance(outcomes, dict):
        raise FormatError("expected an object", file=name, line=line, field=prefix)
    clean: dict[str, object] = {}
    for key, limit in _INT_OUTCOMES.items():
        value = outcomes.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise FormatError(
                f"expected a non-negative integer, got {value!r}", file=name, line=line, field=f"{prefix}.{key}"
            )
        if value > limit:
            raise FormatError(f"too large: at most {limit}, got {value}", file=name, line=line, field=f"{prefix}.{key}")
        clean[key] = value
    for key in ("duration_s", "test_pass"):
        value = outcomes.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise FormatError(
                f"expected a non-negative number, got {value!r}", file=name, line=line, field=f"{prefix}.{key}"
            )
        clean[key] = float(value)
    if "test_pass" in clean and clean["test_pass"] > 1:
        raise FormatError("is a fraction in [0, 1]", file=name, line=line, field=f"{prefix}.test_pass")
    value = outcomes.get("task_pass")
    if value is not None:
        if not isinstance(value, bool):
            raise FormatError(
                f"expected true or false, got {value!r}", file=name, line=line, field=f"{prefix}.task_pass"
            )
        clean["task_pass"] = value
    if "tests_passed" in clean and "tests_total" in clean and clean["tests_passed"] > clean["tests_total"]:
        raise FormatError(
            "tests_passed is larger than tests_total", file=name, line=line, field=f"{prefix}.tests_passed"
        )
    return clean


def parse_context(obj: dict, *, name: str, line: int) -> ContextRecord:
    ctx_id = _require(obj, "id", str, name=name, line=line)
    if not ctx_id:
        raise FormatError("must not be empty", file=name, line=line, field="id")
    parent = _optional(obj, "parent", str, name=name, line=line)
    role = _optional(obj, "role", str, name=name, line=line, default=MAIN if parent is None else SUB)
    if role not in (MAIN, SUB):
        raise FormatError(f"must be 'main' or 'sub', got {role!r}", file=name, line=line, field="role")
    if role == MAIN and parent is not None:
        raise FormatError("the main context has no parent", file=name, line=line, field="parent")
    if role == SUB and parent is None:
        raise FormatError("a sub-agent context needs a parent", file=name, line=line, field="parent")
    if parent == ctx_id:
        raise FormatError("a context cannot be its own parent", file=name, line=line, field="parent")
    started = parse_timestamp(obj.get("started_at"), file=name, line=line, field="started_at", require_tz=True)
    ended = parse_timestamp(obj.get("ended_at"), file=name, line=line, field="ended_at", require_tz=True)
    if started and ended and ended < started:
        raise FormatError("ended_at is before started_at", file=name, line=line, field="ended_at")
    return ContextRecord(
        id=ctx_id,
        role=role,
        parent=parent,
        label=_optional(obj, "label", str, name=name, line=line, default=""),
        started_at=started,
        ended_at=ended,
        status=_optional(obj, "status", str, name=name, line=line, default=""),
        line=line,
    )


_EVENT_KIND_SET = frozenset(EVENT_KINDS)


def parse_event(obj: dict, *, name: str, line: int) -> EventRecord:
    """The hot path of an import: a well-formed line is checked with plain type tests; the
    first anomaly falls back to the general validator, which names the field."""
    get = obj.get
    context, seq, kind = get("context"), get("seq"), get("kind")
    files = get("files")
    files = [] if files is None else files  # only a missing/null field takes the default
    text, tool, target = ("" if v is None else v for v in (get("text"), get("tool"), get("target")))
    if (
        type(context) is str
        and type(seq) is int
        and 0 <= seq <= MAX_INT
        and kind in _EVENT_KIND_SET
        and type(files) is list
        and all(type(f) is str for f in files)
        and type(text) is str
        and type(tool) is str
        and type(target) is str
    ):
        return EventRecord(
            context=context,
            seq=seq,
            kind=kind,
            timestamp=parse_timestamp(obj.get("ts"), file=name, line=line, field="ts", require_tz=True),
            tool=tool,
            text=clip_text(text),
            files=files,
            target=target,
            line=line,
        )
    return _parse_event_checked(obj, name=name, line=line)


def _parse_event_checked(obj: dict, *, name: str, line: int) -> EventRecord:
    context = _require(obj, "context", str, name=name, line=line)
    seq = _require(obj, "seq", int, name=name, line=line)
    if seq < 0:
        raise FormatError("must be a non-negative integer", file=name, line=line, field="seq")
    if seq > MAX_INT:
        raise FormatError(f"too large: at most {MAX_INT}, got {seq}", file=name, line=line, field="seq")
    kind = _require(obj, "kind", str, name=name, line=line)
    if kind not in EVENT_KINDS:
        raise FormatError(f"unknown kind {kind!r}; one of {', '.join(EVENT_KINDS)}", file=name, line=line, field="kind")
    files = _optional(obj, "files", list, name=name, line=line, default=[])
    for index, item in enumerate(files):
        if not isinstance(item, str):
            raise FormatError("expected a string", file=name, line=line, field=f"files[{index}]")
    text = _optional(obj, "text", str, name=name, line=line, default="")
    return EventRecord(
        context=context,
        seq=seq,
        kind=kind,
        timestamp=parse_timestamp(obj.get("ts"), file=name, line=line, field="ts", require_tz=True),
        tool=_optional(obj, "tool", str, name=name, line=line, default=""),
        text=clip_text(text),
        files=files,
        target=_optional(obj, "target", str, name=name, line=line, default=""),
        line=line,
    )


FORMAT = Format(name="parallax", description="Parallax JSONL", parser=ParallaxJsonlParser, looks_like=looks_like)
