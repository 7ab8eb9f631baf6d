"""Raw SQL for the import's hot path: events streamed to the database, rows written without the ORM.

The ORM compiles a query per call (~0.2 ms); a run of the study corpus has ~80 events and ~7
contexts, so at paper scale the ORM, not the database, was the import's cost. Everything here
writes the same column values the ORM would (`get_db_prep_save` of each model field).

Events go through an `EventSink`, one per run:
  * PostgreSQL — one open `COPY` per run; the server inserts while the importer parses.
    Context ids are drawn from the table's sequence in blocks, so events can reference their
    context before the context row (written once, complete, at the end of the run) exists.
  * SQLite — rows are sent in batches as one JSON array per statement (`INSERT … SELECT FROM
    json_each(?)`): one `sqlite3_step` per batch, which releases the GIL, so a second thread
    inserts while the main thread parses. Context ids come from the table's own sequence (the
    run's transaction already holds SQLite's write lock, so nobody else can take them).
  * anything else — batched `executemany`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import cache
from typing import NamedTuple

import orjson
from django.db import connections, models, router

from .models import AgentContext, Event, Run

EVENT_COLUMNS = ("run_id", "context_id", "seq", "timestamp", "kind", "tool", "text", "files", "target", "source_line")
# Rows per statement (SQLite, other backends) and per block of context ids (PostgreSQL).
FLUSH_ROWS = 5000
ID_BLOCK = 64
_JSON_OPTIONS = orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z


def connection_for(model: type[models.Model]):
    return connections[router.db_for_write(model)]


# -- single rows -------------------------------------------------------------------------------


# Field types whose Python value is already what the database driver takes.
_PLAIN = frozenset(
    (
        "AutoField",
        "BigAutoField",
        "BigIntegerField",
        "BooleanField",
        "CharField",
        "FloatField",
        "ForeignKey",
        "IntegerField",
        "PositiveBigIntegerField",
        "PositiveIntegerField",
        "PositiveSmallIntegerField",
        "SmallIntegerField",
        "TextField",
    )
)


@cache
def _insert_sql(model: type[models.Model], returning: bool) -> tuple[str, tuple]:
    conn = connection_for(model)
    qn = conn.ops.quote_name
    meta = model._meta
    fields = tuple(f for f in meta.concrete_fields if not f.primary_key)
    sql = (
        f"INSERT INTO {qn(meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    if returning:
        sql += f" RETURNING {qn(meta.pk.column)}"
    return sql, fields


def _values(obj: models.Model, fields: Sequence[models.Field], conn, *, add: bool) -> list:
    """What `save()` would send for each field: `pre_save` (auto_now_add …), then the field's own
    conversion, skipped for the types whose Python value is already the database value."""
    values = []
    for f in fields:
        value = f.pre_save(obj, add)
        if value is not None and f.get_internal_type() not in _PLAIN:
            value = f.get_db_prep_save(value, conn)
        values.append(value)
    return values


def insert(obj: models.Model) -> None:
    """INSERT one new instance (defaults and auto_now_add applied as `save()` would) and set its pk."""
    model = type(obj)
    conn = connection_for(model)
    returning = conn.features.can_return_columns_from_insert
    sql, fields = _insert_sql(model, returning)
    with conn.cursor() as cursor:
        cursor.execute(sql, _values(obj, fields, conn, add=True))
        obj.pk = cursor.fetchone()[0] if returning else cursor.lastrowid
    obj._state.adding = False
    obj._state.db = conn.alias


class ContextRow(NamedTuple):
    """An AgentContext row, complete, with its id allocated by the run's EventSink."""

    id: int
    run_id: int
    parent_id: int | None
    external_id: str
    role: str
    label: str
    status: str
    started_at: datetime | None
    ended_at: datetime | None
    n_events: int
    files_touched: list[str]
    depth: int
    position: int


