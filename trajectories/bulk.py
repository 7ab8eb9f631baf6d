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
        with conn.cursor() as wrapper, wrapper.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
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
    """INSERT new runs, 200 per statement, and set their pks (matched back by content hash)."""
    if not runs:
        return
    conn = connection_for(Run)
    qn = conn.ops.quote_name
    sql, fields = _insert_sql(Run, False)
    if conn.vendor == "postgresql":  # ids from the sequence, rows by COPY
        for run, pk in zip(runs, allocate_ids(Run, len(runs)), strict=True):
            run.pk = pk
        columns = ", ".join(qn(c) for c in ("id", *(f.column for f in fields)))
        with (
            conn.cursor() as wrapper,
            wrapper.cursor.copy(f"COPY {qn(Run._meta.db_table)} ({columns}) FROM STDIN") as copy,
        ):
            for run in runs:
                copy.write_row((run.pk, *_values(run, fields, conn, add=True)))
        for run in runs:
            run._state.adding = False
            run._state.db = conn.alias
        return
    head, one = sql.split(" VALUES ")
    by_hash = {run.content_hash: run for run in runs}
    with conn.cursor() as cursor:
        for start in range(0, len(runs), 200):
            chunk = runs[start : start + 200]
            cursor.execute(
                f"{head} VALUES {', '.join([one] * len(chunk))} RETURNING {qn('id')}, {qn('content_hash')}",
                [value for run in chunk for value in _values(run, fields, conn, add=True)],
            )
            for pk, digest in cursor.fetchall():
                by_hash[digest].pk = pk
    for run in runs:
        run._state.adding = False
        run._state.db = conn.alias


def allocate_ids(model: type[models.Model], n: int) -> list[int]:
    """n unused primary keys for `model`, to write rows that reference each other in one go.

    PostgreSQL: drawn from the table's sequence. SQLite: the next n after the highest ever
    handed out — safe because the caller has already written in this transaction, so it holds
    SQLite's write lock until commit."""
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


def event_sink(run_id: int) -> EventSink:
    conn = connection_for(Event)
    if conn.vendor == "postgresql":
        return _PostgresSink(conn, run_id)
    if conn.vendor == "sqlite":
        return _SQLiteSink(conn, run_id)
    return EventSink(conn, run_id)


class EventSink:
    """Receives one run's event rows in file order; `finish()` when the run is complete.

    A row is (run_id, context_id, seq, timestamp (aware UTC or None), kind, tool, text,
    files (list), target, source_line). Between `add()` calls the connection may be busy
    (a COPY in progress, a batch being written by the SQLite writer thread): run no other
    query on it until `finish()` or `abort()` has returned.
    """

    def __init__(self, conn, run_id: int):
        self.conn = conn
        self.run_id = run_id
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
    """Keeps a small run's rows for a later group write; context ids are the contexts' positions."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self._n = 0

    def context_id(self) -> int:
        self._n += 1
        return self._n - 1

    def add(self, row: tuple) -> None:
        self.rows.append(row)

    def finish(self) -> None:
        pass

    def abort(self) -> None:
        self.rows = []


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


class _SQLiteSink(EventSink):
    """Batches go to SQLite as one JSON document each; from the second batch on, a writer thread
    inserts batch n while the main thread parses batch n + 1 (at most one batch in flight)."""

    SQL = None  # built on first use

    def __init__(self, conn, run_id: int):
        super().__init__(conn, run_id)
        self.raw = conn.connection  # the sqlite3 connection (Django opens it with check_same_thread=False)
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None

    @classmethod
    def _sql(cls, conn) -> str:
        if cls.SQL is None:
            qn = conn.ops.quote_name
            picks = [
                # Django stores aware datetimes on SQLite as naive UTC text 'YYYY-MM-DD HH:MM:SS[.ffffff]';
                # orjson wrote them as 'YYYY-MM-DDTHH:MM:SS[.ffffff]Z'.
                f"replace(rtrim(value ->> {i}, 'Z'), 'T', ' ')" if column == "timestamp" else f"value ->> {i}"
                for i, column in enumerate(EVENT_COLUMNS)
            ]
            cls.SQL = (
                f"INSERT INTO {qn(Event._meta.db_table)} ({', '.join(qn(c) for c in EVENT_COLUMNS)}) "
                f"SELECT {', '.join(picks)} FROM json_each(?)"
            )
        return cls.SQL

    def _flush(self) -> None:
        rows, self.buffer = self.buffer, []
        if not rows:
            return
        payload = orjson.dumps(rows, option=_JSON_OPTIONS)
        self._wait()
        if len(rows) < FLUSH_ROWS and self.thread is None:
            self._write([(payload, len(rows))])  # a small run: no thread at all
            self._raise()
            return
        self._start([(payload, len(rows))])

    def send(self, rows: list[tuple]) -> None:
        batches = [
            (
                orjson.dumps(rows[start : start + FLUSH_ROWS], option=_JSON_OPTIONS),
                len(rows[start : start + FLUSH_ROWS]),
            )
            for start in range(0, len(rows), FLUSH_ROWS)
        ]
        self._wait()
        if batches:
            self._start(batches)

    def _start(self, batches: list[tuple[bytes, int]]) -> None:
        self.thread = threading.Thread(target=self._write, args=(batches,), name="parallax-sqlite-writer")
        self.thread.start()

    def _write(self, batches: list[tuple[bytes, int]]) -> None:
        try:
            for payload, expected in batches:
                cursor = self.raw.execute(self._sql(self.conn), (payload,))
                if cursor.rowcount != expected:  # pragma: no cover - json_each yields every element
                    raise RuntimeError(f"wrote {cursor.rowcount} of {expected} events")
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

    def __init__(self, conn, run_id: int):
        super().__init__(conn, run_id)
        self.ids: list[int] = []
        self.cursor = None
        self.copy_cm = None
        self.copy = None

    def context_id(self) -> int:
        if not self.ids:
            self._close()
            with self.conn.cursor() as cursor:
                cursor.execute(
                    "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                    [AgentContext._meta.db_table, ID_BLOCK],
                )
                self.ids = [row[0] for row in cursor.fetchall()][::-1]
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
