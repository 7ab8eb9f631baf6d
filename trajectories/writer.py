"""Writes one parsed run: parser records in, Run + AgentContext + Event rows out; and what every
import path says about a run (its RunResult, content hash, clash and read errors).

Called by `services.run_import` inside the run's own transaction (or savepoint); it raises
`FormatError` for input that cannot be stored, and the caller rolls the run back.
Row writes go through `bulk` (raw SQL and streamed events); `Lookups` caches benchmark,
task and agent ids for the length of an import.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn

from django.db import IntegrityError, transaction
from django.db.models import ProtectedError

from . import bulk, metrics
from .formats.records import (
    CONCURRENT,
    MAIN,
    SEQUENTIAL,
    ContextRecord,
    DerivedOutcomes,
    EventRecord,
    FormatError,
    ParseWarning,
    RunHeader,
    RunSource,
)
from .models import AgentSystem, Benchmark, ImportBatch, Run, Task

logger = logging.getLogger(__name__)

_FILE_KINDS = frozenset(("file_write", "tool_call"))


@dataclass
class RunResult:
    source: str
    status: str  # imported | duplicate | failed
    run_id: int | None = None
    message: str = ""
    warnings: list[str] = field(default_factory=list)
    events: int = 0

    def as_dict(self) -> dict:
        return {
            "source": self.source,
            "status": self.status,
            "run_id": self.run_id,
            "message": self.message,
            "warnings": self.warnings,
            "events": self.events,
        }


DUPLICATE_MESSAGE = "already imported (same content)"


def unreadable(source: RunSource, exc: OSError) -> RunResult:
    return RunResult(source.name, "failed", message=f"{source.name}: cannot read ({exc})")


def content_hash(files: Iterable[Path], *, display: Callable[[Path], str]) -> str:
    """sha256 over (name, bytes) of every file of a run, streamed."""
    digest = hashlib.sha256()
    for path in sorted(files, key=display):
        digest.update(display(path).encode() + b"\0")
        with path.open("rb") as handle:
            while chunk := handle.read(1024 * 1024):
                digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()


def clash_error(*, task: Task, agent: str, mode: str, clash: tuple[int, str], file: str) -> FormatError:
    """The (task, agent, mode) slot is taken: name the stored run, so the user can replace it."""
    return FormatError(
        f"a {mode} run of {task} by {agent} is already stored (run #{clash[0]} from {clash[1]}); "
        "delete it first to replace it",
        file=file,
    )


class Lookups:
    """Benchmark, task and agent ids seen during one import, so each run costs no lookup queries.

    Ids created or changed by a run stay pending until that run is stored (`keep()`); a run that
    is rolled back takes its pending entries with it (`forget()`).
    """

    def __init__(self) -> None:
        self.benchmarks: dict[str, int] = {}
        self.tasks: dict[tuple[int, str], Task] = {}
        self.agents: dict[str, int] = {}
        self._pending: list[tuple[dict, object]] = []
        self._created: list[Benchmark | Task | AgentSystem] = []  # by the run being written, one by one

    def keep(self) -> None:
        self._pending = []
        self._created = []

    def forget(self) -> None:
        for cache, key in self._pending:
            cache.pop(key, None)
        self._pending = []
        self._created = []

    def delete_created(self) -> None:
        """Delete the benchmark, task and agent rows the run being written created, where nothing
        uses them: a run committed in pieces (bulk._SQLiteSink) that then failed had committed
        them with its first piece, and a filter list would show a benchmark that has no run."""
        for obj in reversed(self._created):  # a task before its benchmark
            if isinstance(obj, Task):
                users = Run.objects.filter(task=obj)
            elif isinstance(obj, AgentSystem):
                users = Run.objects.filter(agent=obj)
            else:
                users = Task.objects.filter(benchmark=obj)
            try:
                with transaction.atomic():
                    if not users.exists():
                        obj.delete()
            except (IntegrityError, ProtectedError):  # another import has just started to use it
                continue

    def _remember(self, cache: dict, key, value) -> None:
        cache[key] = value
        self._pending.append((cache, key))

    def prefetch(self, headers: list[RunHeader]) -> None:
        """Resolve the benchmarks, tasks and agents of many runs in a few queries, creating the
        missing ones together (a group of runs: pipeline.py)."""
        names = {h.benchmark for h in headers} - self.benchmarks.keys()
        for name, pk in _get_or_create_many(Benchmark, "name", {n: {} for n in names}).items():
            self._remember(self.benchmarks, name, pk)
        agents: dict[str, dict] = {}
        for h in headers:
            if h.agent not in self.agents:
                agents.setdefault(h.agent, {"backbone_model": h.backbone_model})
        for name, pk in _get_or_create_many(AgentSystem, "name", agents).items():
            self._remember(self.agents, name, pk)
        wanted: dict[tuple[int, str], dict] = {}
        for h in headers:
            key = (self.benchmarks[h.benchmark], h.task_id)
            if key not in self.tasks:
                wanted.setdefault(key, {"difficulty": h.difficulty, "prompt_sha256": h.prompt_sha256})
        if not wanted:
            return
        found = Task.objects.select_related("benchmark").filter(
            benchmark_id__in={b for b, _ in wanted}, external_id__in={t for _, t in wanted}
        )
        for task in found:
            if (task.benchmark_id, task.external_id) in wanted:
                self._remember(self.tasks, (task.benchmark_id, task.external_id), task)
        missing = [
            Task(benchmark_id=b, external_id=t, **defaults)
            for (b, t), defaults in wanted.items()
            if (b, t) not in self.tasks
        ]
        for task in Task.objects.bulk_create(missing):
            self._remember(self.tasks, (task.benchmark_id, task.external_id), task)

    def task(self, header: RunHeader, *, name: str) -> Task:
        benchmark_id = self.benchmarks.get(header.benchmark)
        if benchmark_id is None:
            benchmark, created = Benchmark.objects.get_or_create(name=header.benchmark)
            benchmark_id = benchmark.pk
            self._remember(self.benchmarks, header.benchmark, benchmark_id)
            if created:
                self._created.append(benchmark)
        key = (benchmark_id, header.task_id)
        task = self.tasks.get(key)
        if task is None:
            task, created = Task.objects.select_related("benchmark").get_or_create(
                benchmark_id=benchmark_id,
                external_id=header.task_id,
                defaults={"difficulty": header.difficulty, "prompt_sha256": header.prompt_sha256},
            )
            self._remember(self.tasks, key, task)
            if created:
                self._created.append(task)
        if (header.difficulty and not task.difficulty) or (header.prompt_sha256 and not task.prompt_sha256):
            task.difficulty = task.difficulty or header.difficulty
            task.prompt_sha256 = task.prompt_sha256 or header.prompt_sha256
            task.save(update_fields=["difficulty", "prompt_sha256"])
            self._remember(self.tasks, key, task)
        if header.prompt_sha256 and task.prompt_sha256 and header.prompt_sha256 != task.prompt_sha256:
            raise FormatError(
                f"prompt_sha256 differs from the one stored for task {task} ({task.prompt_sha256[:12]}…): "
                "the two runs of a pair must share the same prompt",
                file=name,
                field="prompt_sha256",
            )
        return task

    def agent(self, header: RunHeader) -> int:
        agent_id = self.agents.get(header.agent)
        if agent_id is None:
            agent, created = AgentSystem.objects.get_or_create(
                name=header.agent, defaults={"backbone_model": header.backbone_model}
            )
            agent_id = agent.pk
            self._remember(self.agents, header.agent, agent_id)
            if created:
                self._created.append(agent)
        return agent_id


def _get_or_create_many(model, key: str, wanted: dict[str, dict]) -> dict[str, int]:
    """{key value: pk} for every wanted key, creating the missing rows (with their defaults) at once."""
    if not wanted:
        return {}
    found = dict(model.objects.filter(**{f"{key}__in": list(wanted)}).values_list(key, "pk"))
    missing = [model(**{key: value}, **defaults) for value, defaults in wanted.items() if value not in found]
    for obj in model.objects.bulk_create(missing):
        found[getattr(obj, key)] = obj.pk
    return found


@dataclass(slots=True)
class Plan:
    """A validated run held in memory. Its run and context ids are indexes into id blocks that
    the group write allocates (pipeline.py)."""

    source: RunSource
    header: RunHeader
    run: Run
    contexts: list[bulk.ContextRow]
    events: list[tuple]
    run_index: int


@dataclass(slots=True)
class _Context:
    """What the writer learns about one context while its events stream past."""

    record: ContextRecord
    pk: int
    position: int
    parent: str | None
    n_events: int = 0
    first_ts: datetime | None = None
    last_ts: datetime | None = None
    files: set[str] = field(default_factory=set)


class RunWriter:
    """Streams parser records into the database for one run (inside the caller's transaction)."""

    def __init__(
        self,
        source: RunSource,
        digest: str,
        batch: ImportBatch | None,
        lookups: Lookups | None,
        *,
        plan_only: bool = False,
        run_index: int = 0,
        context_base: int = 0,
    ):
        # plan_only: touch no database at all; `plan()` returns everything to write. Ids in the
        # plan are indexes into the group's id blocks: this run's index, and its contexts'
        # indexes from context_base on (see pipeline.py).
        self.plan_only = plan_only
        self.run_index = run_index
        self.context_base = context_base
        self.source = source
        self.digest = digest
        self.batch = batch
        self.lookups = lookups
        self.run: Run | None = None
        self.run_id: int | None = None
        self.task: Task | None = None
        self.sink: bulk.EventSink | None = None
        self.contexts: dict[str, _Context] = {}
        self.warnings: list[str] = list(source.notes)
        self.derived = DerivedOutcomes()
        self.header: RunHeader | None = None
        self.mode_inferred = False

    def write(self, records: Iterator) -> Run:
        try:
            self._consume(records)
            if self.run is None:
                raise FormatError("no run header", file=self.source.name)
            self.sink.finish()
        except BaseException:
            if self.sink is not None:
                self.sink.abort()
            raise
        run, contexts = self._finish()
        if self.mode_inferred:
            self._refuse_clash(run.agent_id, run.mode)
        bulk.insert_runs([run])
        bulk.insert_contexts(contexts)
        return run

    def discard(self) -> None:
        """After the caller rolled a failed run back: delete what the sink had already committed.
        Never raises over the run's own error: pieces it cannot delete now (a lost connection)
        are deleted by a later import (bulk.discard_abandoned)."""
        if self.sink is None:
            return
        try:
            if self.sink.discard():
                self.lookups.delete_created()
        except Exception:
            logger.exception("%s: could not delete the events of the failed run yet", self.source.name)

    def plan(self, records: Iterator) -> Plan:
        """Parse and validate the whole run in memory (plan_only writers)."""
        self._consume(records)
        if self.run is None:
            raise FormatError("no run header", file=self.source.name)
        run, contexts = self._finish()
        return Plan(self.source, self.header, run, contexts, self.sink.rows, self.run_index)

    def _consume(self, records: Iterator) -> None:
        # The hot loop of every import: events are handled inline (see _event for the rules).
        contexts, file_kinds, utc = self.contexts, _FILE_KINDS, bulk.utc
        add = run_id = None
        for record in records:
            if type(record) is not EventRecord:
                self._other(record)
                if self.sink is not None:
                    add, run_id = self.sink.add, self.run_id
                continue
            ctx = contexts.get(record.context)
            if ctx is None:
                self._unknown_context(record)
            ts = record.timestamp
            if ts is not None:
                if ts.tzinfo is not UTC:
                    ts = utc(ts)
                first = ctx.first_ts
                if first is None:
                    ctx.first_ts = ctx.last_ts = ts
                elif ts < first:
                    ctx.first_ts = ts
                elif ts > ctx.last_ts:
                    ctx.last_ts = ts
            ctx.n_events += 1
            files = record.files
            if files and record.kind in file_kinds:
                ctx.files.update(files)
            add(
                (
                    run_id,
                    ctx.pk,
                    record.seq,
                    ts,
                    record.kind,
                    record.tool[:100],
                    record.text,
                    files,
                    record.target[:255],
                    record.line,
                )
            )

    def _other(self, record) -> None:
        if isinstance(record, ContextRecord):
            self._context(record)
        elif isinstance(record, RunHeader):
            if self.run is not None:
                raise FormatError("a second run header", file=self.source.name)
            self._start(record)
        elif isinstance(record, ParseWarning):
            self.warnings.append(record.describe())
        elif isinstance(record, DerivedOutcomes):
            self.derived = record

    # -- streaming -------------------------------------------------------------------
    def _start(self, header: RunHeader) -> None:
        self.header = header
        name = self.source.name
        if self.plan_only:
            self.run = self._new_run(header)
            self.run_id = self.run_index
            self.sink = bulk.MemorySink(self.context_base)
            return
        self.task = task = self.lookups.task(header, name=name)
        agent_id = self.lookups.agent(header)
        if header.mode:
            self._refuse_clash(agent_id, header.mode)
        self.run = self._new_run(header)
        self.run.task, self.run.agent_id = task, agent_id
        # The run's row is written last, complete (`write`): its id is reserved now.
        self.run.pk = self.run_id = bulk.allocate_ids(Run, 1)[0]
        self.sink = bulk.event_sink(run_id=self.run_id, source_name=name)

    def _new_run(self, header: RunHeader) -> Run:
        return Run(
            mode=header.mode or "",
            backbone_model=header.backbone_model,
            external_id=header.run_id,
            source_format=self.source.format,
            source_name=self.source.name[:500],
            content_hash=self.digest,
            batch=self.batch,
        )

    def _context(self, record: ContextRecord) -> None:
        self._need_run(record.line)
        known = self.contexts.get(record.id)
        if known is None:
            self.contexts[record.id] = _Context(
                record=record, pk=self.sink.context_id(), position=len(self.contexts), parent=record.parent
            )
            return
        # A later announcement fills in what the first did not know (end time, status …).
        for attr in ("label", "started_at", "ended_at", "status", "parent"):
            value = getattr(record, attr)
            if value:
                setattr(known.record, attr, value)
        known.parent = known.record.parent

    def _unknown_context(self, record: EventRecord) -> NoReturn:
        self._need_run(record.line)
        raise FormatError(
            f"event for unknown context {record.context!r}",
            file=self.source.name,
            line=record.line,
            field="context",
        )

    def _need_run(self, line: int | None) -> None:
        if self.run is None:
            raise FormatError("record before the run header", file=self.source.name, line=line)

    # -- closing ---------------------------------------------------------------------
    def _finish(self) -> tuple[Run, list[bulk.ContextRow]]:
        """Validate the whole run and compute what is stored about it; no database access."""
        run, name = self.run, self.source.name
        assert run is not None and self.header is not None
        mains = [cid for cid, ctx in self.contexts.items() if ctx.record.role == MAIN]
        if len(mains) != 1:
            raise FormatError(f"a run needs exactly one main context, found {len(mains)}", file=name, field="role")
        for cid, ctx in self.contexts.items():
            if ctx.parent is not None and ctx.parent not in self.contexts:
                raise FormatError(
                    f"context {cid!r} names parent {ctx.parent!r}, which is not declared",
                    file=name,
                    line=ctx.record.line,
                    field="parent",
                )
        depths = self._depths(mains[0])
        rows: list[bulk.ContextRow] = []
        run_start = run_end = None
        for cid, ctx in self.contexts.items():
            rec = ctx.record
            started, ended = rec.started_at or ctx.first_ts, rec.ended_at or ctx.last_ts
            if started and ended and ended < started:
                raise FormatError(f"context {cid!r} ends before it starts", file=name, line=rec.line, field="ended_at")
            for ts in (started, ended):
                if ts is not None:
                    run_start = ts if run_start is None or ts < run_start else run_start
                    run_end = ts if run_end is None or ts > run_end else run_end
            rows.append(
                bulk.ContextRow(
                    id=ctx.pk,
                    run_id=self.run_id,
                    parent_id=self.contexts[ctx.parent].pk if ctx.parent else None,
                    external_id=cid[:255],
                    role=rec.role,
                    label=rec.label,
                    status=rec.status[:50],
                    started_at=started,
                    ended_at=ended,
                    n_events=ctx.n_events,
                    files_touched=sorted(ctx.files),
                    depth=depths[cid],
                    position=ctx.position,
                )
            )
        intervals: list[tuple[float, float] | None] = []
        main_interval: list[tuple[float, float]] = []
        for row in rows:
            interval = self._interval(row, run_end)
            if row.role == MAIN:
                if interval:
                    main_interval.append(interval)
            else:
                intervals.append(interval)
        computed = metrics.process_metrics(intervals, main=main_interval)
        for key, value in computed.as_dict().items():
            setattr(run, key, value)
        run.started_at, run.ended_at = run_start, run_end
        run.n_contexts = len(rows)
        run.n_events = sum(ctx.n_events for ctx in self.contexts.values())
        self._outcomes(run)
        self.mode_inferred = not run.mode
        if self.mode_inferred:
            run.mode = CONCURRENT if computed.subagents_created else SEQUENTIAL
            self.warnings.append(
                f"{name}: mode not stated (no manifest or cell.json); inferred '{run.mode}' "
                f"from {computed.subagents_created} sub-agent(s)"
            )
        run.warnings = self.warnings[:200]
        return run, rows

    def _refuse_clash(self, agent_id: int, mode: str) -> None:
        clash = bulk.clashing_run(task_id=self.task.pk, agent_id=agent_id, mode=mode)
        if clash:
            agent = AgentSystem.objects.only("name").get(pk=agent_id)
            raise clash_error(task=self.task, agent=agent.name, mode=mode, clash=clash, file=self.source.name)

    def _interval(self, ctx: bulk.ContextRow, run_end: datetime | None) -> tuple[float, float] | None:
        start, end = ctx.started_at, ctx.ended_at
        if start is None and end is None:
            return None
        if end is None:
            # Still running when the log ends (an excerpt, a killed run): it lasts to the run's end.
            self.warnings.append(
                f"{self.source.name}: context {ctx.external_id!r} has no end time; "
                "treated as active until the run's last timestamp"
            )
            end = run_end or start
        if start is None:
            start = end
        return (start.timestamp(), end.timestamp())

    def _depths(self, main: str) -> dict[str, int]:
        depths: dict[str, int] = {}
        for cid in self.contexts:
            chain: list[str] = []
            node: str | None = cid
            while node is not None and node not in depths:
                if node in chain:
                    cycle = " → ".join([*chain[chain.index(node) :], node])
                    raise FormatError(
                        f"contexts form a parent cycle: {cycle}",
                        file=self.source.name,
                        line=self.contexts[node].record.line,
                        field="parent",
                    )
                chain.append(node)
                node = self.contexts[node].parent
            base = -1 if node is None else depths[node]
            for offset, item in enumerate(reversed(chain), start=1):
                depths[item] = base + offset
        if depths.get(main) != 0:  # pragma: no cover - the main context has no parent by construction
            raise FormatError("the main context must be the root", file=self.source.name)
        for cid, depth in depths.items():
            if depth == 0 and cid != main:
                raise FormatError(
                    f"context {cid!r} has no parent but is not the main agent",
                    file=self.source.name,
                    line=self.contexts[cid].record.line,
                    field="parent",
                )
        return depths

    def _outcomes(self, run: Run) -> None:
        outcomes = dict(self.header.outcomes) if self.header else {}
        for key in ("task_pass", "tests_passed", "tests_total", "test_pass", "duration_s", "shell_calls", "tokens"):
            setattr(run, key, outcomes.get(key))
        if run.shell_calls is None and self.derived.shell_calls is not None:
            run.shell_calls = self.derived.shell_calls
        if run.tokens is None and self.derived.tokens is not None:
            run.tokens = self.derived.tokens
        if run.duration_s is None and self.derived.duration_s is not None:
            run.duration_s = self.derived.duration_s
        if run.test_pass is None and run.tests_total:
            run.test_pass = (run.tests_passed or 0) / run.tests_total
        if run.duration_s is None and run.started_at and run.ended_at:
            run.duration_s = (run.ended_at - run.started_at).total_seconds()
        if run.tests_passed is not None and run.tests_total is not None and run.tests_passed > run.tests_total:
            raise FormatError("tests_passed is larger than tests_total", file=self.source.name, field="tests_passed")