def insert_contexts(rows: Sequence[ContextRow]) -> None:
    if not rows:
        return
    conn = connection_for(AgentContext)
    qn = conn.ops.quote_name
    table, columns = qn(AgentContext._meta.db_table), ", ".join(qn(c) for c in ContextRow._fields)
    if conn.vendor == "postgresql":
        with (
            conn.wrap_database_errors,
            conn.cursor() as wrapper,
            wrapper.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy,
        ):
            for r in rows:
                copy.write_row((*r[:10], orjson.dumps(r.files_touched).decode(), r.depth, r.position))
        return
    adapt_dt = _datetime_adapter(conn)
    params = [
        (
            *r[:7],
            adapt_dt(r.started_at),
            adapt_dt(r.ended_at),
            r.n_events,
            orjson.dumps(r.files_touched).decode(),
            r.depth,
            r.position,
        )
        for r in rows
    ]
    with conn.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(ContextRow._fields))})", params
        )


def _datetime_adapter(conn):
    """conn.ops.adapt_datetimefield_value, with a shortcut for the UTC values the parsers produce
    on SQLite (where Django stores naive UTC text): the same string without the per-value
    time-zone machinery."""
    slow = conn.ops.adapt_datetimefield_value
    if conn.vendor != "sqlite" or conn.timezone_name != "UTC":
        return slow

    def adapt(value):
        if value is None:
            return None
        if value.tzinfo is UTC:
            return str(value.replace(tzinfo=None))
        return slow(value)

    return adapt


def insert_runs(runs: Sequence[Run]) -> None:
    """INSERT new runs whose pks were allocated (allocate_ids): COPY on PostgreSQL, else 200 per statement."""
    if not runs:
        return
    conn = connection_for(Run)
    qn = conn.ops.quote_name
    _, fields = _insert_sql(Run, False)
    columns = ", ".join(qn(c) for c in ("id", *(f.column for f in fields)))
    table = qn(Run._meta.db_table)
    if conn.vendor == "postgresql":
        with (
            conn.wrap_database_errors,  # psycopg's own cursor raises psycopg errors; callers catch Django's
            conn.cursor() as wrapper,
            wrapper.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy,
        ):
            for run in runs:
                copy.write_row((run.pk, *_values(run, fields, conn, add=True)))
    else:
        one = f"({', '.join(['%s'] * (len(fields) + 1))})"
        with conn.cursor() as cursor:
            for start in range(0, len(runs), 200):
                chunk = runs[start : start + 200]
                cursor.execute(
                    f"INSERT INTO {table} ({columns}) VALUES {', '.join([one] * len(chunk))}",
                    [value for run in chunk for value in (run.pk, *_values(run, fields, conn, add=True))],
                )
    for run in runs:
        run._state.adding = False
        run._state.db = conn.alias


def allocate_ids(model: type[models.Model], n: int) -> list[int]:
    """n unused primary keys for `model`, to write rows that reference each other in one go.

    PostgreSQL: drawn from the table's sequence. SQLite: the next n after the highest ever
    handed out, under the write lock, which the caller's transaction then holds until commit."""
    if n <= 0:
        return []
    conn = connection_for(model)
    with conn.cursor() as cursor:
        if conn.vendor == "postgresql":
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                [model._meta.db_table, n],
            )
            return [row[0] for row in cursor.fetchall()]
        # Take SQLite's write lock now (a write statement does, even one that changes nothing),
        # so that nobody else can insert between reading the highest id and using the next ones.
        qn = conn.ops.quote_name
        cursor.execute(f"UPDATE {qn(model._meta.db_table)} SET {qn('id')} = {qn('id')} WHERE {qn('id')} = -1")
    base = _max_id(conn, model)
    return list(range(base + 1, base + n + 1))


def update(obj: models.Model) -> None:
    """UPDATE every concrete field of a stored instance."""
    model = type(obj)
    conn = connection_for(model)
    qn = conn.ops.quote_name
    meta = model._meta
    fields = [f for f in meta.concrete_fields if not f.primary_key]
    assignments = ", ".join(f"{qn(f.column)} = %s" for f in fields)
    with conn.cursor() as cursor:
        cursor.execute(
            f"UPDATE {qn(meta.db_table)} SET {assignments} WHERE {qn(meta.pk.column)} = %s",
            [*_values(obj, fields, conn, add=False), obj.pk],
        )


