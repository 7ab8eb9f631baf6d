"""Importing trajectories: the one path from files to stored runs.

Every entry point (management command, upload page, API, Celery task) calls `import_paths`, through
`import_batch_execute` — the bookkeeping of an ImportBatch — when it imports as a batch: the command
(`import_batch_command_create`) and the worker's task for an upload (`import_batch_run`). For each file or folder:

  archives.py   unpack .zip / .tar.* bundles, within limits
  formats/      find the runs (detect.discover) and parse each into plain records
  validate.py   check a run's records and compute what is stored about it (no database)
  writer.py     store the run: Run, AgentContext and Event rows, all or nothing

`run_import` does one run in its own transaction; `import_paths` does many and reports each
result once it is committed.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connections, router, transaction
from django.db.models import Min, Q
from django.utils import timezone

from activity.services import record

from . import archives, signals, signatures
from .evaluation import F2P, P2P, CellTests
from .formats import registry
from .formats.detect import discover, nothing_found
from .formats.records import FormatError, RunSource
from .formats.registry import parser_for
from .models import AgentContext, Event, ImportBatch, Run, RunFile, SignatureHit, TestOutcome
from .signals import signatures_replaced
from .validate import SOURCE_NAME_MAX
from .writer import NOTE_MAX, Lookups, new_run, signature_hit_rows, store_files, store_run

DUPLICATE_MESSAGE = "already imported (same content)"


@dataclass
class RunResult:
    source: str
    status: str  # imported | duplicate | failed
    run_id: int | None = None
    message: str = ""
    warnings: list[str] = field(default_factory=list)
    events: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def content_hash(files: Iterable[Path], *, display: Callable[[Path], str]) -> tuple[str, dict[Path, int | None]]:
    """sha256 over (name, bytes) of every file of a run, streamed; and each file's line count
    (None for a compressed file), counted on the same pass for evidence anchors."""
    digest = hashlib.sha256()
    lines: dict[Path, int | None] = {}
    for path in sorted(files, key=display):
        digest.update(display(path).encode() + b"\0")
        n_lines, last = 0, b"\n"
        with path.open("rb") as handle:
            while chunk := handle.read(1024 * 1024):
                digest.update(chunk)
                n_lines += chunk.count(b"\n")
                last = chunk[-1:]
        # A last line without a newline counts; a compressed file's lines are not counted.
        lines[path] = None if path.name.endswith(".gz") else n_lines + (last != b"\n")
        digest.update(b"\0")
    return digest.hexdigest(), lines


PROGRESS_SECONDS = 0.5  # how often a running batch writes its progress
COMMIT_SECONDS = 0.5  # how long runs imported one after another may wait for their commit
_clock = time.monotonic


@dataclass
class ImportReport:
    results: list[RunResult] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def events(self) -> int:
        return sum(r.events for r in self.results)


def run_import(
    *, source: RunSource, batch: ImportBatch | None = None, lookups: Lookups | None = None, replace: bool = False
) -> RunResult:
    """Import one run in its own transaction (a savepoint inside an outer one): parse, check and
    store it, or store nothing of it. `lookups` carries benchmark/task/agent ids from run to run.
    With `replace`, a run already stored for the same content or the same (task, agent, mode) is read
    again in place (run_reread) instead of being reported as present or refused."""
    try:
        digest, lines = content_hash(source.files, display=source.display)
    except OSError as exc:
        return RunResult(source.name, "failed", message=f"{source.name}: cannot read ({exc})")
    lookups = lookups or Lookups()
    run = new_run(source=source, digest=digest, batch=batch)
    try:
        try:
            with transaction.atomic():
                store_run(run=run, source=source, records=parser_for(source.format).parse(source), lookups=lookups)
                store_files(run=run, source=source, log_lines=lines, limit=settings.PARALLAX_ARTIFACT_MAX_BYTES)
                run_tests_store(run=run, tests=source.read_tests() if source.read_tests else None)
        except BaseException:
            lookups.forget()  # the rows the run created are rolled back with it
            raise
    except FormatError as exc:
        return RunResult(source.name, "failed", message=exc.describe())
    except IntegrityError as exc:  # its content, or its (task, agent, mode), is stored already
        result = _refused(source, run, exc)
        if replace and result.run_id is not None:
            return run_reread(source=source, run_id=result.run_id, digest=digest, lines=lines, lookups=lookups)
        if result.status == "duplicate":
            result.message += _backfill_files(run_id=result.run_id, source=source, lines=lines)
        return result
    except DatabaseError as exc:
        return RunResult(source.name, "failed", message=f"{source.name}: database rejected the run ({exc})")
    lookups.keep()
    return RunResult(source.name, "imported", run_id=run.pk, warnings=run.warnings, events=run.n_events)


TEST_OUTCOME_COLUMNS = ("run", "source", "primary", "position", "name", "outcome", "group", "line", "detail")


def run_tests_store(*, run: Run, tests: CellTests | None) -> None:
    """A run's per-test results (TestOutcome rows, one per test and file read) and where its counts
    come from, inside the caller's transaction (run_import's): a run is stored with its tests or not
    at all. The run's tests passed/total were set from the same reading at discovery
    (formats/detect.py); the file they came from and SWE-bench's group counts are set here."""
    if tests is None or not tests.readings:
        return
    listed = tests.listed
    rows = [
        (run.pk, reading.file, reading is listed, position, test.name, test.outcome, test.group, test.line, test.detail)
        for position, (reading, test) in enumerate((r, t) for r in tests.readings for t in r.tests)
    ]
    # Plain rows, not bulk_create (a model instance per test cost 50 µs a row, ten times the parsing), written
    # the way the importer writes events (writer.py): COPY on PostgreSQL, executemany elsewhere.
    conn = connections[router.db_for_write(TestOutcome)]
    qn = conn.ops.quote_name
    table = qn(TestOutcome._meta.db_table)
    columns = ", ".join(qn(TestOutcome._meta.get_field(name).column) for name in TEST_OUTCOME_COLUMNS)
    placeholders = ", ".join(["%s"] * len(TEST_OUTCOME_COLUMNS))
    with conn.wrap_database_errors, conn.cursor() as cursor:
        if conn.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({placeholders})", rows)
    fields: dict[str, object] = {}
    if tests.counts is not None and (run.tests_passed, run.tests_total) == tests.counts:
        fields["tests_source"] = tests.source  # unless a manifest gave the run other counts
    report = tests.report
    if report is not None:
        for prefix, group in (("f2p", F2P), ("p2p", P2P)):
            fields[f"{prefix}_passed"], fields[f"{prefix}_total"] = report.group_counts(group)
    if fields:
        for name, value in fields.items():
            setattr(run, name, value)
        Run.objects.filter(pk=run.pk).update(**fields)


