"""Fast row writes for the importer: COPY on PostgreSQL, executemany elsewhere.

Django's bulk_create/bulk_update compile an expression per value; at 100k+ events per run
that dominates the import. Values here are prepared once per column instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import orjson
from django.db import connections

from .models import AgentContext, Event

EVENT_COLUMNS = ("run_id", "context_id", "seq", "timestamp", "kind", "tool", "text", "files", "target", "source_line")
CONTEXT_UPDATE_COLUMNS = (
    "parent_id",
    "role",
    "label",
    "status",
    "started_at",
    "ended_at",
    "n_events",
    "files_touched",
    "depth",
)


def _connection():
    return connections[Event.objects.db]


def _ts(conn, value: datetime | None):
    if value is None:
        return None
    if conn.vendor == "postgresql":
        return value
    if value.tzinfo is UTC and conn.timezone_name == "UTC":
        # What Django's adapter produces for an aware UTC value on SQLite, without its per-value
        # timezone machinery (the parsers hand over UTC datetimes).
        return str(value.replace(tzinfo=None))
    return conn.ops.adapt_datetimefield_value(value)


def insert_events(rows: Sequence[tuple]) -> None:
    """rows: (run_id, context_id, seq, timestamp, kind, tool, text, files(list), target, source_line)."""
    if not rows:
        return
    conn = _connection()
    qn = conn.ops.quote_name
    table = qn(Event._meta.db_table)
    columns = ", ".join(qn(c) for c in EVENT_COLUMNS)
    prepared = [
        (r[0], r[1], r[2], _ts(conn, r[3]), r[4], r[5], r[6], orjson.dumps(r[7]).decode(), r[8], r[9]) for r in rows
    ]
    with conn.cursor() as cursor:
        if conn.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in prepared:
                    copy.write_row(row)
        else:
            placeholders = ", ".join(["%s"] * len(EVENT_COLUMNS))
            cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({placeholders})", prepared)


def update_contexts(contexts: Sequence[AgentContext]) -> None:
    """Write the fields known only at the end of a run, one statement per context, sent together."""
    if not contexts:
        return
    conn = _connection()
    qn = conn.ops.quote_name
    assignments = ", ".join(f"{qn(c)} = %s" for c in CONTEXT_UPDATE_COLUMNS)
    sql = f"UPDATE {qn(AgentContext._meta.db_table)} SET {assignments} WHERE {qn('id')} = %s"
    params = [
        (
            c.parent_id,
            c.role,
            c.label,
            c.status,
            _ts(conn, c.started_at),
            _ts(conn, c.ended_at),
            c.n_events,
            orjson.dumps(c.files_touched).decode(),
            c.depth,
            c.pk,
        )
        for c in contexts
    ]
    with conn.cursor() as cursor:
        cursor.executemany(sql, params)
