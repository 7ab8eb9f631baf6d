"""Writes for the trajectories app: importing runs (one transaction per run) and batches.

Every entry point (management command, upload page, API, Celery task) calls
`import_paths` / `import_batch_run`; parsing lives in `formats/`, metrics in `metrics.py`.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from . import archives, bulk, metrics
from .formats.detect import FORMAT_CHOICES, discover, parser_for
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
from .models import AgentContext, AgentSystem, Benchmark, ImportBatch, Run, Task

logger = logging.getLogger(__name__)

EVENT_FLUSH = 2000


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


@dataclass
class ImportReport:
    results: list[RunResult] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def events(self) -> int:
        return sum(r.events for r in self.results)


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


def run_import(*, source: RunSource, batch: ImportBatch | None = None) -> RunResult:
    """Import one run in one transaction. Bad input stores nothing of that run."""
    try:
        digest = content_hash(source.files, display=source.display)
    except OSError as exc:
        return RunResult(source.name, "failed", message=f"{source.name}: cannot read ({exc})")
    existing = Run.objects.filter(content_hash=digest).values_list("pk", flat=True).first()
    if existing is not None:
        return RunResult(source.name, "duplicate", run_id=existing, message="already imported (same content)")
    try:
        with transaction.atomic():
            writer = _RunWriter(source, digest, batch)
            run = writer.write(parser_for(source.format).parse(source))
    except FormatError as exc:
        return RunResult(source.name, "failed", message=exc.describe())
    except IntegrityError as exc:
        # Another import of the same content won the race: that is a duplicate, not an error.
        existing = Run.objects.filter(content_hash=digest).values_list("pk", flat=True).first()
        if existing is not None:
            return RunResult(source.name, "duplicate", run_id=existing, message="already imported (same content)")
        return RunResult(source.name, "failed", message=f"{source.name}: database rejected the run ({exc})")
    return RunResult(source.name, "imported", run_id=run.pk, warnings=run.warnings, events=run.n_events)


class _RunWriter:
    """Streams parser records into the database for one run (inside the caller's transaction)."""

    def __init__(self, source: RunSource, digest: str, batch: ImportBatch | None):
        self.source = source
        self.digest = digest
        self.batch = batch
        self.run: Run | None = None
        self.contexts: dict[str, AgentContext] = {}
        self.records: dict[str, ContextRecord] = {}
        self.parents: dict[str, str | None] = {}
        self.first_ts: dict[str, datetime] = {}
        self.last_ts: dict[str, datetime] = {}
        self.files: dict[str, set[str]] = {}
        self.counts: dict[str, int] = {}
        self.buffer: list[tuple] = []
        self.warnings: list[str] = list(source.notes)
        self.derived = DerivedOutcomes()
        self.header: RunHeader | None = None

    def write(self, records: Iterator) -> Run:
        name = self.source.name
        for record in records:
            if isinstance(record, EventRecord):
                self._event(record)
            elif isinstance(record, ContextRecord):
                self._context(record)
            elif isinstance(record, RunHeader):
                if self.run is not None:
                    raise FormatError("a second run header", file=name)
                self._start(record)
            elif isinstance(record, ParseWarning):
                self.warnings.append(record.describe())
            elif isinstance(record, DerivedOutcomes):
                self.derived = record
        if self.run is None:
            raise FormatError("no run header", file=name)
        self._flush()
        return self._finish()

    # -- streaming -------------------------------------------------------------------
    def _start(self, header: RunHeader) -> None:
        self.header = header
        benchmark, _ = Benchmark.objects.get_or_create(name=header.benchmark)
        task, created = Task.objects.get_or_create(
            benchmark=benchmark,
            external_id=header.task_id,
            defaults={"difficulty": header.difficulty, "prompt_sha256": header.prompt_sha256},
        )
        if not created and (
            (header.difficulty and not task.difficulty) or (header.prompt_sha256 and not task.prompt_sha256)
        ):
            task.difficulty = task.difficulty or header.difficulty
            task.prompt_sha256 = task.prompt_sha256 or header.prompt_sha256
            task.save(update_fields=["difficulty", "prompt_sha256"])
        if header.prompt_sha256 and task.prompt_sha256 and header.prompt_sha256 != task.prompt_sha256:
            raise FormatError(
                f"prompt_sha256 differs from the one stored for task {task} ({task.prompt_sha256[:12]}…): "
                "the two runs of a pair must share the same prompt",
                file=self.source.name,
                field="prompt_sha256",
            )
        agent, _ = AgentSystem.objects.get_or_create(
            name=header.agent, defaults={"backbone_model": header.backbone_model}
        )
        if header.mode:
            self._refuse_clash(task, agent, header.mode)
        self.run = Run.objects.create(
            task=task,
            agent=agent,
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
        known = self.records.get(record.id)
        if known is None:
            self.records[record.id] = record
            self.parents[record.id] = record.parent
            ctx = AgentContext.objects.create(
                run=self.run,
                external_id=record.id[:255],
                role=record.role,
                label=record.label,
                started_at=record.started_at,
                ended_at=record.ended_at,
                status=record.status[:50],
                position=len(self.contexts),
            )
            self.contexts[record.id] = ctx
            return
        # A later announcement fills in what the first did not know (end time, status …).
        for attr in ("label", "started_at", "ended_at", "status", "parent"):
            value = getattr(record, attr)
            if value:
                setattr(known, attr, value)
        self.parents[record.id] = known.parent

    def _event(self, record: EventRecord) -> None:
        self._need_run(record.line)
        ctx = self.contexts.get(record.context)
        if ctx is None:
            raise FormatError(
                f"event for unknown context {record.context!r}",
                file=self.source.name,
                line=record.line,
                field="context",
            )
        # Plain tuples: bulk.insert_events writes them with COPY / executemany.
        self.buffer.append(
            (
                self.run.pk,
                ctx.pk,
                record.seq,
                record.timestamp,
                record.kind,
                record.tool[:100],
                record.text,
                record.files,
                record.target[:255],
                record.line,
            )
        )
        cid = record.context
        self.counts[cid] = self.counts.get(cid, 0) + 1
        if record.timestamp is not None:
            if cid not in self.first_ts or record.timestamp < self.first_ts[cid]:
                self.first_ts[cid] = record.timestamp
            if cid not in self.last_ts or record.timestamp > self.last_ts[cid]:
                self.last_ts[cid] = record.timestamp
        if record.files and record.kind in ("file_write", "tool_call"):
            self.files.setdefault(cid, set()).update(record.files)
        if len(self.buffer) >= EVENT_FLUSH:
            self._flush()

    def _flush(self) -> None:
        if self.buffer:
            bulk.insert_events(self.buffer)
            self.buffer = []

    def _need_run(self, line: int | None) -> None:
        if self.run is None:
            raise FormatError("record before the run header", file=self.source.name, line=line)

    # -- closing ---------------------------------------------------------------------
    def _finish(self) -> Run:
        run, name = self.run, self.source.name
        assert run is not None and self.header is not None
        mains = [cid for cid, rec in self.records.items() if rec.role == MAIN]
        if len(mains) != 1:
            raise FormatError(f"a run needs exactly one main context, found {len(mains)}", file=name, field="role")
        for cid, parent in self.parents.items():
            if parent is not None and parent not in self.records:
                raise FormatError(
                    f"context {cid!r} names parent {parent!r}, which is not declared",
                    file=name,
                    line=self.records[cid].line,
                    field="parent",
                )
        depths = self._depths(mains[0])
        run_start = run_end = None
        for cid, ctx in self.contexts.items():
            rec = self.records[cid]
            ctx.parent = self.contexts[self.parents[cid]] if self.parents[cid] else None
            ctx.role = rec.role
            ctx.label = rec.label
            ctx.status = rec.status[:50]
            ctx.started_at = rec.started_at or self.first_ts.get(cid)
            ctx.ended_at = rec.ended_at or self.last_ts.get(cid)
            if ctx.started_at and ctx.ended_at and ctx.ended_at < ctx.started_at:
                raise FormatError(f"context {cid!r} ends before it starts", file=name, line=rec.line, field="ended_at")
            ctx.n_events = self.counts.get(cid, 0)
            ctx.files_touched = sorted(self.files.get(cid, ()))
            ctx.depth = depths[cid]
            for ts in (ctx.started_at, ctx.ended_at):
                if ts is not None:
                    run_start = ts if run_start is None or ts < run_start else run_start
                    run_end = ts if run_end is None or ts > run_end else run_end
        intervals: list[tuple[float, float] | None] = []
        main_interval: list[tuple[float, float]] = []
        for cid, ctx in self.contexts.items():
            interval = self._interval(ctx, cid, run_end)
            if self.records[cid].role == MAIN:
                if interval:
                    main_interval.append(interval)
            else:
                intervals.append(interval)
        bulk.update_contexts(list(self.contexts.values()))
        computed = metrics.process_metrics(intervals, main=main_interval)
        for key, value in computed.as_dict().items():
            setattr(run, key, value)
        run.started_at, run.ended_at = run_start, run_end
        run.n_contexts = len(self.contexts)
        run.n_events = sum(self.counts.values())
        self._outcomes(run)
        if not run.mode:
            run.mode = CONCURRENT if computed.subagents_created else SEQUENTIAL
            self.warnings.append(
                f"{name}: mode not stated (no manifest or cell.json); inferred '{run.mode}' "
                f"from {computed.subagents_created} sub-agent(s)"
            )
        self._refuse_clash(run.task, run.agent, run.mode, exclude=run.pk)
        run.warnings = self.warnings[:200]
        run.save()
        return run

    def _refuse_clash(self, task: Task, agent: AgentSystem, mode: str, exclude: int | None = None) -> None:
        clash = (
            Run.objects.filter(task=task, agent=agent, mode=mode)
            .exclude(pk=exclude)
            .values_list("pk", "source_name")
            .first()
        )
        if clash:
            raise FormatError(
                f"a {mode} run of {task} by {agent.name} is already stored (run #{clash[0]} from {clash[1]}); "
                "delete it first to replace it",
                file=self.source.name,
            )

    def _interval(self, ctx: AgentContext, cid: str, run_end: datetime | None) -> tuple[float, float] | None:
        start, end = ctx.started_at, ctx.ended_at
        if start is None and end is None:
            return None
        if end is None:
            # Still running when the log ends (an excerpt, a killed run): it lasts to the run's end.
            self.warnings.append(
                f"{self.source.name}: context {cid!r} has no end time; treated as active until the run's last timestamp"
            )
            end = run_end or start
        if start is None:
            start = end
        return (start.timestamp(), end.timestamp())

    def _depths(self, main: str) -> dict[str, int]:
        depths: dict[str, int] = {}
        for cid in self.records:
            chain: list[str] = []
            node: str | None = cid
            while node is not None and node not in depths:
                if node in chain:
                    cycle = " → ".join([*chain[chain.index(node) :], node])
                    raise FormatError(
                        f"contexts form a parent cycle: {cycle}",
                        file=self.source.name,
                        line=self.records[node].line,
                        field="parent",
                    )
                chain.append(node)
                node = self.parents[node]
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
                    line=self.records[cid].line,
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


# -- batches -------------------------------------------------------------------------------


def import_paths(
    *,
    paths: list[Path],
    fmt: str = "auto",
    manifest: Path | None = None,
    batch: ImportBatch | None = None,
    on_result: Callable[[RunResult, int, int], None] | None = None,
) -> ImportReport:
    """Import every run found under `paths` (files, folders, archives). Never raises on bad
    input: each failure is a `failed` result naming file, line and field."""
    report = ImportReport()
    with tempfile.TemporaryDirectory(prefix="parallax-import-") as scratch:
        expanded: list[Path] = []
        for path in paths:
            if path.is_file() and archives.is_archive(path):
                try:
                    dest = archives.safe_extract(path, Path(scratch) / f"{len(expanded)}-{path.name}", _limits())
                except FormatError as exc:
                    report.results.append(RunResult(path.name, "failed", message=exc.describe()))
                    continue
                expanded.append(dest)
            else:
                expanded.append(path)
        try:
            found = discover(expanded, fmt=fmt, manifest=manifest)
        except FormatError as exc:
            report.results.append(RunResult(exc.file or "manifest", "failed", message=exc.describe()))
            return report
        for error in found.errors:
            report.results.append(RunResult(error.file or "?", "failed", message=error.describe()))
        batch_warnings = [w.describe() for w in found.warnings]
        total = len(found.sources)
        if batch is not None:
            ImportBatch.objects.filter(pk=batch.pk).update(total=total)
        for index, source in enumerate(found.sources, start=1):
            result = run_import(source=source, batch=batch)
            if index == 1 and batch_warnings:
                result.warnings = batch_warnings + result.warnings
            report.results.append(result)
            if on_result is not None:
                on_result(result, index, total)
        if not found.sources and batch_warnings:
            report.results.append(RunResult("bundle", "failed", message="no runs found", warnings=batch_warnings))
    return report


def _limits() -> archives.ArchiveLimits:
    return archives.ArchiveLimits(
        max_entries=settings.PARALLAX_MAX_ARCHIVE_ENTRIES,
        max_total_bytes=settings.PARALLAX_MAX_ARCHIVE_BYTES,
        max_ratio=settings.PARALLAX_MAX_COMPRESSION_RATIO,
    )


def import_batch_create(*, upload, user, fmt: str = "auto") -> ImportBatch:
    """Store an uploaded bundle and create its batch; the caller enqueues the import."""
    if fmt not in FORMAT_CHOICES:
        raise FormatError(f"unknown format {fmt!r}")
    if upload.size > settings.PARALLAX_MAX_UPLOAD_BYTES:
        raise FormatError(
            f"upload is {upload.size:,} bytes; the limit is {settings.PARALLAX_MAX_UPLOAD_BYTES:,}", file=upload.name
        )
    safe_name = Path(upload.name).name or "upload"
    batch = ImportBatch.objects.create(created_by=user, source_name=safe_name[:255], format=fmt)
    folder = Path(settings.IMPORT_UPLOAD_DIR) / str(batch.pk)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / safe_name
    with target.open("wb") as out:
        for chunk in upload.chunks():
            out.write(chunk)
    batch.upload_path = str(target)
    batch.save(update_fields=["upload_path"])
    return batch


def import_batch_run(*, batch_id: int) -> ImportBatch:
    """Run (or resume) a batch. Idempotent: runs already stored come back as duplicates."""
    batch = ImportBatch.objects.get(pk=batch_id)
    if batch.is_finished:
        return batch
    ImportBatch.objects.filter(pk=batch.pk).update(
        status=ImportBatch.Status.RUNNING, processed=0, imported=0, duplicates=0, failed=0, events=0, report=[]
    )
    entries: list[dict] = []

    def progress(result: RunResult, index: int, total: int) -> None:
        entries.append(result.as_dict())
        ImportBatch.objects.filter(pk=batch.pk).update(
            processed=index,
            imported=sum(1 for e in entries if e["status"] == "imported"),
            duplicates=sum(1 for e in entries if e["status"] == "duplicate"),
            failed=sum(1 for e in entries if e["status"] == "failed"),
            events=sum(e["events"] for e in entries),
        )

    path = Path(batch.upload_path)
    if not path.exists():
        ImportBatch.objects.filter(pk=batch.pk).update(
            status=ImportBatch.Status.FAILED, finished_at=timezone.now(), error=f"uploaded file is missing: {path.name}"
        )
        batch.refresh_from_db()
        return batch
    report = import_paths(paths=[path], fmt=batch.format, batch=batch, on_result=progress)
    ImportBatch.objects.filter(pk=batch.pk).update(
        status=ImportBatch.Status.DONE,
        finished_at=timezone.now(),
        processed=len(entries),
        imported=report.count("imported"),
        duplicates=report.count("duplicate"),
        failed=report.count("failed"),
        events=report.events,
        report=[r.as_dict() for r in report.results],
    )
    shutil.rmtree(path.parent, ignore_errors=True)
    batch.refresh_from_db()
    return batch