# What a stored run read again loses before it is read: what the files give it anew.
READ_AGAIN = (Event, AgentContext, RunFile, SignatureHit, TestOutcome)


def run_reread(*, source: RunSource, run_id: int, digest: str, lines: dict, lookups: Lookups) -> RunResult:
    """Read a stored run again from its files, in place, all or nothing: its agents, events, files,
    tests, signature hits, metrics and outcomes are replaced by what this Parallax reads from `source`;
    the run itself — its id, and so every assignment, coding and final label of it — stays. For runs
    imported by an older Parallax whose readers have since learnt more (`import_trajectories --replace`).
    The studies holding it are told (signals.runs_replaced): their figures are no longer current."""
    try:
        with transaction.atomic():
            run = Run.objects.select_for_update(of=("self",)).select_related("task", "agent").get(pk=run_id)
            for model in READ_AGAIN:  # events first: a context's delete would otherwise collect them
                model.objects.filter(run=run).delete()
            run.source_format, run.source_name, run.content_hash = source.format, source.name[:SOURCE_NAME_MAX], digest
            for name in ("tests_source", "f2p_passed", "f2p_total", "p2p_passed", "p2p_total"):
                setattr(run, name, Run._meta.get_field(name).get_default())
            store_run(run=run, source=source, records=parser_for(source.format).parse(source), lookups=lookups)
            store_files(run=run, source=source, log_lines=lines, limit=settings.PARALLAX_ARTIFACT_MAX_BYTES)
            run_tests_store(run=run, tests=source.read_tests() if source.read_tests else None)
            signals.runs_replaced.send(sender=Run, run_ids=[run.pk])
    except FormatError as exc:
        lookups.forget()
        return RunResult(source.name, "failed", run_id=run_id, message=f"{exc.describe()} (run #{run_id} unchanged)")
    except IntegrityError:
        lookups.forget()
        other = Run.objects.filter(content_hash=digest).exclude(pk=run_id).values_list("pk", flat=True).first()
        message = f"{source.name}: these files are stored already as run #{other}; run #{run_id} unchanged"
        return RunResult(source.name, "failed", run_id=run_id, message=message)
    except DatabaseError as exc:
        lookups.forget()
        message = f"{source.name}: database rejected the run ({exc}); run #{run_id} unchanged"
        return RunResult(source.name, "failed", run_id=run_id, message=message)
    lookups.keep()
    return RunResult(source.name, "replaced", run_id=run.pk, warnings=run.warnings, events=run.n_events)


