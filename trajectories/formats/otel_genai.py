"""OpenTelemetry GenAI traces: OTLP JSON exports of agent, model and tool spans (docs/format.md).

One file is one trace: a `.json` file holding one OTLP/JSON export request (`{"resourceSpans": …}`, as an
OTLP/HTTP receiver or a Langfuse/Phoenix-style export writes it), or a JSON-lines file with one request per
line (the Collector's file exporter). Spans are streamed (ijson / line by line) and kept as small summaries;
the tree is built from `spanId`/`parentSpanId` once every span is read, because exporters write children
before their parents.

The GenAI semantic conventions name what a span is by `gen_ai.operation.name`:

* `invoke_agent` — an agent runs. The outermost agent span is the main agent; an agent span inside another
  agent's span (directly, or under a tool call: agents as tools) is a **sub-agent** with its own lane, its
  parent the agent it runs inside, its times the span's. Several outermost agent spans (a workflow that starts
  agents side by side) are sub-agents of the trace's root, which is then the main agent. The parent agent gets
  a `spawn` event when a sub-agent starts and a `join` when it ends.
* `chat` / `text_completion` / `generate_content` — a model call: a `message` event (the reply's text and tool
  calls from `gen_ai.output.messages`), its tokens counted (`gen_ai.usage.input_tokens` + `output_tokens`).
* `execute_tool` — a tool call (`gen_ai.tool.name`, `gen_ai.tool.call.arguments`) and its result
  (`gen_ai.tool.call.result`, if recorded) at the span's end.
* any other span — an `other` event named after the span; a span with error status adds an `error` event.
"""

from __future__ import annotations

import gzip
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ijson
import orjson