def run_with_hash(digest: str) -> int | None:
    conn = connection_for(Run)
    qn = conn.ops.quote_name
    with conn.cursor() as cursor:
        cursor.execute(f"SELECT {qn('id')} FROM {qn(Run._meta.db_table)} WHERE {qn('content_hash')} = %s", [digest])
        row = cursor.fetchone()
    return row[0] if row else None


def clashing_run(*, task_id: int, agent_id: int, mode: str, exclude: int | None) -> tuple[int, str] | None:
    """The stored run (id, source name) with the same task, agent and mode, if any."""
    conn = connection_for(Run)
    qn = conn.ops.quote_name
    with conn.cursor() as cursor:
        cursor.execute(
            f"SELECT {qn('id')}, {qn('source_name')} FROM {qn(Run._meta.db_table)} "
            f"WHERE {qn('task_id')} = %s AND {qn('agent_id')} = %s AND {qn('mode')} = %s AND {qn('id')} <> %s",
            [task_id, agent_id, mode, -1 if exclude is None else exclude],
        )
        return cursor.fetchone()


# -- events ------------------------------------------------------------------------------------


def event_sink() -> EventSink:
    conn = connection_for(Event)
    if conn.vendor == "postgresql":
        return _PostgresSink(conn)
    if conn.vendor == "sqlite":
        return _SQLiteSink(conn)
    return EventSink(conn)


class EventSink:
    """Receives one run's event rows in file order; `finish()` when the run is complete.

    A row is (run_id, context_id, seq, timestamp (aware UTC or None), kind, tool, text,
    files (list), target, source_line). Between `add()` calls the connection may be busy
    (a COPY in progress, a batch being written by the SQLite writer thread): run no other
    query on it until `finish()` or `abort()` has returned.
    """

    def __init__(self, conn):
        self.conn = conn
        self.buffer: list[tuple] = []
        self._next_id: int | None = None

    def context_id(self) -> int:
        """A fresh AgentContext primary key; the row itself is written later by `insert_contexts`."""
        if self._next_id is None:
            self._next_id = _max_id(self.conn, AgentContext)
        self._next_id += 1
        return self._next_id

    def add(self, row: tuple) -> None:
        self.buffer.append(row)
        if len(self.buffer) >= FLUSH_ROWS:
            self._flush()

    def send(self, rows: list[tuple]) -> None:
        """Write many rows at once, in the background where the backend allows; `finish()` waits."""
        for start in range(0, len(rows), FLUSH_ROWS):
            self.buffer = rows[start : start + FLUSH_ROWS]
            self._flush()

    def send_group(
        self, contexts: list[ContextRow], events: list[tuple], run_ids: list[int], context_ids: list[int]
    ) -> None:
        """A group's contexts (final ids) and events, whose run and context ids are indexes into
        run_ids and context_ids (pipeline.py)."""
        insert_contexts(contexts)
        self.send([(run_ids[r[0]], context_ids[r[1]], *r[2:]) for r in events])

    def finish(self) -> None:
        self._flush()

    def abort(self) -> None:
        """Stop after a failure; the caller rolls the run back."""
        self.buffer = []

    def _flush(self) -> None:
        rows, self.buffer = self.buffer, []
        if not rows:
            return
        conn = self.conn
        qn = conn.ops.quote_name
        columns = ", ".join(qn(c) for c in EVENT_COLUMNS)
        params = [
            (r[0], r[1], r[2], conn.ops.adapt_datetimefield_value(r[3]), *r[4:7], orjson.dumps(r[7]).decode(), *r[8:])
            for r in rows
        ]
        with conn.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {qn(Event._meta.db_table)} ({columns}) VALUES ({', '.join(['%s'] * len(EVENT_COLUMNS))})",
                params,
            )