def _backfill_files(*, run_id: int, source: RunSource, lines: dict) -> str:
    """A run stored by a Parallax that did not keep files gets them when its source comes again."""
    stored = Run.objects.get(pk=run_id)
    if stored.files.exists():
        return ""
    with transaction.atomic():
        store_files(run=stored, source=source, log_lines=lines, limit=settings.PARALLAX_ARTIFACT_MAX_BYTES)
        if len(lines) == 1:  # one log: every agent was read from it
            stored.contexts.filter(source_file="").update(source_file=source.relative(next(iter(lines))))
    return "; its files, not stored before, are now"


def _refused(source: RunSource, run: Run, exc: IntegrityError) -> RunResult:
    stored = Run.objects.filter(content_hash=run.content_hash).order_by().values_list("pk", flat=True).first()
    if stored is not None:
        return RunResult(source.name, "duplicate", run_id=stored, message=DUPLICATE_MESSAGE)
    clash = (
        Run.objects.filter(task_id=run.task_id, agent_id=run.agent_id, mode=run.mode)
        .select_related("task__benchmark", "agent")
        .first()
    )
    if clash is not None and run.task_id is not None:
        message = (
            f"{source.name}: a {run.mode} run of {clash.task} by {clash.agent.name} is already stored "
            f"(run #{clash.pk} from {clash.source_name}); import with --replace to read it again from these files"
        )
        return RunResult(source.name, "failed", run_id=clash.pk, message=message)
    return RunResult(source.name, "failed", message=f"{source.name}: database rejected the run ({exc})")


# -- batches -------------------------------------------------------------------------------


def import_paths(
    *,
    paths: list[Path],
    fmt: str = "auto",
    manifest: Path | None = None,
    batch: ImportBatch | None = None,
    on_result: Callable[[RunResult, int, int], None] | None = None,
    replace: bool = False,
) -> ImportReport:
    """Import every run found under `paths` (files, folders, archives). Never raises on bad
    input: each failure is a `failed` result naming file, line and field.

    Each run is stored in its own savepoint; runs imported within COMMIT_SECONDS of each other
    share one commit (a commit waits for the disk: one per run would double the time of a study
    corpus on PostgreSQL). A result is reported (`on_result`) once its run is committed, so a
    crash loses only runs that were never reported, and importing again stores them. With `replace`,
    runs already stored are read again in place (run_reread) and reported as `replaced`."""
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
        sources, total = found.sources, len(found.sources)
        if batch is not None:
            ImportBatch.objects.filter(pk=batch.pk).update(total=total)
        lookups = Lookups()
        done = 0
        while done < total:
            results: list[RunResult] = []
            started = time.monotonic()
            with transaction.atomic():
                while done + len(results) < total and (not results or time.monotonic() - started < COMMIT_SECONDS):
                    source = sources[done + len(results)]
                    results.append(run_import(source=source, batch=batch, lookups=lookups, replace=replace))
            for result in results:  # committed
                done += 1
                if done == 1 and batch_warnings:
                    result.warnings = batch_warnings + result.warnings
                report.results.append(result)
                if on_result is not None:
                    on_result(result, done, total)
        if not sources and not report.results:  # never "0 imported, 0 failed" for an input
            names = ", ".join(path.name for path in paths)
            message = f"{names}: {nothing_found()}"
            report.results.append(RunResult(names, "failed", message=message, warnings=batch_warnings))
    return report


