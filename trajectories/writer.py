"""Stores one run: its records, checked by validate.py, become Run, AgentContext and Event rows.

`store_run` runs inside the caller's transaction (services.run_import gives each run its own
savepoint), so a run is stored whole or not at all. Events are written every FLUSH_ROWS as they
stream past — by binary COPY on PostgreSQL, by `executemany` elsewhere — so memory stays bounded
whatever the run's size. The run's row and its contexts are written with the first events that
need them; for a small run that is once, at the end, complete. A large run's rows written early
are brought up to date at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import orjson
from django.conf import settings
from django.db import connections, router
from psycopg.types.json import Jsonb

from . import signatures
from .artifacts import artifact_kind, read_text
from .benchmarks import canonical_benchmark
from .formats.records import FormatError, RunHeader, RunSource
from .models import AgentContext, AgentSystem, Benchmark, Event, ImportBatch, Run, RunFile, SignatureHit, Task
from .validate import SOURCE_NAME_MAX, CheckedContext, CheckedRun, RunCheck

FLUSH_ROWS = 5000  # events per write
EVENT_COLUMNS = (
    "run_id", "context_id", "seq", "timestamp", "kind", "tool", "text", "files", "target", "source_line", "source_file",
)  # fmt: skip


class Lookups:
    """Benchmark, task and agent rows seen during one import, so that each run costs no lookup
    queries. What a run adds stays pending until that run is stored (`keep()`); a run rolled
    back takes its entries with it (`forget()`)."""

    def __init__(self) -> None:
        self.benchmarks: dict[str, int] = {}
        self.tasks: dict[tuple[int, str], Task] = {}
        self.agents: dict[str, int] = {}
        self._pending: list[tuple[dict, object]] = []

    def keep(self) -> None:
        self._pending = []

    def forget(self) -> None:
        for cache, key in self._pending:
            cache.pop(key, None)
        self._pending = []

    def _remember(self, cache: dict, key, value) -> None:
        cache[key] = value
        self._pending.append((cache, key))

    def task(self, header: RunHeader, *, name: str) -> Task:
        """The run's task, created on first sight; a later run fills in what it lacked. The two
        runs of a pair must share their prompt."""
        benchmark = canonical_benchmark(header.benchmark)  # one row per benchmark, however it is spelled
        benchmark_id = self.benchmarks.get(benchmark)
        if benchmark_id is None:
            benchmark_id = Benchmark.objects.get_or_create(name=benchmark)[0].pk
            self._remember(self.benchmarks, benchmark, benchmark_id)
        key = (benchmark_id, header.task_id)
        task = self.tasks.get(key)
        if task is None:
            task = Task.objects.select_related("benchmark").get_or_create(
                benchmark_id=benchmark_id,
                external_id=header.task_id,
                defaults={"difficulty": header.difficulty, "prompt_sha256": header.prompt_sha256},
            )[0]
            self._remember(self.tasks, key, task)
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
            agent_id = AgentSystem.objects.get_or_create(
                name=header.agent, defaults={"backbone_model": header.backbone_model}
            )[0].pk
            self._remember(self.agents, header.agent, agent_id)
        return agent_id


def new_run(*, source: RunSource, digest: str, batch: ImportBatch | None) -> Run:
    return Run(source_format=source.format, source_name=source.name[:SOURCE_NAME_MAX], content_hash=digest, batch=batch)


def store_run(*, run: Run, source: RunSource, records: Iterator, lookups: Lookups) -> Run:
    """Check and store one run (a `new_run`) inside the caller's transaction: `FormatError` for
    bad input, `IntegrityError` when its content or its (task, agent, mode) is stored already; the
    caller rolls back what was written. The run's task, agent and mode are set before its row is
    written, so that the caller can name a clash."""
    check = RunCheck(source)
    rows = _RunRows(run, source, lookups, check)
    buffer: list[tuple] = []
    # what the detectors read: a few events, not the run; its final patch and its workflows' own records
    seen = signatures.TraceBuilder(final_patch(source), workflow_states(source))
    rounds: dict[str, dict[str, datetime]] = {}  # agent -> a later round's transcript -> when its events begin
    for row in check.events(records):
        buffer.append(row)
        key, seq, ts, kind, tool, text, files, target, _line, file = row
        seen.add(signatures.trace_event(key, seq, kind, ts, tool, text, files, target, seen.watch))
        if file and ts is not None:  # an event of a later round (formats/claude_code.py: an outer loop's rounds)
            began = rounds.setdefault(key, {})
            if file not in began or ts < began[file]:
                began[file] = ts
        if len(buffer) >= FLUSH_ROWS:
            rows.write(buffer)
            buffer = []
    checked = check.finish()
    agents = [
        signatures.Agent(
            c.key,
            c.role,
            c.parent,
            c.label,
            c.started_at,
            c.ended_at,
            c.status,
            c.position,
            c.workflow,
            c.slot,
            c.attempt,
            c.attempts,
            tuple(sorted(rounds.get(c.key, {}).values())),
        )  # fmt: skip
        for c in checked.contexts
    ]
    detection = signatures.detect(seen.build(agents))
    # Written with the run's row (or its final save), not by an UPDATE of their own.
    run.signatures_version, run.signatures_note = signatures.DETECTOR_VERSION, detection.reason[:NOTE_MAX]
    rows.write(buffer, checked)
    run = rows.complete(checked)
    if detection.hits:
        SignatureHit.objects.bulk_create(signature_hit_rows(run_id=run.pk, detection=detection), batch_size=500)
    return run


NOTE_MAX = Run._meta.get_field("signatures_note").max_length


def final_patch(source: RunSource) -> signatures.Patch | None:
    """The run's final patch (signatures.pick_patch among its patch files), read as store_files keeps
    it, so that a line the detectors cite is the line its anchor opens."""
    patches = {}
    for path in source.artifacts:
        relative = source.relative(path)
        if artifact_kind(relative) == RunFile.Kind.PATCH:
            patches[relative] = path
    chosen = signatures.pick_patch(patches)
    if chosen is None:
        return None
    text, _ = read_text(patches[chosen], limit=settings.PARALLAX_ARTIFACT_MAX_BYTES)
    return signatures.read_patch(text.splitlines(), source=chosen)


def workflow_states(source: RunSource) -> list[signatures.WorkflowState]:
    """The run's workflows' own records (Claude Code's `workflows/<run id>.json`), read as store_files keeps
    them, so that the line the detectors cite is the line its anchor opens."""
    states = []
    for path in dict.fromkeys([*source.files, *source.artifacts]):
        relative = source.relative(path)
        if signatures.WORKFLOW_STATE.search(relative):
            text, _ = read_text(path, limit=settings.PARALLAX_ARTIFACT_MAX_BYTES)
            if state := signatures.read_workflow_state(text, source=relative):
                states.append(state)
    return states


def signature_hit_rows(*, run_id: int, detection: signatures.Detection) -> list[SignatureHit]:
    return [
        SignatureHit(
            run_id=run_id,
            detector=hit.detector,
            modes=list(hit.modes),
            evidence=[e.as_dict() for e in hit.evidence],
            explanation=hit.explanation,
            wrong_if=hit.wrong_if,
            detector_version=signatures.DETECTOR_VERSION,
            position=i,
        )
        for i, hit in enumerate(detection.hits)
    ]


class _RunRows:
    """The rows of one run as they are written: the run's own, its contexts', its events'."""

    def __init__(self, run: Run, source: RunSource, lookups: Lookups, check: RunCheck):
        self.run, self.source, self.check, self.lookups = run, source, check, lookups
        self.conn = connections[router.db_for_write(Run)]
        self.context_ids: dict[str, int] = {}
        self.early = False  # the run's row was written before the run was complete
        self.early_contexts: list[str] = []  # and these contexts' rows
        self.placed = False  # a stored run read again (services.run_reread): its row checked against the header

    def write(self, events: list[tuple], checked: CheckedRun | None = None) -> None:
        """Write a batch of event rows, and before them the rows they refer to: the run's and its
        contexts' (final when `checked` is given, else as known so far)."""
        if self.run.pk is None:
            self._insert_run(checked)
        elif not self.placed:
            self._place_stored()
        ids, run_id = self.context_ids, self.run.pk
        if checked is not None:
            new = [c for c in checked.contexts if c.key not in ids]
            for depth in sorted({c.depth for c in new}):  # parents before their sub-agents
                self._insert_contexts([_context_values(c, run_id, ids) for c in new if c.depth == depth])
        else:
            new = [seen.record for key, seen in self.check.contexts.items() if key not in ids]
            self.early_contexts += [record.id for record in new]
            self._insert_contexts(
                [
                    (run_id, None, r.id, r.role, r.label, "", None, None, 0, [], 0, 0, "", "", "", None, None)
                    for r in new
                ]
            )
        if events:
            _write_events(self.conn, run_id, ids, events)

    def _insert_run(self, checked: CheckedRun | None) -> None:
        header = self.check.header
        if header is None:
            raise FormatError("no run header", file=self.source.name)
        run = self.run
        run.task = self.lookups.task(header, name=self.source.name)
        run.agent_id = self.lookups.agent(header)
        run.backbone_model, run.external_id = header.backbone_model, header.run_id
        if checked is None:
            run.mode, self.early = header.mode, True
        else:
            _set_final(run, checked)
        # A stored copy, or a run in the same (task, agent, mode): IntegrityError.
        fields = [f for f in Run._meta.concrete_fields if not f.primary_key]
        run.pk = _insert(self.conn, fields, [[f.pre_save(run, True) for f in fields]])[0]
        run._state.adding, run._state.db = False, self.conn.alias

    def _place_stored(self) -> None:
        """A stored run read again keeps its row (and everything that refers to it): the files must
        still describe its task, agent and mode; its values are brought up to date at the end."""
        header = self.check.header
        if header is None:
            raise FormatError("no run header", file=self.source.name)
        run = self.run
        task = self.lookups.task(header, name=self.source.name)
        agent_id = self.lookups.agent(header)
        if (task.pk, agent_id) != (run.task_id, run.agent_id) or (header.mode and header.mode != run.mode):
            raise FormatError(
                f"these files are a {header.mode or 'run'} of {task} by {header.agent}, not stored run #{run.pk} "
                f"({run.mode} of {run.task_id and run.task} by {run.agent.name})",
                file=self.source.name,
            )
        run.backbone_model, run.external_id = header.backbone_model, header.run_id
        self.placed = self.early = True

    def _insert_contexts(self, rows: list[tuple]) -> None:
        if rows:
            fields = [AgentContext._meta.get_field(name) for name in CONTEXT_COLUMNS]
            self.context_ids.update(zip((row[2] for row in rows), _insert(self.conn, fields, rows), strict=True))

    def complete(self, checked: CheckedRun) -> Run:
        """Bring what was written before the run was complete up to date."""
        run = self.run
        if self.early:
            _set_final(run, checked)
            run.save()
        if self.early_contexts:
            final = {c.key: c for c in checked.contexts}
            fields = [AgentContext._meta.get_field(name) for name in CONTEXT_COLUMNS[1:]]
            rows = [
                (*_context_values(final[key], run.pk, self.context_ids)[1:], self.context_ids[key])
                for key in self.early_contexts
            ]
            _update(self.conn, fields, rows)
        return run


def store_files(*, run: Run, source: RunSource, log_lines: dict[Path, int | None], limit: int) -> None:
    """Every file of the run an anchor can cite, with its text (at most `limit` bytes each; a longer
    one is kept cut, with a warning on the run): its logs — the events read from a line and the line
    itself — and, for a study cell, every other file of the cell and of the agent's home. A
    compressed log keeps no text (its lines are its events)."""
    rows: dict[str, RunFile] = {}
    cut = []
    for path in [*log_lines, *source.artifacts]:
        relative = source.relative(path)
        if len(relative) > PATH_MAX:
            raise FormatError(f"path is {len(relative)} characters long; at most {PATH_MAX} are stored", file=relative)
        if relative in rows:
            continue
        size = path.stat().st_size
        if path in log_lines and path.name.endswith(".gz"):
            rows[relative] = RunFile(run=run, path=relative, kind=RunFile.Kind.LOG, size=size, n_lines=None)
            continue
        text, truncated = read_text(path, limit=limit)
        if path in log_lines:
            kind, n_lines = RunFile.Kind.LOG, log_lines[path]
        else:
            kind = artifact_kind(relative) or RunFile.Kind.OTHER
            n_lines = None if truncated else text.count("\n") + (bool(text) and not text.endswith("\n"))
        rows[relative] = RunFile(
            run=run, path=relative, kind=kind, size=size, n_lines=n_lines, content=text, truncated=truncated
        )
        if truncated:
            cut.append(f"{relative}: {size:,} bytes; the first {limit:,} are kept")
    if cut:
        run.warnings = [*run.warnings, *cut]
        Run.objects.filter(pk=run.pk).update(warnings=run.warnings)
    RunFile.objects.bulk_create(rows.values())


PATH_MAX = RunFile._meta.get_field("path").max_length


CONTEXT_COLUMNS = (
    "run_id",
    "parent_id",
    "external_id",
    "role",
    "label",
    "status",
    "started_at",
    "ended_at",
    "n_events",
    "files_touched",
    "depth",
    "position",
    "source_file",
    "workflow",
    "slot",
    "attempt",
    "attempts",
)


def _context_values(c: CheckedContext, run_id: int, ids: dict[str, int]) -> tuple:
    parent_id = ids[c.parent] if c.parent else None
    return (run_id, parent_id, c.key, c.role, c.label, c.status, c.started_at, c.ended_at, c.n_events,
            c.files_touched, c.depth, c.position, c.source_file, c.workflow, c.slot, c.attempt,
            c.attempts)  # fmt: skip


def _set_final(run: Run, checked: CheckedRun) -> None:
    run.mode = checked.mode
    for name, value in checked.fields.items():
        setattr(run, name, value)


def _db_values(conn, fields: list, row) -> list:
    """A row's Python values as the database takes them, converted as the ORM converts them."""
    return [f.get_db_prep_save(value, conn) for f, value in zip(fields, row, strict=True)]


def _insert(conn, fields: list, rows: list) -> list[int]:
    """INSERT rows (Python values of `fields`, converted as the ORM does) of one model, 500 per
    statement; their new primary keys, in order."""
    meta = fields[0].model._meta
    qn = conn.ops.quote_name
    head = f"INSERT INTO {qn(meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) VALUES "
    one = f"({', '.join(['%s'] * len(fields))})"
    ids: list[int] = []
    with conn.cursor() as cursor:
        for start in range(0, len(rows), 500):
            chunk = rows[start : start + 500]
            params = [value for row in chunk for value in _db_values(conn, fields, row)]
            cursor.execute(f"{head}{', '.join([one] * len(chunk))} RETURNING {qn(meta.pk.column)}", params)
            ids += [row[0] for row in cursor.fetchall()]
    return ids


def _update(conn, fields: list, rows: list) -> None:
    """UPDATE rows of one model by primary key: each row holds the values of `fields`, then the key."""
    meta = fields[0].model._meta
    qn = conn.ops.quote_name
    columns = ", ".join(f"{qn(f.column)} = %s" for f in fields)
    params = [[*_db_values(conn, fields, row[:-1]), row[-1]] for row in rows]
    with conn.cursor() as cursor:
        cursor.executemany(f"UPDATE {qn(meta.db_table)} SET {columns} WHERE {qn(meta.pk.column)} = %s", params)


# -- events --------------------------------------------------------------------------------

# The COPY is binary: the importer does not escape the texts, the server does not parse them.
_COPY_TYPES = ("int8", "int8", "int4", "timestamptz", "text", "text", "text", "jsonb", "text", "int4", "text")


def _write_events(conn, run_id: int, context_ids: dict[str, int], rows: list[tuple]) -> None:
    """Rows from validate.RunCheck.events (the context's key first) as Event rows of the run."""
    qn = conn.ops.quote_name
    table, columns = qn(Event._meta.db_table), ", ".join(qn(c) for c in EVENT_COLUMNS)
    if conn.vendor == "postgresql":
        with (
            conn.wrap_database_errors,  # psycopg's own errors → Django's, which callers catch
            conn.cursor() as cursor,
            cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)") as copy,
        ):
            copy.set_types(_COPY_TYPES)
            for key, seq, ts, kind, tool, text, files, target, line, file in rows:
                copy.write_row(
                    (run_id, context_ids[key], seq, ts, kind, tool, text, Jsonb(files, _json_text), target, line, file)
                )
        return
    adapt = _datetime_adapter(conn)
    params = [
        (run_id, context_ids[key], seq, adapt(ts), kind, tool, text, _json_text(files), target, line, file)
        for key, seq, ts, kind, tool, text, files, target, line, file in rows
    ]
    with conn.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(EVENT_COLUMNS))})", params)


def _json_text(value) -> str:
    return orjson.dumps(value).decode()


def _datetime_adapter(conn) -> Callable:
    """conn.ops.adapt_datetimefield_value, with a shortcut for the aware UTC values the parsers
    produce when Django stores naive UTC text (SQLite): the same string, without the per-value
    time-zone conversion."""
    slow = conn.ops.adapt_datetimefield_value
    if conn.vendor != "sqlite" or conn.timezone_name != "UTC":
        return slow
    return lambda value: str(value.replace(tzinfo=None)) if value is not None and value.tzinfo is UTC else slow(value)