from .common import clip_text, files_from_args, iter_json_lines, open_binary, read_head, read_line, to_text
from .records import (
    JSONL_SUFFIXES,
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

SUFFIXES = (".json", *JSONL_SUFFIXES)
AGENT_OPS = frozenset({"invoke_agent"})
MODEL_OPS = frozenset({"chat", "text_completion", "generate_content"})
TOOL_OPS = frozenset({"execute_tool"})
SHELL_TOOLS = frozenset({"bash", "shell", "run_shell_command", "exec_command", "execute_command", "run_terminal_cmd"})
ERROR_CODES = frozenset({2, "2", "STATUS_CODE_ERROR"})
LABEL_MAX = 200
TOOL_MAX = 100

_SPAN = "resourceSpans.item.scopeSpans.item.spans.item"
_RESOURCE_ATTR = "resourceSpans.item.resource.attributes.item"


def claims(path: Path) -> bool:
    """A `.json` file holding one OTLP/JSON export request."""
    if not path.name.endswith((".json", ".json.gz")):
        return False
    head = read_head(path, 4096).lstrip()
    return head.startswith(b"{") and b'"resourceSpans"' in head


def looks_like(first: Any) -> bool:
    """A JSON-lines file whose lines are OTLP/JSON export requests."""
    return isinstance(first, dict) and isinstance(first.get("resourceSpans"), list)


@dataclass(slots=True)
class _Span:
    """What Parallax keeps of one span (texts already clipped)."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start: int  # ns since the epoch
    end: int
    where: str  # the span's path in the file, for messages
    line: int | None
    op: str = ""
    agent: str = ""
    model: str = ""
    tool: str = ""
    arguments: str = ""
    result: str = ""
    output: str = ""
    tokens: int = 0
    error: str = ""
    files: list[str] = field(default_factory=list)
    children: list[_Span] = field(default_factory=list)


class OtelGenAIParser(Parser):
    def parse(self, source: RunSource) -> Iterator[Record]:
        path = source.files[0]
        name = source.name
        warnings: list[ParseWarning] = []
        services: list[str] = []
        spans = list(_read_spans(path, name, services))
        if not spans:
            raise FormatError("no spans in the export", file=name, field="resourceSpans")
        traces = sorted({s.trace_id for s in spans})
        if len(traces) > 1:
            raise FormatError(
                f"holds spans of {len(traces)} traces ({', '.join(t[:16] for t in traces[:3])}…); Parallax reads "
                "one trace per file: export each trace to its own file",
                file=name,
                field="traceId",
            )
        roots = _tree(spans, name, warnings)
        service = next((s for s in services if s and not s.startswith("unknown_service")), "")
        header = header_from_defaults(source, fallback_task=traces[0], agent=service or "OpenTelemetry GenAI")
        if not header.backbone_model:
            models = Counter(s.model for s in spans if s.op in MODEL_OPS and s.model)
            header.backbone_model = models.most_common(1)[0][0][:100] if models else ""
        yield header
        yield from warnings
        yield from _Reader(source, roots).records()


def _ns(value: Any, *, file: str, line: int | None, field: str) -> int:
    """OTLP/JSON times: nanoseconds since the epoch as a string of digits (or a JSON integer)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise FormatError(
        f"expected nanoseconds since the epoch (a string of digits), got {value!r:.60}", file=file, line=line,
        field=field,
    )  # fmt: skip


def _any_value(value: Any) -> Any:
    """An OTLP AnyValue as a plain value."""
    if not isinstance(value, dict):
        return value
    for key in ("stringValue", "boolValue", "doubleValue", "bytesValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        raw = value["intValue"]
        return int(raw) if isinstance(raw, int) or (isinstance(raw, str) and raw.lstrip("-").isdigit()) else raw
    if "arrayValue" in value:
        return [_any_value(v) for v in (value["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in value:
        return {kv.get("key"): _any_value(kv.get("value")) for kv in (value["kvlistValue"] or {}).get("values", [])}
    return None


def _attributes(raw: Any, *, file: str, line: int | None, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise FormatError("expected a list of {key, value} attributes", file=file, line=line, field=where)
    found: dict[str, Any] = {}
    for index, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise FormatError("expected an attribute {key, value}", file=file, line=line, field=f"{where}[{index}]")
        found[item["key"]] = _any_value(item.get("value"))
    return found


def _text(value: Any) -> str:
    return clip_text(value if isinstance(value, str) else to_text(value))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _span(raw: Any, *, file: str, line: int | None, where: str) -> _Span:
    if not isinstance(raw, dict):
        raise FormatError("expected a span object", file=file, line=line, field=where)
    ids = {}
    for key in ("traceId", "spanId"):
        value = raw.get(key)
        if not isinstance(value, str) or not value:
            raise FormatError(f"a span needs its {key}", file=file, line=line, field=f"{where}.{key}")
        ids[key] = value
    parent = raw.get("parentSpanId") or ""
    if not isinstance(parent, str):
        raise FormatError("expected a span id (string)", file=file, line=line, field=f"{where}.parentSpanId")
    start = _ns(raw.get("startTimeUnixNano"), file=file, line=line, field=f"{where}.startTimeUnixNano")
    end = _ns(raw.get("endTimeUnixNano"), file=file, line=line, field=f"{where}.endTimeUnixNano")
    if end < start:
        raise FormatError("ends before it starts", file=file, line=line, field=f"{where}.endTimeUnixNano")
    attrs = _attributes(raw.get("attributes"), file=file, line=line, where=f"{where}.attributes")
    status = raw.get("status") if isinstance(raw.get("status"), dict) else {}
    span = _Span(
        trace_id=ids["traceId"],
        span_id=ids["spanId"],
        parent_id=parent,
        name=str(raw.get("name") or ""),
        start=start,
        end=end,
        where=where,
        line=line,
        op=str(attrs.get("gen_ai.operation.name") or ""),
        agent=str(attrs.get("gen_ai.agent.name") or ""),
        model=str(attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model") or ""),
        tool=str(attrs.get("gen_ai.tool.name") or ""),
        tokens=_int(attrs.get("gen_ai.usage.input_tokens")) + _int(attrs.get("gen_ai.usage.output_tokens")),
    )
    if status.get("code") in ERROR_CODES:
        span.error = clip_text(str(status.get("message") or attrs.get("error.type") or "error status"))
    if span.op in TOOL_OPS:
        arguments = attrs.get("gen_ai.tool.call.arguments")
        span.arguments = _text(arguments or "")
        span.result = _text(attrs.get("gen_ai.tool.call.result") or "")
        parsed = arguments
        if isinstance(arguments, str):
            try:
                parsed = orjson.loads(arguments)
            except orjson.JSONDecodeError:
                parsed = None
        span.files = files_from_args(parsed)
    elif span.op in MODEL_OPS or span.op in AGENT_OPS:  # a model's reply; what an agent answered (its join)
        span.output = _reply(attrs.get("gen_ai.output.messages"))
    return span


def _reply(messages: Any) -> str:
    """The text and tool calls of a model call's output messages (semantic conventions' parts)."""
    if isinstance(messages, str):
        try:
            messages = orjson.loads(messages)
        except orjson.JSONDecodeError:
            return clip_text(messages)
    lines = []
    for message in messages if isinstance(messages, list) else []:
        for part in (message.get("parts") or []) if isinstance(message, dict) else []:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "tool_call":
                lines.append(f"tool call {part.get('name', '')}({to_text(part.get('arguments'))})")
            elif isinstance(part.get("content"), str):
                lines.append(part["content"])
    return clip_text("\n".join(lines))


def _read_spans(path: Path, name: str, services: list[str]) -> Iterator[_Span]:
    if _json_lines(path, name):
        for line, request in iter_json_lines(path, display=name):
            if not looks_like(request):
                raise FormatError("expected an OTLP/JSON export request", file=name, line=line, field="resourceSpans")
            yield from _request_spans(request, name, line, services)
        return
    try:
        with open_binary(path) as handle:
            yield from _stream_spans(handle, name, services)
    except ijson.JSONError as exc:
        raise FormatError(f"not valid JSON ({exc})", file=name) from exc


def _json_lines(path: Path, name: str) -> bool:
    """Requests one per line (the Collector's file exporter, whatever the file's suffix), or one request
    spread over many lines (pretty-printed): told by whether the first line alone is a whole request."""
    try:
        with open_binary(path) as handle:
            first = read_line(handle, name=name, lineno=1)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise FormatError(f"cannot read file: {exc}", file=name) from exc
    try:
        return looks_like(orjson.loads(first))
    except orjson.JSONDecodeError:
        return False


def _request_spans(request: dict, name: str, line: int | None, services: list[str]) -> Iterator[_Span]:
    for r, resource in enumerate(request["resourceSpans"]):
        where = f"resourceSpans[{r}]"
        if not isinstance(resource, dict):
            raise FormatError("expected a resource object", file=name, line=line, field=where)
        raw_attrs = (resource.get("resource") or {}).get("attributes")
        attrs = _attributes(raw_attrs, file=name, line=line, where=f"{where}.resource.attributes")
        services.append(str(attrs.get("service.name") or ""))
        for s, scope in enumerate(resource.get("scopeSpans") or []):
            spans = scope.get("spans") if isinstance(scope, dict) else None
            if not isinstance(spans, list):
                raise FormatError("expected a list of spans", file=name, line=line, field=f"{where}.scopeSpans[{s}]")
            for n, raw in enumerate(spans):
                yield _span(raw, file=name, line=line, where=f"{where}.scopeSpans[{s}].spans[{n}]")


def _stream_spans(handle, name: str, services: list[str]) -> Iterator[_Span]:
    """The spans of one pretty-printed request, one at a time (ijson), with their paths in the file."""
    r = s = n = -1
    builder: ijson.ObjectBuilder | None = None
    building = ""
    for prefix, event, value in ijson.parse(handle, use_float=True):
        if builder is not None:
            builder.event(event, value)
            if prefix == building and event in ("end_map", "end_array"):
                done, builder = builder.value, None
                if building == _SPAN:
                    yield _span(done, file=name, line=None, where=f"resourceSpans[{r}].scopeSpans[{s}].spans[{n}]")
                else:
                    attrs = _attributes([done], file=name, line=None, where=f"resourceSpans[{r}].resource.attributes")
                    if "service.name" in attrs:
                        services.append(str(attrs["service.name"] or ""))
            continue
        if event == "start_map" and prefix == "resourceSpans.item":
            r, s = r + 1, -1
        elif event == "start_map" and prefix == "resourceSpans.item.scopeSpans.item":
            s, n = s + 1, -1
        elif prefix in (_SPAN, _RESOURCE_ATTR) and event in ("start_map", "start_array", "string", "number"):
            if prefix == _SPAN:
                n += 1
            builder, building = ijson.ObjectBuilder(), prefix
            builder.event(event, value)
            if event in ("string", "number"):  # not an object: the span check names it
                done, builder = builder.value, None
                yield _span(done, file=name, line=None, where=f"resourceSpans[{r}].scopeSpans[{s}].spans[{n}]")


def _tree(spans: list[_Span], name: str, warnings: list[ParseWarning]) -> list[_Span]:
    """Link every span to its parent; the roots (no parent, or a parent not in the file), earliest first."""
    by_id: dict[str, _Span] = {}
    for span in spans:
        if span.span_id in by_id:
            raise FormatError(f"span id {span.span_id!r} appears twice", file=name, line=span.line,
                              field=f"{span.where}.spanId")  # fmt: skip
        by_id[span.span_id] = span
    roots = []
    for span in spans:
        parent = by_id.get(span.parent_id) if span.parent_id else None
        if span.parent_id and parent is None:
            warnings.append(ParseWarning(f"span {span.span_id}'s parent {span.parent_id} is not in the file; "
                                         "read as a root", file=name, line=span.line))  # fmt: skip
        if parent is None:
            roots.append(span)
        else:
            parent.children.append(span)
    if not roots:
        raise FormatError("the spans' parents form a cycle: no root span", file=name, field="parentSpanId")
    for span in by_id.values():
        span.children.sort(key=lambda c: (c.start, c.end))
    reached = sum(1 for _ in _walk(roots))
    if reached != len(by_id):
        raise FormatError("some spans' parents form a cycle (they reach no root)", file=name, field="parentSpanId")
    return sorted(roots, key=lambda r: (r.start, r.end))


def _walk(spans: list[_Span]) -> Iterator[_Span]:
    stack = list(reversed(spans))
    while stack:
        span = stack.pop()
        yield span
        stack.extend(reversed(span.children))


def _when(ns: int) -> datetime:
    return datetime.fromtimestamp(ns // 1_000_000_000, tz=UTC).replace(microsecond=(ns % 1_000_000_000) // 1000)


def _label(span: _Span) -> str:
    label = span.agent or span.name.removeprefix("invoke_agent ").strip() or span.span_id
    return label[:LABEL_MAX]


@dataclass(slots=True)
class _Pending:
    at: int
    order: int
    context: str
    kind: str
    tool: str = ""
    text: str = ""
    files: list[str] = field(default_factory=list)
    target: str = ""
    line: int | None = None


class _Reader:
    """Contexts and events of one trace's span tree."""

    def __init__(self, source: RunSource, roots: list[_Span]):
        self.file = source.relative(source.files[0])
        self.roots = roots
        self.events: list[_Pending] = []
        self.contexts: list[ContextRecord] = []
        self.shell_calls = 0
        self.model_tokens = 0
        self.agent_tokens = 0
        self.main_agent: _Span | None = None
        self.main_root: _Span | None = None

    def records(self) -> Iterator[Record]:
        under_agent = {c.span_id for s in _walk(self.roots) if s.op in AGENT_OPS for c in _walk(s.children)}
        tops = [span for span in _walk(self.roots) if span.op in AGENT_OPS and span.span_id not in under_agent]
        start = min(r.start for r in self.roots)
        end = max(r.end for r in self.roots)
        self.agent_tokens = sum(span.tokens for span in tops)  # only if no model call says how many it used
        if len(tops) == 1:
            main_span = tops[0]
            label, self.main_agent = _label(main_span), main_span
        else:  # no agent span, or several side by side: the trace's (first) root is the main agent
            self.main_agent = None
            label = (self.roots[0].name or "trace")[:LABEL_MAX]
        self.main_root = self.roots[0] if self.main_agent is None else None
        self.contexts.append(ContextRecord(id="main", role=MAIN, label=label, started_at=_when(start),
                                           ended_at=_when(end), file=self.file))  # fmt: skip
        stack = [(root, "main") for root in reversed(self.roots)]
        while stack:  # depth first, parents before children (a loop: a deep tree needs no deep recursion)
            span, context = stack.pop()
            here = self._visit(span, context)
            stack.extend((child, here) for child in reversed(span.children))
        yield from self.contexts
        self.events.sort(key=lambda e: (e.at, e.order))
        for seq, pending in enumerate(self.events):
            yield EventRecord(context=pending.context, seq=seq, kind=pending.kind, timestamp=_when(pending.at),
                              tool=pending.tool[:TOOL_MAX], text=pending.text, files=pending.files,
                              target=pending.target, line=pending.line)  # fmt: skip
        yield DerivedOutcomes(shell_calls=self.shell_calls, tokens=self.model_tokens or self.agent_tokens or None)

    def _add(self, at: int, context: str, kind: str, span: _Span, **more) -> None:
        self.events.append(_Pending(at=at, order=len(self.events), context=context, kind=kind, line=span.line, **more))

    def _visit(self, span: _Span, context: str) -> str:
        """The span's events; returns the context its children run in."""
        here = context
        if span.op in AGENT_OPS and span is not self.main_agent:
            here = f"agent-{span.span_id}"
            self.contexts.append(ContextRecord(id=here, role=SUB, parent=context, label=_label(span),
                                               started_at=_when(span.start), ended_at=_when(span.end),
                                               status="failed" if span.error else "completed",
                                               file=self.file, line=span.line))  # fmt: skip
            self._add(span.start, context, "spawn", span, tool="invoke_agent", text=_label(span), target=here)
            self._add(span.end, context, "join", span, tool="invoke_agent", text=span.output, target=here)
        elif span.op in MODEL_OPS:
            self.model_tokens += span.tokens
            self._add(span.start, here, "message", span, tool=span.model or span.name, text=span.output)
        elif span.op in TOOL_OPS:
            tool = span.tool or span.name.removeprefix("execute_tool ").strip()
            if tool.lower() in SHELL_TOOLS:
                self.shell_calls += 1
            self._add(span.start, here, "tool_call", span, tool=tool, text=span.arguments, files=span.files)
            if span.result:
                self._add(span.end, here, "tool_result", span, tool=tool, text=span.result)
        elif span is not self.main_root and span is not self.main_agent:
            self._add(span.start, here, "other", span, tool=(span.op or span.name), text=span.name)
        if span.error:
            self._add(span.end, here, "error", span, tool=span.op or span.name, text=span.error)
        return here


FORMAT = Format(
    name="otel_genai",
    description="an OpenTelemetry GenAI trace (OTLP JSON)",
    parser=OtelGenAIParser,
    suffixes=SUFFIXES,
    looks_like=looks_like,
    claims=claims,
)