def _limits() -> archives.ArchiveLimits:
    return archives.ArchiveLimits(
        max_entries=settings.PARALLAX_MAX_ARCHIVE_ENTRIES,
        max_total_bytes=settings.PARALLAX_MAX_ARCHIVE_BYTES,
        max_ratio=settings.PARALLAX_MAX_COMPRESSION_RATIO,
    )


UPLOAD_SUFFIXES = (*registry.suffixes(), *archives.ARCHIVE_SUFFIXES)


def import_batch_create(*, upload, user, fmt: str = "auto") -> ImportBatch:
    """Store an uploaded bundle and create its batch; the caller enqueues the import."""
    if fmt not in registry.choices():
        raise FormatError(f"unknown format {fmt!r}")
    if not upload.name.lower().endswith(UPLOAD_SUFFIXES):
        raise FormatError(f"expected one of {', '.join(UPLOAD_SUFFIXES)}", file=upload.name)
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


def import_batch_command_create(
    *, paths: list[Path], user=None, fmt: str = "auto", manifest: Path | None = None, replace: bool = False
) -> ImportBatch:
    """The batch of one `import_trajectories` call (its paths and the options that change what is stored, as
    given, by `user` or nobody), listed on the Import page beside the uploads; the command then runs it with
    `import_batch_execute`."""
    if fmt not in registry.choices():
        raise FormatError(f"unknown format {fmt!r}")
    names = " ".join(str(path) for path in paths)
    options = [f"--format {fmt}"] if fmt != "auto" else []
    options += [f"--manifest {manifest}"] if manifest is not None else []
    options += ["--replace"] if replace else []
    return ImportBatch.objects.create(
        origin=ImportBatch.Origin.COMMAND,
        created_by=user,
        source_name=_cut(names, 255),
        options=_cut(" ".join(options), 500),
        format=fmt,
    )


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def import_batch_mark_stalled(*, batch: ImportBatch) -> ImportBatch:
    """A batch that says "running" but has written no progress for PARALLAX_IMPORT_STALL_SECONDS was
    left by a worker (or a command) that died: it is marked failed, saying so (runs reported as stored are kept)."""
    limit = settings.PARALLAX_IMPORT_STALL_SECONDS
    last = batch.progressed_at or batch.created_at
    if batch.status != ImportBatch.Status.RUNNING or (timezone.now() - last).total_seconds() < limit:
        return batch
    if batch.origin == ImportBatch.Origin.COMMAND:
        who, again = "its command was stopped or crashed", "run the command again"
    else:
        who, again = "its worker was stopped or crashed", "upload the file again"
    message = (
        f"the import stopped after {batch.processed} of {batch.total} runs: no progress for {limit // 60} minutes "
        f"({who}). Runs listed as imported are stored; {again} to "
        "import the rest (runs already stored are recognised and skipped)."
    )
    # What the dead worker stored is listed, as a finished batch lists it: each run it committed (the progress
    # counters are written every few seconds, the runs' rows with each run).
    stored = [
        RunResult(source=source, status="imported", run_id=run_id).as_dict()
        for run_id, source in batch.runs.order_by("pk").values_list("pk", "source_name")
    ]
    ImportBatch.objects.filter(pk=batch.pk, status=ImportBatch.Status.RUNNING).update(
        status=ImportBatch.Status.FAILED, error=message, finished_at=timezone.now(), report=stored,
        imported=len(stored),
    )  # fmt: skip
    batch.refresh_from_db()
    return batch


def import_batch_run(*, batch_id: int) -> ImportBatch:
    """Run (or resume) an uploaded batch: what the worker's task does. Idempotent: runs already stored
    come back as duplicates."""
    batch = ImportBatch.objects.get(pk=batch_id)
    if batch.is_finished:
        return batch
    path = Path(batch.upload_path)
    if not path.exists():
        ImportBatch.objects.filter(pk=batch.pk).update(
            status=ImportBatch.Status.FAILED, finished_at=timezone.now(), error=f"uploaded file is missing: {path.name}"
        )
        batch.refresh_from_db()
        return batch
    import_batch_execute(batch=batch, paths=[path])
    shutil.rmtree(path.parent, ignore_errors=True)
    batch.refresh_from_db()
    return batch


