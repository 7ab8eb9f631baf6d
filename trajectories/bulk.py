"""Raw SQL for the import's hot path: events streamed to the database, rows written without the ORM.

The ORM compiles a query per call (~0.2 ms); a run of the study corpus has ~80 events and ~7
contexts, so at paper scale the ORM, not the database, was the import's cost. Everything here
writes the same column values the ORM would (`get_db_prep_save` of each model field).

Events go through an `EventSink`: one per streamed run (`add()` per event), or one per group
of small runs (`send_group()`, pipeline.py).
  * PostgreSQL — a streamed run has one open `COPY`; the server inserts while the importer
    parses. Context ids are drawn from the table's sequence in blocks, so events can reference
    their context before the context row (written once, complete, at the end of the run)
    exists. A group is one statement (`_pg_group_sql`) that the server runs in a background
    thread (`_Background`) while the importer parses the next group: it draws the group's ids
    and unpacks its runs, contexts and events from three jsonb documents.
  * SQLite — rows go as one JSON array per statement (`INSERT … SELECT FROM json_each(…)`),
    run by a `_Background` thread: `sqlite3_step` releases the GIL, so the importer parses on.
    Context ids come from the table's own sequence (the run's transaction already holds
    SQLite's write lock, so nobody else can take them) — or, for a run committed in pieces,
    from blocks reserved in `sqlite_sequence`, as its row's id is.
  * anything else — batched `executemany`.
While an import runs, `import_runtime()` lets these threads have the GIL back within 0.5 ms
(and pauses the cyclic garbage collector).
"""

from __future__ import annotations

import contextlib
import gc
import os
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import NamedTuple

import orjson
import psycopg
from django.conf import settings
from django.db import connections, models, router, transaction
from django.utils import timezone

from .models import AgentContext, Event, PartialRun, Run