class MemorySink:
    """Keeps a small run's rows for a later group write; context "ids" count from first_context."""

    def __init__(self, first_context: int = 0) -> None:
        self.rows: list[tuple] = []
        self.next_context = first_context

    def context_id(self) -> int:
        self.next_context += 1
        return self.next_context - 1

    def add(self, row: tuple) -> None:
        self.rows.append(row)

    def finish(self) -> None:
        pass

    def abort(self) -> None:
        self.rows = []


def _json_text(rows: list[tuple]) -> str:
    # As text, not bytes: SQLite's JSON functions read a TEXT argument faster than a BLOB (~10%).
    return orjson.dumps(rows, option=_JSON_OPTIONS).decode()


def _contiguous(ids: list[int]) -> bool:
    return not ids or ids[-1] - ids[0] == len(ids) - 1


def _max_id(conn, model: type[models.Model]) -> int:
    qn = conn.ops.quote_name
    table = model._meta.db_table
    with conn.cursor() as cursor:
        if conn.vendor == "sqlite":
            # AUTOINCREMENT never hands out an id twice, even after deletes: start above both.
            cursor.execute(
                "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = %s), 0), "
                f"coalesce((SELECT max({qn('id')}) FROM {qn(table)}), 0))",
                [table],
            )
        else:
            cursor.execute(f"SELECT coalesce(max({qn('id')}), 0) FROM {qn(table)}")
        return cursor.fetchone()[0]


@cache
def _json_insert_sql(model: type[models.Model], columns: tuple[str, ...], overrides: tuple = ()) -> str:
    """INSERT … SELECT reading rows (JSON arrays, in `columns` order) from json_each(?).

    Django stores aware datetimes on SQLite as naive UTC text 'YYYY-MM-DD HH:MM:SS[.ffffff]';
    orjson writes them as 'YYYY-MM-DDTHH:MM:SS[.ffffff]Z'. `overrides` replace a column's
    expression (e.g. the run id as a parameter: parameters bind in order of appearance, so the
    JSON document comes last)."""
    conn = connection_for(model)
    qn = conn.ops.quote_name
    replace = dict(overrides)
    by_column = {f.column: f for f in model._meta.concrete_fields}
    picks = []
    for i, column in enumerate(columns):
        if column in replace:
            picks.append(replace[column].format(value=f"value ->> {i}"))
        elif by_column[column].get_internal_type() == "DateTimeField":
            picks.append(f"replace(rtrim(value ->> {i}, 'Z'), 'T', ' ')")
        else:
            picks.append(f"value ->> {i}")
    return (
        f"INSERT INTO {qn(model._meta.db_table)} ({', '.join(qn(c) for c in columns)}) "
        f"SELECT {', '.join(picks)} FROM json_each(?)"
    )