def import_batch_execute(
    *, batch: ImportBatch, paths: list[Path], manifest: Path | None = None, replace: bool = False
) -> ImportReport:
    """Import `paths` as `batch`, keeping its books: what an upload's worker task and `import_trajectories`
    both run. The batch says running, then its progress as runs are committed (at most every PROGRESS_SECONDS),
    then done — or failed when nothing was stored — with its totals, the report of every run and when it
    finished; the activity log says what it did. If the import itself stops (a bug, the database gone, Ctrl-C),
    the batch says failed with the error and lists the runs committed until then, and the error goes on."""
    ImportBatch.objects.filter(pk=batch.pk).update(
        status=ImportBatch.Status.RUNNING,
        progressed_at=timezone.now(),
        processed=0,
        imported=0,
        duplicates=0,
        replaced=0,
        failed=0,
        events=0,
        report=[],
    )
    counts: Counter[str] = Counter()
    reported: list[RunResult] = []
    last_update = -PROGRESS_SECONDS

    def progress(result: RunResult, index: int, total: int) -> None:
        # Counted as results arrive; written at most every PROGRESS_SECONDS (and for the last),
        # not once per run (docs/performance.md).
        nonlocal last_update
        reported.append(result)
        counts["processed"] += 1
        counts[result.status] += 1
        counts["events"] += result.events
        now = _clock()
        if now - last_update < PROGRESS_SECONDS and index < total:
            return
        last_update = now
        ImportBatch.objects.filter(pk=batch.pk).update(
            progressed_at=timezone.now(),
            processed=index,
            imported=counts["imported"],
            duplicates=counts["duplicate"],
            replaced=counts["replaced"],
            failed=counts["failed"],
            events=counts["events"],
        )

    try:
        report = import_paths(
            paths=paths, fmt=batch.format, manifest=manifest, batch=batch, on_result=progress, replace=replace
        )
    except (Exception, KeyboardInterrupt) as exc:
        # Not SystemExit: a Celery worker shutting down raises it, and the task, delivered again, resumes the batch.
        _batch_finish(batch=batch, report=ImportReport(results=reported), processed=counts["processed"], stopped=exc)
        raise
    _batch_finish(batch=batch, report=report, processed=counts["processed"])
    return report


def _batch_finish(
    *, batch: ImportBatch, report: ImportReport, processed: int, stopped: BaseException | None = None
) -> None:
    counts = {status: report.count(status) for status in ("imported", "duplicate", "replaced", "failed")}
    stored = counts["imported"] + counts["duplicate"] + counts["replaced"]
    if stopped is not None:
        error = (
            f"the import stopped after {processed} run{'' if processed == 1 else 's'}: {stopped!r}. Runs listed as "
            "imported are stored; import again to import the rest (runs already stored are recognised and skipped)."
        )
    elif not stored:
        error = f"nothing was imported: {counts['failed']} failed (see below)"
    else:
        error = ""
    again = f"{counts['replaced']} read again, " if counts["replaced"] else ""
    command = batch.origin == ImportBatch.Origin.COMMAND
    record(
        "import.command" if command else "import.batch",
        f"{'import_trajectories ' if command else ''}{batch.source_name}: {counts['imported']} imported, {again}"
        f"{counts['duplicate']} already present, {counts['failed']} failed{' (stopped)' if stopped else ''}",
        actor=batch.created_by,
        batch_id=batch.pk,
        runs=[r.run_id for r in report.results if r.status == "imported"],
        replaced=[r.run_id for r in report.results if r.status == "replaced"],
    )
    ImportBatch.objects.filter(pk=batch.pk).update(
        status=ImportBatch.Status.FAILED if error else ImportBatch.Status.DONE,
        error=error,
        finished_at=timezone.now(),
        processed=processed,
        imported=counts["imported"],
        duplicates=counts["duplicate"],
        replaced=counts["replaced"],
        failed=counts["failed"],
        events=report.events,
        report=[r.as_dict() for r in report.results],
    )