EVENT_COLUMNS = ("run_id", "context_id", "seq", "timestamp", "kind", "tool", "text", "files", "target", "source_line")
# Rows per statement (SQLite, other backends) and per block of context ids (PostgreSQL, SQLite pieces).
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
    fields = tuple(f for f, _ in _field_kinds(model))
    sql = (
        f"INSERT INTO {qn(meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    if returning:
        sql += f" RETURNING {qn(meta.pk.column)}"
    return sql, fields


def _values(obj: models.Model, conn, *, add: bool) -> list:
    """What `save()` would send for each concrete non-pk field, in `_insert_sql`'s order: `pre_save`
    (auto_now_add …), then the field's own conversion — skipped for the types whose Python value
    is already the database value, and shortened for aware UTC datetimes on SQLite (as in
    `_datetime_adapter`)."""
    utc_text = conn.vendor == "sqlite" and conn.timezone_name == "UTC"
    values = []
    for f, kind in _field_kinds(type(obj)):
        value = f.pre_save(obj, add)
        if value is not None and kind != "plain":
            if kind == "datetime" and utc_text and value.tzinfo is UTC:
                value = str(value.replace(tzinfo=None))
            else:
                value = f.get_db_prep_save(value, conn)
        values.append(value)
    return values


@cache
def _field_kinds(model: type[models.Model]) -> tuple[tuple[models.Field, str], ...]:
    """The concrete non-pk fields with how their values are converted: plain, datetime or prep."""
    kinds = []
    for f in model._meta.concrete_fields:
        if f.primary_key:
            continue
        internal = f.get_internal_type()
        kinds.append((f, "plain" if internal in _PLAIN else "datetime" if internal == "DateTimeField" else "prep"))
    return tuple(kinds)


def insert(obj: models.Model) -> None:
    """INSERT one new instance (defaults and auto_now_add applied as `save()` would) and set its pk."""
    model = type(obj)
    conn = connection_for(model)
    returning = conn.features.can_return_columns_from_insert
    sql, _ = _insert_sql(model, returning)
    with conn.cursor() as cursor:
        cursor.execute(sql, _values(obj, conn, add=True))
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
    if conn.vendor == "postgresql":
        with (
            conn.wrap_database_errors,  # psycopg's own cursor raises psycopg errors; callers catch Django's
            conn.cursor() as wrapper,
            wrapper.cursor.copy(f"COPY {_runs_table(conn)} FROM STDIN") as copy,
        ):
            for run in runs:
                copy.write_row((run.pk, *_values(run, conn, add=True)))
    else:
        with conn.cursor() as cursor:
            for sql, params, _ in _run_statements(runs, conn, "%s"):
                cursor.execute(sql, params)
    _stored(runs, conn)


def _runs_table(conn) -> str:
    """The run table with its column list, the primary key first."""
    qn = conn.ops.quote_name
    _, fields = _insert_sql(Run, False)
    return f"{qn(Run._meta.db_table)} ({', '.join(qn(c) for c in ('id', *(f.column for f in fields)))})"


def _run_statements(runs: Sequence[Run], conn, mark: str) -> list[tuple[str, list, int]]:
    """Multi-row INSERTs of new runs, 200 per statement: (sql, params, rows); `mark` is the
    driver's parameter marker."""
    _, fields = _insert_sql(Run, False)
    one = f"({', '.join([mark] * (len(fields) + 1))})"
    statements = []
    for start in range(0, len(runs), 200):
        chunk = runs[start : start + 200]
        statements.append(
            (
                f"INSERT INTO {_runs_table(conn)} VALUES {', '.join([one] * len(chunk))}",
                [value for run in chunk for value in (run.pk, *_values(run, conn, add=True))],
                len(chunk),
            )
        )
    return statements


def _stored(runs: Sequence[Run], conn) -> None:
    for run in runs:
        run._state.adding = False
        run._state.db = conn.alias


def allocate_ids(model: type[models.Model], n: int) -> list[int]:
    """n unused primary keys for `model`, to write rows that reference each other in one go.

    PostgreSQL: drawn from the table's sequence. SQLite: the next n after the highest ever
    handed out, under the write lock, which the caller's transaction then holds until commit;
    once committed they are never handed out again, even before the rows are written."""
    if n <= 0:
        return []
    conn = connection_for(model)
    with conn.cursor() as cursor:
        if conn.vendor == "postgresql":
            cursor.execute(f"SELECT {_pg_draw_ids(model)}", [n])
            return cursor.fetchone()[0]
        # Take SQLite's write lock now (a write statement does, even one that changes nothing),
        # so that nobody else can insert between reading the highest id and using the next ones.
        qn = conn.ops.quote_name
        table = model._meta.db_table
        cursor.execute(f"UPDATE {qn(table)} SET {qn('id')} = {qn('id')} WHERE {qn('id')} = -1")
        base = _max_id(conn, model)
        # ... and record them as handed out (AUTOINCREMENT never hands out an id twice), so the
        # reservation holds once committed, before the rows exist (a run committed in pieces).
        cursor.execute("UPDATE sqlite_sequence SET seq = %s WHERE name = %s", [base + n, table])
        if cursor.rowcount == 0:
            cursor.execute("INSERT INTO sqlite_sequence (name, seq) VALUES (%s, %s)", [table, base + n])
    return list(range(base + 1, base + n + 1))


def _pg_draw_ids(model: type[models.Model]) -> str:
    """PostgreSQL: an array of %s new ids drawn from `model`'s sequence."""
    sequence = f"pg_get_serial_sequence('{model._meta.db_table}', 'id')"
    return f"ARRAY(SELECT nextval({sequence}) FROM generate_series(1, %s::int))"


def run_with_hash(digest: str) -> int | None:
    conn = connection_for(Run)
    qn = conn.ops.quote_name
    with conn.cursor() as cursor:
        cursor.execute(f"SELECT {qn('id')} FROM {qn(Run._meta.db_table)} WHERE {qn('content_hash')} = %s", [digest])
        row = cursor.fetchone()
    return row[0] if row else None


def clashing_run(*, task_id: int, agent_id: int, mode: str) -> tuple[int, str] | None:
    """The stored run (id, source name) with the same task, agent and mode, if any."""
    conn = connection_for(Run)
    qn = conn.ops.quote_name
    with conn.cursor() as cursor:
        cursor.execute(
            f"SELECT {qn('id')}, {qn('source_name')} FROM {qn(Run._meta.db_table)} "
            f"WHERE {qn('task_id')} = %s AND {qn('agent_id')} = %s AND {qn('mode')} = %s",
            [task_id, agent_id, mode],
        )
        return cursor.fetchone()


# -- events ------------------------------------------------------------------------------------


_runtime_lock = threading.Lock()
_runtime_users = 0
_runtime_saved: tuple[float, bool] = (0.005, True)  # the process's switch interval, whether gc was on
HANDOFF_SECONDS = 0.0005


@contextlib.contextmanager
def import_runtime():
    """While an import runs, the interpreter is set for it; both settings are process-wide, so
    they are restored when the last overlapping import ends.

    * A thread waiting for the GIL gets it within 0.5 ms, not Python's 5 ms: the event writers
      (the SQLite writer thread, psycopg's COPY writer) release the GIL while the database works
      and need it back for a moment between statements; the parsing thread holds it almost all
      the time, so each statement used to cost the writer up to one switch interval of waiting.
    * No cyclic garbage collection. An import keeps a group's rows (or a streamed run's batch)
      alive while it parses on, so every collection found survivors to promote, and the full
      ones re-scanned them and everything else the process holds: 0.23 s of a 2.2 s corpus
      import, 1.1 s of the 1 GiB one. The import creates no reference cycles (reference
      counting frees all of it; a collection after a paper-corpus import finds the same ~2,300
      objects as one after Django's start-up), so the collector is off until it ends."""
    global _runtime_users, _runtime_saved
    with _runtime_lock:
        if _runtime_users == 0:
            _runtime_saved = (sys.getswitchinterval(), gc.isenabled())
            sys.setswitchinterval(min(_runtime_saved[0], HANDOFF_SECONDS))
            gc.disable()
        _runtime_users += 1
    try:
        yield
    finally:
        with _runtime_lock:
            _runtime_users -= 1
            if _runtime_users == 0:
                interval, collecting = _runtime_saved
                sys.setswitchinterval(interval)
                if collecting:
                    gc.enable()


def event_sink(*, run_id: int | None = None, source_name: str = "") -> EventSink:
    """The sink for one streamed run's events (run_id: the id reserved for its row, written last)."""
    conn = connection_for(Event)
    if conn.vendor == "postgresql":
        return _PostgresSink(conn)
    if conn.vendor == "sqlite":
        pieces = run_id is not None and _owns_transaction(conn)
        return _SQLiteSink(conn, partial=_start_partial(run_id, source_name) if pieces else None)
    return EventSink(conn)


def _owns_transaction(conn) -> bool:
    """Whether the caller's atomic block is the outermost one (so committing it early commits
    nothing of anybody else's), as `run_import`'s is, but not a test's or a caller's own."""
    return len(conn.atomic_blocks) == 1 and conn.commit_on_exit and not conn.needs_rollback


def _start_partial(run_id: int, source_name: str) -> PartialRun:
    now = timezone.now()
    partial = PartialRun(
        run_id=run_id,
        source_name=source_name[:500],
        host=socket.gethostname()[:255],
        pid=os.getpid(),
        started_at=now,
        heartbeat_at=now,
    )
    insert(partial)
    return partial


PARTIAL_STALE = timedelta(hours=1)


def discard_abandoned() -> list[str]:
    """Delete the events of runs whose import died while committing them in pieces (SQLite):
    its process is gone (same host), or it has not committed a piece for PARTIAL_STALE.
    Returns a description of each; the next import calls this first."""
    here, stale = socket.gethostname()[:255], timezone.now() - PARTIAL_STALE
    discarded = []
    for partial in PartialRun.objects.order_by("pk"):
        alive = partial.heartbeat_at >= stale and not (partial.host == here and _process_gone(partial.pid))
        if alive:
            continue
        _delete_pieces(partial)
        discarded.append(str(partial))
    return discarded


def _delete_pieces(partial: PartialRun) -> None:
    """The committed events of a run that will not be completed, and its PartialRun row."""
    with transaction.atomic():
        Event.objects.filter(run_id=partial.run_id).delete()
        PartialRun.objects.filter(pk=partial.pk).delete()


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        pass
    return False


class EventSink:
    """Receives one run's event rows in file order; `finish()` when the run is complete.

    A row is (run_id, context_id, seq, timestamp (aware UTC or None), kind, tool, text,
    files (list), target, source_line). Between `add()` calls the connection may be busy
    (a COPY in progress, a batch being written by the SQLite writer thread): run no other
    query on it until `finish()` or `abort()` has returned.
    """

    writer: _Background | None = None  # the background statements, in sinks that have them

    def __init__(self, conn):
        self.conn = conn
        self.buffer: list[tuple] = []
        self._next_id: int | None = None
        self._reserved: list[int] = []  # context ids drawn in a block, next last

    def context_id(self) -> int:
        """A fresh AgentContext primary key; the row itself is written later by `insert_contexts`."""
        if self._next_id is None:
            self._next_id = _max_id(self.conn, AgentContext)
        self._next_id += 1
        return self._next_id

    def _reserved_context_id(self) -> int:
        """`context_id` for sinks that must reserve ids before using them (allocate_ids, ID_BLOCK
        at a time): the connection is handed back first (`_release`)."""
        if not self._reserved:
            self._release()
            self._reserved = allocate_ids(AgentContext, ID_BLOCK)[::-1]
        return self._reserved.pop()

    def _release(self) -> None:
        """Make the connection free for another statement."""

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
        self,
        runs: list[tuple[int, Run]],
        contexts: list[ContextRow],
        events: list[tuple],
        n_runs: int,
        n_contexts: int,
    ) -> None:
        """A group's new runs, as (index, run), and their contexts and events (pipeline.py). Ids
        are indexes into the group's blocks of n_runs run ids and n_contexts context ids: a run's
        own (its index), a context's own, run and parent ids, an event's run and context ids. The
        runs' pks are set once `finish()` has returned."""
        run_ids = allocate_ids(Run, n_runs)
        context_ids = allocate_ids(AgentContext, n_contexts)
        for index, run in runs:
            run.pk = run_ids[index]
        self._send_group_rows([run for _, run in runs], contexts, events, run_ids, context_ids)

    def _send_group_rows(
        self,
        runs: list[Run],
        contexts: list[ContextRow],
        events: list[tuple],
        run_ids: list[int],
        context_ids: list[int],
    ) -> None:
        insert_runs(runs)
        insert_contexts(
            [
                row._replace(
                    id=context_ids[row.id],
                    run_id=run_ids[row.run_id],
                    parent_id=None if row.parent_id is None else context_ids[row.parent_id],
                )
                for row in contexts
            ]
        )
        if events:
            self._send_group_events(events, run_ids, context_ids)

    def _send_group_events(self, events: list[tuple], run_ids: list[int], context_ids: list[int]) -> None:
        self.send([(run_ids[r[0]], context_ids[r[1]], *r[2:]) for r in events])

    def busy(self) -> bool:
        """Whether rows already sent are still being written in the background."""
        return self.writer is not None and self.writer.busy()

    def finish(self) -> None:
        self._flush()

    def abort(self) -> None:
        """Stop after a failure; the caller rolls the run back."""
        self.buffer = []

    def discard(self) -> bool:
        """After the rollback of a failed run: delete what was already committed (SQLite pieces);
        whether there was anything."""
        return False

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
        self.add = self.rows.append
        self.next_context = first_context

    def context_id(self) -> int:
        self.next_context += 1
        return self.next_context - 1

    def finish(self) -> None:
        pass

    def abort(self) -> None:
        self.rows.clear()


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
    expression; they may use the named parameters :run and :context (the first run id and the
    first context id of a group's blocks), and the JSON document is then :rows."""
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
    document = ":rows" if replace else "?"
    return (
        f"INSERT INTO {qn(model._meta.db_table)} ({', '.join(qn(c) for c in columns)}) "
        f"SELECT {', '.join(picks)} FROM json_each({document})"
    )


_Job = tuple[str, Sequence | dict, int]  # SQL, its parameters, the rows it must write


class _Background:
    """Runs a list of statements in a thread (at most one list in flight) while the importer
    parses on: the database driver releases the GIL while the database works. `execute(sql,
    params)` returns the rows written; an error is raised in the importer's thread by `wait()`,
    as Django's own exception class."""

    def __init__(self, conn, execute: Callable[[str, Sequence | dict], int], name: str):
        self.conn = conn
        self.execute = execute
        self.name = name
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def start(self, jobs: list[_Job]) -> None:
        self.wait()
        self.thread = threading.Thread(target=self.run, args=(jobs,), name=self.name)
        self.thread.start()

    def run(self, jobs: list[_Job]) -> None:
        try:
            for sql, params, expected in jobs:
                written = self.execute(sql, params)
                if written != expected:  # pragma: no cover - the JSON functions yield every element
                    raise RuntimeError(f"wrote {written} of {expected} rows")
        except BaseException as exc:  # handed to the importer's thread by wait()
            self.error = exc

    def busy(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def wait(self) -> None:
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        if self.error is not None:
            error, self.error = self.error, None
            with self.conn.wrap_database_errors:  # sqlite3/psycopg errors → django.db errors
                raise error

    def abort(self) -> None:
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        self.error = None


class _SQLiteSink(EventSink):
    """Rows go to SQLite as one JSON document per statement, written by a thread: `sqlite3_step`
    releases the GIL, so the main thread parses on meanwhile (at most one job in flight).

    With a `partial` (a streamed run whose transaction is the caller's outermost one) the events
    are committed every PARALLAX_IMPORT_PIECE_EVENTS: a run of 1 GiB in one transaction first
    grows the WAL to its size, then copies all of it into the database at commit, serially, after
    the last event; in pieces the copies happen as it goes, in the writer thread, with a small
    WAL. Committed pieces are invisible (see PartialRun); context ids are then reserved in blocks
    (allocate_ids) so that nobody else can take them between two pieces."""

    def __init__(self, conn, partial: PartialRun | None = None):
        super().__init__(conn)
        raw = conn.connection  # the sqlite3 connection (Django opens it with check_same_thread=False)
        self.writer = _Background(conn, lambda sql, params: raw.execute(sql, params).rowcount, "parallax-sqlite-writer")
        self.partial = partial
        self.uncommitted = 0  # events since the last piece
        self.committed = False  # a piece has been committed: discard() must delete it

    def context_id(self) -> int:
        return super().context_id() if self.partial is None else self._reserved_context_id()

    def _release(self) -> None:
        self.writer.wait()

    def _job(self, rows: list[tuple]) -> _Job:
        return _json_insert_sql(Event, EVENT_COLUMNS), (_json_text(rows),), len(rows)

    def _flush(self) -> None:
        rows, self.buffer = self.buffer, []
        if not rows:
            return
        jobs = [self._job(rows)]
        self.uncommitted += len(rows)
        if self.partial is not None and self.uncommitted >= settings.PARALLAX_IMPORT_PIECE_EVENTS:
            jobs += self._piece_end()
        self.writer.wait()
        if len(rows) < FLUSH_ROWS:
            self.writer.run(jobs)  # a small run (or its last rows): no thread at all
            self.writer.wait()
            return
        self.writer.start(jobs)

    def _piece_end(self) -> list[_Job]:
        self.uncommitted, self.committed = 0, True
        qn = self.conn.ops.quote_name
        beat = self.conn.ops.adapt_datetimefield_value(timezone.now())
        return [
            (
                f"UPDATE {qn(PartialRun._meta.db_table)} SET {qn('heartbeat_at')} = ? WHERE {qn('run_id')} = ?",
                (beat, self.partial.run_id),
                1,
            ),
            ("COMMIT", (), -1),
            ("BEGIN", (), -1),  # as Django's atomic began it; Django commits or rolls back the last piece
        ]

    def send(self, rows: list[tuple]) -> None:
        jobs = [self._job(rows[start : start + FLUSH_ROWS]) for start in range(0, len(rows), FLUSH_ROWS)]
        if jobs:
            self.writer.start(jobs)

    def _send_group_rows(
        self,
        runs: list[Run],
        contexts: list[ContextRow],
        events: list[tuple],
        run_ids: list[int],
        context_ids: list[int],
    ) -> None:
        """Everything in the writer thread. On SQLite the id blocks are contiguous ranges
        (allocate_ids), so event rows keep their indexes and SQLite adds the first id of each
        block: no row is rebuilt in Python."""
        if not (_contiguous(run_ids) and _contiguous(context_ids)):  # pragma: no cover - see allocate_ids
            super()._send_group_rows(runs, contexts, events, run_ids, context_ids)
            return
        jobs = _run_statements(runs, self.conn, "?")
        _stored(runs, self.conn)
        if contexts:
            offsets = (("id", ":context + {value}"), ("run_id", ":run + {value}"), ("parent_id", ":context + {value}"))
            sql = _json_insert_sql(AgentContext, ContextRow._fields, offsets)
            rows = _json_text([tuple(c) for c in contexts])
            jobs.append((sql, {"run": run_ids[0], "context": context_ids[0], "rows": rows}, len(contexts)))
        if events:  # one statement: each statement costs the writer a wait for the GIL (see import_runtime)
            offsets = (("run_id", ":run + {value}"), ("context_id", ":context + {value}"))
            sql = _json_insert_sql(Event, EVENT_COLUMNS, offsets)
            rows = _json_text(events)
            jobs.append((sql, {"run": run_ids[0], "context": context_ids[0], "rows": rows}, len(events)))
        if jobs:
            self.writer.start(jobs)

    def finish(self) -> None:
        self._flush()
        self.writer.wait()
        if self.partial is not None:  # the run's last transaction: its row and contexts follow
            PartialRun.objects.filter(pk=self.partial.pk).delete()

    def abort(self) -> None:
        self.buffer = []
        self.writer.abort()

    def discard(self) -> bool:
        if self.partial is None or not self.committed:
            return False
        _delete_pieces(self.partial)
        return True


# The events' COPY is binary: the importer does not escape the texts, the server does not parse
# them. `files` goes in jsonb's own binary form, a version byte (1) then the JSON text, which
# psycopg's text dumper sends as it is.
_EVENT_COPY_TYPES = ("int8", "int8", "int4", "timestamptz", "text", "text", "text", "text", "text", "int4")
_EMPTY_JSONB = "\x01[]"


class _PostgresSink(EventSink):
    """A streamed run: one COPY stays open while it streams; it closes only to draw more context
    ids. A group: one statement in the writer thread (`send_group`)."""

    def __init__(self, conn):
        super().__init__(conn)
        self.cursor = None
        self.copy_cm = None
        self.copy = None
        self.group_runs: list[tuple[int, Run]] = []  # the group's runs, waiting for their ids
        self.drawn: list[list[int]] = []  # the run ids the group statement drew (its one row)
        conn.ensure_connection()  # a no-op inside the import's transaction, which already connected
        raw, drawn = conn.connection, self.drawn  # not `self`: a bound method would make a cycle

        def execute(sql: str, params: Sequence) -> int:
            # psycopg's own cursor (Django's wrapper is not thread-aware), binding on the server:
            # the documents travel as parameters, not as literals the server's SQL parser scans
            with psycopg.Cursor(raw) as cursor:
                cursor.execute(sql, params)
                if cursor.description is not None:  # the group statement
                    drawn.append(cursor.fetchone()[0])
                return cursor.rowcount

        self.writer = _Background(conn, execute, "parallax-postgres-writer")

    def context_id(self) -> int:
        return self._reserved_context_id()

    def _release(self) -> None:
        self._close()  # no other statement while a COPY is open

    def add(self, row: tuple) -> None:
        if self.copy is None:
            self._open()
        files = row[7]
        try:
            self.copy.write_row((*row[:7], "\x01" + orjson.dumps(files).decode() if files else _EMPTY_JSONB, *row[8:]))
        except Exception as exc:
            with self.conn.wrap_database_errors:  # psycopg.errors.X → django.db.X
                raise exc from None

    def send(self, rows: list[tuple]) -> None:
        for row in rows:  # the server inserts while the importer parses on; finish() waits for it
            self.add(row)

    def send_group(
        self,
        runs: list[tuple[int, Run]],
        contexts: list[ContextRow],
        events: list[tuple],
        n_runs: int,
        n_contexts: int,
    ) -> None:
        """The whole group in one statement, run by the writer thread while the importer parses
        the next group: it draws the ids from the sequences and unpacks the runs, contexts and
        events from three jsonb documents (`_pg_group_sql`). The importer's thread only serialises
        the documents (orjson) and sends no statement of its own, so it never waits for the
        server in between. (Runs and contexts by COPY from the importer's thread, with only the
        events in the background, left it waiting for those COPYs, the id blocks and the
        deferred foreign-key checks at commit: ~0.3 s of the study corpus.)"""
        fields = _field_kinds(Run)
        run_rows = [(index, *(f.pre_save(run, True) for f, _ in fields)) for index, run in runs]
        self.group_runs = runs
        self.drawn.clear()
        params = (
            n_runs,
            n_contexts,
            _json_text(run_rows),
            _json_text([tuple(c) for c in contexts]),
            _json_text(events),
        )
        self.writer.start([(_pg_group_sql(), params, 1)])

    def _open(self) -> None:
        qn = self.conn.ops.quote_name
        self.cursor = self.conn.cursor().cursor  # psycopg's own cursor: COPY is not in the DB-API
        # (psycopg's QueuedLibpqWriter, a thread that waits for the server, measured 15% slower:
        # its thread needs the GIL for every 32 KiB it sends.)
        self.copy_cm = self.cursor.copy(
            f"COPY {qn(Event._meta.db_table)} ({', '.join(qn(c) for c in EVENT_COLUMNS)}) FROM STDIN (FORMAT BINARY)"
        )
        self.copy = self.copy_cm.__enter__()
        self.copy.set_types(_EVENT_COPY_TYPES)

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
        self.writer.wait()
        if self.group_runs:
            runs, self.group_runs = self.group_runs, []
            for index, run in runs:
                run.pk = self.drawn[0][index]
            _stored([run for _, run in runs], self.conn)

    def abort(self) -> None:
        self.writer.abort()
        self.group_runs = []
        with contextlib.suppress(Exception):  # the run is being rolled back anyway
            self._close(RuntimeError("import aborted"))


@cache
def _pg_group_sql() -> str:
    """A group's rows in one statement: the run and context ids drawn from the sequences
    (parameters: how many of each), then the runs, contexts and events, each from a jsonb
    document of rows (JSON arrays) whose id columns hold indexes into those ids; returns the run
    ids (the runs' pks)."""
    inserts = (
        (Run, ("id", *(f.column for f, _ in _field_kinds(Run))), {"id": "runs"}),
        (AgentContext, ContextRow._fields, {"id": "contexts", "run_id": "runs", "parent_id": "contexts"}),
        (Event, EVENT_COLUMNS, {"run_id": "runs", "context_id": "contexts"}),
    )
    parts = [f"ids AS (SELECT {_pg_draw_ids(Run)} AS runs, {_pg_draw_ids(AgentContext)} AS contexts)"]
    parts += [f"w{i} AS ({_pg_insert_from_json(*insert)})" for i, insert in enumerate(inserts)]
    return f"WITH {', '.join(parts)} SELECT runs FROM ids"


def _pg_insert_from_json(model: type[models.Model], columns: tuple[str, ...], id_columns: dict[str, str]) -> str:
    """INSERT … SELECT reading rows (JSON arrays in `columns` order) from a jsonb parameter;
    `id_columns` {column: "runs" | "contexts"} hold indexes into the `ids` arrays (NULL stays NULL)."""
    conn = connection_for(model)
    qn = conn.ops.quote_name
    by_column = {f.column: f for f in model._meta.concrete_fields}
    picks = []
    for i, column in enumerate(columns):
        if column in id_columns:
            picks.append(f"ids.{id_columns[column]}[(r ->> {i})::int + 1]")
        else:
            db_type = by_column[column].db_type(conn)
            picks.append(f"(r -> {i})::jsonb" if db_type == "jsonb" else f"(r ->> {i})::{db_type}")
    return (
        f"INSERT INTO {qn(model._meta.db_table)} ({', '.join(qn(c) for c in columns)}) "
        f"SELECT {', '.join(picks)} FROM ids, jsonb_array_elements(%s::jsonb) AS r"
    )


def utc(value: datetime) -> datetime:
    """Parsers hand over aware UTC datetimes; anything else is normalised (naive means UTC)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)
