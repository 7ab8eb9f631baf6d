"""Writes for the trajectories app: importing runs (one transaction per run) and batches.

Every entry point (management command, upload page, API, Celery task) calls
`import_paths` / `import_batch_run`; parsing lives in `formats/`, metrics in `metrics.py`.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from . import archives, bulk, pipeline
from .formats.detect import FORMAT_CHOICES, discover, parser_for
from .formats.records import (
    FormatError,
    RunSource,
)
from .models import ImportBatch, Run
from .writer import DUPLICATE_MESSAGE, Lookups, RunResult, RunWriter, content_hash, unreadable

logger = logging.getLogger(__name__)

PROGRESS_SECONDS = 0.5  # how often a running batch writes its progress
_clock = time.monotonic


@dataclass
class ImportReport:
    results: list[RunResult] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def events(self) -> int:
        return sum(r.events for r in self.results)


def run_import(*, source: RunSource, batch: ImportBatch | None = None, lookups: Lookups | None = None) -> RunResult:
    """Import one run in one transaction (a savepoint inside an outer one). Bad input stores
    nothing of that run. `lookups` carries benchmark/task/agent ids from run to run.

    On SQLite a large run in its own transaction commits its events in pieces, invisible until
    the run's row is written (bulk._SQLiteSink); if the run then fails they are deleted."""
    try:
        digest = content_hash(source.files, display=source.display)
    except OSError as exc:
        return unreadable(source, exc)
    existing = bulk.run_with_hash(digest)
    if existing is not None:
        return RunResult(source.name, "duplicate", run_id=existing, message=DUPLICATE_MESSAGE)
    lookups = lookups or Lookups()
    writer = RunWriter(source, digest, batch, lookups)
    try:
        try:
            with transaction.atomic():
                run = writer.write(parser_for(source.format).parse(source))
        except BaseException:
            writer.discard()
            lookups.forget()
            raise
    except FormatError as exc:
        return RunResult(source.name, "failed", message=exc.describe())
    except IntegrityError as exc:
        # Another import of the same content won the race: that is a duplicate, not an error.
        existing = Run.objects.filter(content_hash=digest).values_list("pk", flat=True).first()
        if existing is not None:
            return RunResult(source.name, "duplicate", run_id=existing, message=DUPLICATE_MESSAGE)
        return RunResult(source.name, "failed", message=f"{source.name}: database rejected the run ({exc})")
    lookups.keep()
    return RunResult(source.name, "imported", run_id=run.pk, warnings=run.warnings, events=run.n_events)


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
    for discarded in bulk.discard_abandoned():
        logger.warning("discarded the events of an import that died: %s", discarded)
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
        results: list[tuple[int, RunResult]] = []

        def record(position: int, result: RunResult) -> None:
            if position == 1 and batch_warnings:
                result.warnings = batch_warnings + result.warnings
            results.append((position, result))
            if on_result is not None:
                on_result(result, len(results), total)

        pipeline.GroupImporter(sources=found.sources, batch=batch, report=record, run_import=run_import).run()
        report.results.extend(result for _, result in sorted(results, key=lambda item: item[0]))
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
    counts: Counter[str] = Counter()
    last_update = -PROGRESS_SECONDS

    def progress(result: RunResult, index: int, total: int) -> None:
        # Counted as results arrive; written at most every PROGRESS_SECONDS (and for the last):
        # one UPDATE, a commit of its own, per run made the 2,124-run corpus 60% slower to upload.
        nonlocal last_update
        counts["processed"] += 1
        counts[result.status] += 1
        counts["events"] += result.events
        now = _clock()
        if now - last_update < PROGRESS_SECONDS and index < total:
            return
        last_update = now
        ImportBatch.objects.filter(pk=batch.pk).update(
            processed=index,
            imported=counts["imported"],
            duplicates=counts["duplicate"],
            failed=counts["failed"],
            events=counts["events"],
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
        processed=counts["processed"],
        imported=report.count("imported"),
        duplicates=report.count("duplicate"),
        failed=report.count("failed"),
        events=report.events,
        report=[r.as_dict() for r in report.results],
    )
    shutil.rmtree(path.parent, ignore_errors=True)
    batch.refresh_from_db()
    return batch
