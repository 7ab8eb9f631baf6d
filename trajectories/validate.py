"""Checks one parsed run as its records stream past, and computes what is stored about it.

ORM-free: parser records in (formats/records.py), plain values out. The writer (writer.py) feeds
a run's records through `RunCheck.events()`, stores the event rows it yields, then calls
`finish()` for the run's and its contexts' final values. Every refusal is a `FormatError` naming
file, line and field. Field lengths come from the models' own `max_length` (read once from their
metadata; no query).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from . import metrics
from .formats.records import (
    CONCURRENT,
    MAIN,
    OUTCOME_FIELDS,
    SEQUENTIAL,
    ContextRecord,
    DerivedOutcomes,
    EventRecord,
    FormatError,
    ParseWarning,
    RunHeader,
    RunSource,
)
from .models import AgentContext, AgentSystem, Benchmark, Event, Run, Task


def _max(model, name: str) -> int:
    return model._meta.get_field(name).max_length


# Header fields checked against the column they are stored in: (header attribute, field name in
# messages, the model field's max_length).
HEADER_LIMITS = (
    ("benchmark", "task.benchmark", _max(Benchmark, "name")),
    ("task_id", "task.id", _max(Task, "external_id")),
    ("difficulty", "task.difficulty", _max(Task, "difficulty")),
    ("prompt_sha256", "task.prompt_sha256", _max(Task, "prompt_sha256")),
    ("agent", "agent.system", _max(AgentSystem, "name")),
    ("backbone_model", "agent.model", min(_max(AgentSystem, "backbone_model"), _max(Run, "backbone_model"))),
    ("run_id", "run_id", _max(Run, "external_id")),
)
CONTEXT_ID_MAX = _max(AgentContext, "external_id")
# Free-text tokens from native logs are cut to their column rather than refused.
STATUS_MAX = _max(AgentContext, "status")
SOURCE_FILE_MAX = _max(AgentContext, "source_file")  # RunFile paths are checked as stored
WORKFLOW_MAX = _max(AgentContext, "workflow")
SLOT_MAX = _max(AgentContext, "slot")
ATTEMPT_MAX = 32767  # PositiveSmallIntegerField
TOOL_MAX = _max(Event, "tool")
TARGET_MAX = _max(Event, "target")
SOURCE_NAME_MAX = _max(Run, "source_name")
MAX_WARNINGS = 200

_FILE_KINDS = frozenset(("file_write", "tool_call"))

# An event row as the writer stores it: the context's key (its id in the source), then the
# Event columns seq, timestamp (aware UTC or None), kind, tool, text, files, target, source_line, source_file.
EventRow = tuple


@dataclass(slots=True)
class _Seen:
    """What is learned about one context while its events stream past."""

    record: ContextRecord
    position: int
    n_events: int = 0
    first_ts: datetime | None = None
    last_ts: datetime | None = None
    files: set[str] = field(default_factory=set)


@dataclass(slots=True)
class CheckedContext:
    key: str
    parent: str | None
    role: str
    label: str
    status: str
    started_at: datetime | None
    ended_at: datetime | None
    n_events: int
    files_touched: list[str]
    depth: int
    position: int
    source_file: str
    workflow: str = ""
    slot: str = ""
    attempt: int | None = None
    attempts: int | None = None


@dataclass
class CheckedRun:
    header: RunHeader
    mode: str
    mode_inferred: bool
    fields: dict[str, object]  # the Run's outcomes, metrics, span, counts and warnings
    contexts: list[CheckedContext]  # in order of appearance


class RunCheck:
    """One run's checks. `events(records)` yields the event rows to store; `finish()` then
    validates the whole run (one main context, parents declared, no cycles, intervals) and
    returns its final values."""

    def __init__(self, source: RunSource):
        self.name = source.name
        self.header: RunHeader | None = None
        self.contexts: dict[str, _Seen] = {}
        self.warnings: list[str] = list(source.notes)
        self.derived = DerivedOutcomes()
        # A one-file run's contexts are all read from that file.
        self.only_file = source.relative(source.files[0]) if len(source.files) == 1 else ""

    def events(self, records: Iterable) -> Iterator[EventRow]:
        contexts = self.contexts
        for record in records:
            if type(record) is not EventRecord:
                self._other(record)
                continue
            seen = contexts.get(record.context)
            if seen is None:
                self._need_header(record.line)
                raise FormatError(
                    f"event for unknown context {record.context!r}", file=self.name, line=record.line, field="context"
                )
            ts = record.timestamp
            if ts is not None:
                if ts.tzinfo is not UTC:
                    ts = utc(ts)
                if seen.first_ts is None:
                    seen.first_ts = seen.last_ts = ts
                elif ts < seen.first_ts:
                    seen.first_ts = ts
                elif ts > seen.last_ts:
                    seen.last_ts = ts
            seen.n_events += 1
            files = record.files
            if files and record.kind in _FILE_KINDS:
                seen.files.update(files)
            yield (
                record.context,
                record.seq,
                ts,
                record.kind,
                record.tool[:TOOL_MAX],
                record.text,
                files,
                _target(record.target),
                record.line,
                record.file[:SOURCE_FILE_MAX],
            )

    def _other(self, record) -> None:
        if isinstance(record, ContextRecord):
            self._context(record)
        elif isinstance(record, RunHeader):
            if self.header is not None:
                raise FormatError("a second run header", file=self.name)
            check_header(record, name=self.name)
            self.header = record
        elif isinstance(record, ParseWarning):
            self.warnings.append(record.describe())
        elif isinstance(record, DerivedOutcomes):
            self.derived = record

    def _context(self, record: ContextRecord) -> None:
        self._need_header(record.line)
        known = self.contexts.get(record.id)
        if known is None:
            if len(record.id) > CONTEXT_ID_MAX:
                raise FormatError(
                    f"context id is {len(record.id)} characters; at most {CONTEXT_ID_MAX} are stored",
                    file=self.name,
                    line=record.line,
                    field="id",
                )
            self.contexts[record.id] = _Seen(record=record, position=len(self.contexts))
            return
        # A later announcement fills in what the first did not know (end time, status …).
        for attr in ("label", "started_at", "ended_at", "status", "parent", "file", "workflow", "slot", "attempt",
                     "attempts"):  # fmt: skip
            value = getattr(record, attr)
            if value:
                setattr(known.record, attr, value)

    def _need_header(self, line: int | None) -> None:
        if self.header is None:
            raise FormatError("record before the run header", file=self.name, line=line)

    # -- the whole run ---------------------------------------------------------------------
    def finish(self) -> CheckedRun:
        if self.header is None:
            raise FormatError("no run header", file=self.name)
        mains = [key for key, seen in self.contexts.items() if seen.record.role == MAIN]
        if len(mains) != 1:
            raise FormatError(f"a run needs exactly one main context, found {len(mains)}", file=self.name, field="role")
        for key, seen in self.contexts.items():
            parent = seen.record.parent
            if parent is not None and parent not in self.contexts:
                raise FormatError(
                    f"context {key!r} names parent {parent!r}, which is not declared",
                    file=self.name,
                    line=seen.record.line,
                    field="parent",
                )
        depths = self._depths(mains[0])
        contexts = [self._checked(key, seen, depths[key]) for key, seen in self.contexts.items()]
        times = [ts for c in contexts for ts in (c.started_at, c.ended_at) if ts is not None]
        run_start, run_end = (min(times), max(times)) if times else (None, None)
        main_interval, intervals = [], []
        for context in contexts:
            interval = self._interval(context, run_end)
            if context.role == MAIN:
                if interval:
                    main_interval.append(interval)
            else:
                intervals.append(interval)
        computed = metrics.process_metrics(intervals, main=main_interval)
        fields: dict[str, object] = computed.as_dict()
        fields.update(started_at=run_start, ended_at=run_end, n_contexts=len(contexts))
        fields["n_events"] = sum(c.n_events for c in contexts)
        fields.update(self._outcomes(run_start, run_end))
        mode = self.header.mode
        if not mode:
            mode = CONCURRENT if computed.subagents_created else SEQUENTIAL
            self.warnings.append(
                f"{self.name}: mode not stated (no manifest or cell.json); inferred '{mode}' "
                f"from {computed.subagents_created} sub-agent(s)"
            )
        fields["warnings"] = self.warnings[:MAX_WARNINGS]
        return CheckedRun(self.header, mode, not self.header.mode, fields, contexts)

    def _checked(self, key: str, seen: _Seen, depth: int) -> CheckedContext:
        record = seen.record
        started, ended = record.started_at or seen.first_ts, record.ended_at or seen.last_ts
        if started and ended and ended < started:
            raise FormatError(
                f"context {key!r} ends before it starts", file=self.name, line=record.line, field="ended_at"
            )
        if record.ended_at and seen.last_ts and seen.last_ts > record.ended_at:
            # An agent is not over while it still writes: its recorded end moves to its last event.
            self.warnings.append(
                f"{self.name}: context {key!r} has events after its recorded end "
                f"({record.ended_at.isoformat()}); its end is its last event's time ({seen.last_ts.isoformat()})"
            )
            ended = seen.last_ts
        attempt, attempts = _attempt(record, key, self.name)
        return CheckedContext(
            key=key,
            parent=record.parent,
            role=record.role,
            label=record.label,
            status=record.status[:STATUS_MAX],
            started_at=started,
            ended_at=ended,
            n_events=seen.n_events,
            files_touched=sorted(seen.files),
            depth=depth,
            position=seen.position,
            source_file=(record.file or self.only_file)[:SOURCE_FILE_MAX],
            workflow=record.workflow[:WORKFLOW_MAX],
            slot=record.slot[:SLOT_MAX],
            attempt=attempt,
            attempts=attempts,
        )

    def _interval(self, context: CheckedContext, run_end: datetime | None) -> tuple[float, float] | None:
        start, end = context.started_at, context.ended_at
        if start is None and end is None:
            return None
        if end is None:
            # Still running when the log ends (an excerpt, a killed run): it lasts to the run's end.
            self.warnings.append(
                f"{self.name}: context {context.key!r} has no end time; "
                "treated as active until the run's last timestamp"
            )
            end = run_end or start
        if start is None:
            start = end
        return (start.timestamp(), end.timestamp())

    def _depths(self, main: str) -> dict[str, int]:
        depths: dict[str, int] = {}
        for key in self.contexts:
            chain: list[str] = []
            node: str | None = key
            while node is not None and node not in depths:
                if node in chain:
                    cycle = " → ".join([*chain[chain.index(node) :], node])
                    raise FormatError(
                        f"contexts form a parent cycle: {cycle}",
                        file=self.name,
                        line=self.contexts[node].record.line,
                        field="parent",
                    )
                chain.append(node)
                node = self.contexts[node].record.parent
            base = -1 if node is None else depths[node]
            for offset, item in enumerate(reversed(chain), start=1):
                depths[item] = base + offset
        for key, depth in depths.items():
            if depth == 0 and key != main:
                raise FormatError(
                    f"context {key!r} has no parent but is not the main agent",
                    file=self.name,
                    line=self.contexts[key].record.line,
                    field="parent",
                )
        return depths

    def _outcomes(self, run_start: datetime | None, run_end: datetime | None) -> dict[str, object]:
        values = {key: self.header.outcomes.get(key) for key in OUTCOME_FIELDS}
        for key in ("shell_calls", "tokens", "duration_s"):
            if values[key] is None:
                values[key] = getattr(self.derived, key)
        if values["test_pass"] is None and values["tests_total"]:
            values["test_pass"] = (values["tests_passed"] or 0) / values["tests_total"]
        if values["duration_s"] is None and run_start and run_end:
            values["duration_s"] = (run_end - run_start).total_seconds()
        passed, total = values["tests_passed"], values["tests_total"]
        if passed is not None and total is not None and passed > total:
            raise FormatError("tests_passed is larger than tests_total", file=self.name, field="tests_passed")
        return values


def _target(target: str) -> str:
    """A spawn's or join's target cut to its column: the agents it names ("a,b,…") are cut whole, so
    that no id is left half (the agents past the cut keep their parent link; only this event forgets them)."""
    if len(target) <= TARGET_MAX:
        return target
    cut = target[:TARGET_MAX]
    return cut[: cut.rfind(",")] if "," in cut else cut


def _attempt(record: ContextRecord, key: str, name: str) -> tuple[int | None, int | None]:
    """A context's attempt number and its slot's attempts: 1 ≤ attempt ≤ attempts, when stated."""
    attempt, attempts = record.attempt, record.attempts
    for value, label in ((attempt, "attempt"), (attempts, "attempts")):
        if value is not None and not (isinstance(value, int) and 1 <= value <= ATTEMPT_MAX):
            raise FormatError(f"context {key!r}: {label} must be a whole number from 1", file=name, field=label)
    if attempt is not None and attempts is not None and attempt > attempts:
        raise FormatError(
            f"context {key!r} is attempt {attempt} of only {attempts}", file=name, line=record.line, field="attempt"
        )
    return attempt, attempts


def check_header(header: RunHeader, *, name: str) -> None:
    """Every header value fits the column it is stored in."""
    for attr, label, limit in HEADER_LIMITS:
        value = getattr(header, attr)
        if len(value) > limit:
            raise FormatError(f"is {len(value)} characters long; at most {limit} are stored", file=name, field=label)


def utc(value: datetime) -> datetime:
    """Parsers hand over aware UTC datetimes; anything else is normalised (naive means UTC)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)