# -- failure signatures (trajectories/signatures.py, docs/signatures.md) ----------------------


def run_signatures_store(*, run_ids: list[int]) -> int:
    """Detect the signatures of these runs from their stored agents, events and final patches and
    replace their stored hits (idempotent): what `detect_signatures` runs. Three queries read the runs'
    agents, events and patches, and a few write, however many runs (the importer stores a new run's hits itself, from
    the rows it has just written: writer.store_run). Sends `signals.signatures_replaced`.
    Returns the number of hits stored."""
    if not run_ids:
        return 0
    agents: dict[int, list[dict]] = {pk: [] for pk in run_ids}
    names: dict[int, str] = {}
    parents: dict[int, int | None] = {}
    fields = (
        "pk",
        "run_id",
        "parent_id",
        "external_id",
        "role",
        "label",
        "started_at",
        "ended_at",
        "status",
        "workflow",
        "slot",
        "attempt",
        "attempts",
    )
    for row in AgentContext.objects.filter(run_id__in=run_ids).order_by().values(*fields, "position"):
        names[row["pk"]] = row["external_id"]
        parents[row["pk"]] = row.pop("parent_id")
        agents[row.pop("run_id")].append(row)
    for rows in agents.values():
        for row in rows:
            parent = parents[row["pk"]]
            row["parent"] = names.get(parent) if parent is not None else None
    events: dict[int, list[dict]] = {pk: [] for pk in run_ids}
    event_fields = ("run_id", "context_id", "seq", "kind", "timestamp", "tool", "text", "files", "target")
    for row in Event.objects.filter(run_id__in=run_ids).order_by().values(*event_fields):
        row["agent"] = names.get(row.pop("context_id"), "")
        events[row.pop("run_id")].append(row)
    # an outer loop's later rounds: when each began (the events that name their round's transcript)
    later_rounds = (
        Event.objects.filter(run_id__in=run_ids, timestamp__isnull=False)
        .exclude(source_file="")
        .order_by()
        .values("run_id", "context_id", "source_file")
        .annotate(began=Min("timestamp"))
    )
    began: dict[tuple[int, str], list] = {}
    for row in later_rounds:
        began.setdefault((row["run_id"], names.get(row["context_id"], "")), []).append(row["began"])
    for run_id, rows in agents.items():
        for row in rows:
            row["rounds"] = tuple(sorted(began.get((run_id, row["external_id"]), ())))
    patch_files: dict[int, dict[str, str]] = {pk: {} for pk in run_ids}
    workflows: dict[int, list[signatures.WorkflowState]] = {pk: [] for pk in run_ids}
    files = RunFile.objects.filter(run_id__in=run_ids).filter(
        Q(kind=RunFile.Kind.PATCH) | Q(path__endswith=".json", path__contains="workflows/")
    )
    for run_id, kind, path, content in files.order_by().values_list("run_id", "kind", "path", "content"):
        if kind == RunFile.Kind.PATCH:
            patch_files[run_id][path] = content
        elif signatures.WORKFLOW_STATE.search(path) and (state := signatures.read_workflow_state(content, source=path)):
            workflows[run_id].append(state)
    hits: list[SignatureHit] = []
    notes: dict[str, list[int]] = {}
    for pk in run_ids:
        chosen = signatures.pick_patch(patch_files[pk])
        patch = signatures.read_patch(patch_files[pk][chosen].splitlines(), source=chosen) if chosen else None
        found = signatures.detect(signatures.trace_from_rows(agents[pk], events[pk], patch, workflows[pk]))
        notes.setdefault(found.reason[:NOTE_MAX], []).append(pk)
        hits += signature_hit_rows(run_id=pk, detection=found)
    with transaction.atomic():
        SignatureHit.objects.filter(run_id__in=run_ids).delete()
        SignatureHit.objects.bulk_create(hits, batch_size=500)
        for note, pks in notes.items():
            Run.objects.filter(pk__in=pks).update(signatures_version=signatures.DETECTOR_VERSION, signatures_note=note)
        signatures_replaced.send(sender=Run, run_ids=list(run_ids))
    return len(hits)