class _SQLiteSink(EventSink):
    """Rows go to SQLite as one JSON document per statement, written by a thread: `sqlite3_step`
    releases the GIL, so the main thread parses on meanwhile (at most one job in flight)."""

    def __init__(self, conn):
        super().__init__(conn)
        self.raw = conn.connection  # the sqlite3 connection (Django opens it with check_same_thread=False)
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def _job(self, rows: list[tuple]) -> tuple[str, tuple, int]:
        return _json_insert_sql(Event, EVENT_COLUMNS), (_json_text(rows),), len(rows)

    def _flush(self) -> None:
        rows, self.buffer = self.buffer, []
        if not rows:
            return
        job = self._job(rows)
        self._wait()
        if len(rows) < FLUSH_ROWS and self.thread is None:
            self._write([job])  # a small run: no thread at all
            self._raise()
            return
        self._start([job])

    def send(self, rows: list[tuple]) -> None:
        jobs = [self._job(rows[start : start + FLUSH_ROWS]) for start in range(0, len(rows), FLUSH_ROWS)]
        self._wait()
        if jobs:
            self._start(jobs)

    def send_group(
        self, contexts: list[ContextRow], events: list[tuple], run_ids: list[int], context_ids: list[int]
    ) -> None:
        """Everything in the writer thread. On SQLite the id blocks are contiguous ranges
        (allocate_ids), so event rows keep their indexes and SQLite adds the first id of each
        block: no row is rebuilt in Python."""
        if not (_contiguous(run_ids) and _contiguous(context_ids)):  # pragma: no cover - see allocate_ids
            super().send_group(contexts, events, run_ids, context_ids)
            return
        jobs = []
        if contexts:
            sql = _json_insert_sql(AgentContext, ContextRow._fields)
            jobs.append((sql, (_json_text([tuple(c) for c in contexts]),), len(contexts)))
        sql = _json_insert_sql(Event, EVENT_COLUMNS, (("run_id", "? + {value}"), ("context_id", "? + {value}")))
        jobs += [
            (sql, (run_ids[0], context_ids[0], _json_text(chunk)), len(chunk))
            for chunk in (events[start : start + FLUSH_ROWS] for start in range(0, len(events), FLUSH_ROWS))
        ]
        self._wait()
        if jobs:
            self._start(jobs)

    def _start(self, jobs: list[tuple[str, tuple, int]]) -> None:
        self.thread = threading.Thread(target=self._write, args=(jobs,), name="parallax-sqlite-writer")
        self.thread.start()

    def _write(self, jobs: list[tuple[str, tuple, int]]) -> None:
        try:
            for sql, params, expected in jobs:
                cursor = self.raw.execute(sql, params)
                if cursor.rowcount != expected:  # pragma: no cover - json_each yields every element
                    raise RuntimeError(f"wrote {cursor.rowcount} of {expected} rows")
        except BaseException as exc:  # handed to the main thread by _raise()
            self.error = exc

    def _wait(self) -> None:
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        self._raise()

    def _raise(self) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            with self.conn.wrap_database_errors:  # sqlite3.IntegrityError → django.db.IntegrityError
                raise error

    def finish(self) -> None:
        self._flush()
        self._wait()

    def abort(self) -> None:
        self.buffer = []
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        self.error = None


class _PostgresSink(EventSink):
    """One COPY stays open while the run streams; it closes only to draw more context ids."""

    def __init__(self, conn):
        super().__init__(conn)
        self.ids: list[int] = []
        self.cursor = None
        self.copy_cm = None
        self.copy = None

    def context_id(self) -> int:
        if not self.ids:
            self._close()  # no other statement while a COPY is open
            self.ids = allocate_ids(AgentContext, ID_BLOCK)[::-1]
        return self.ids.pop()

    def add(self, row: tuple) -> None:
        if self.copy is None:
            self._open()
        files = row[7]
        try:
            self.copy.write_row((*row[:7], orjson.dumps(files).decode() if files else "[]", *row[8:]))
        except Exception as exc:
            with self.conn.wrap_database_errors:  # psycopg.errors.X → django.db.X
                raise exc from None

    def send(self, rows: list[tuple]) -> None:
        for row in rows:  # the server inserts while the importer parses on; finish() waits for it
            self.add(row)

    def _open(self) -> None:
        qn = self.conn.ops.quote_name
        self.cursor = self.conn.cursor().cursor  # psycopg's own cursor: COPY is not in the DB-API
        self.copy_cm = self.cursor.copy(
            f"COPY {qn(Event._meta.db_table)} ({', '.join(qn(c) for c in EVENT_COLUMNS)}) FROM STDIN"
        )
        self.copy = self.copy_cm.__enter__()

    def _close(self, exc: BaseException | None = None) -> None:
        if self.copy_cm is not None:
            cm, self.copy_cm, self.copy = self.copy_cm, None, None
            try:
                with self.conn.wrap_database_errors:
                    cm.__exit__(type(exc) if exc else None, exc, None)
            finally:
                self.cursor.close()
                self.cursor = None

    def finish(self) -> None:
        self._close()

    def abort(self) -> None:
        with contextlib.suppress(Exception):  # the run is being rolled back anyway
            self._close(RuntimeError("import aborted"))


def utc(value: datetime) -> datetime:
    """Parsers hand over aware UTC datetimes; anything else is normalised (naive means UTC)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)
