"""Metric rows for export (CSV/JSON); shared by the command, the API and the pages."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator

from django.db.models import QuerySet

from config.spreadsheet import spreadsheet_safe

from .metrics import METRIC_FIELDS
from .models import Run

ID_FIELDS = ("run_id", "benchmark", "task_id", "difficulty", "agent", "mode", "source_name")
OUTCOME_FIELDS = ("task_pass", "tests_passed", "tests_total", "test_pass", "duration_s", "shell_calls", "tokens")
METRICS_COLUMNS = (*ID_FIELDS, *OUTCOME_FIELDS, "n_contexts", "n_events", *METRIC_FIELDS)


def metrics_row(run: Run) -> dict[str, object]:
    row: dict[str, object] = {
        "run_id": run.pk,
        "benchmark": run.task.benchmark.name,
        "task_id": run.task.external_id,
        "difficulty": run.task.difficulty,
        "agent": run.agent.name,
        "mode": run.mode,
        "source_name": run.source_name,
    }
    for name in (*OUTCOME_FIELDS, "n_contexts", "n_events", *METRIC_FIELDS):
        row[name] = getattr(run, name)
    return row


def by_pk(qs: QuerySet, size: int = 500) -> Iterator:
    """`qs` in primary-key order, fetched `size` rows at a time, each batch a plain indexed query
    (`pk > last`), so a streamed export's first row comes after one small query. Not a server-side
    cursor: PostgreSQL plans a cursor for its first rows, and for a semi-join (the twins of a
    study's runs) that plan re-ran the sub-query for every outer row (issue 17: 40 s at 10× the
    paper's study)."""
    last = None
    while True:
        batch = list((qs if last is None else qs.filter(pk__gt=last)).order_by("pk")[:size])
        yield from batch
        if len(batch) < size:
            return
        last = batch[-1].pk


def metrics_rows(runs: Iterable[Run]) -> Iterator[dict[str, object]]:
    for run in runs:
        yield metrics_row(run)


def csv_lines(rows: Iterable[dict[str, object]], columns: tuple[str, ...]) -> Iterator[str]:
    """Stream CSV text line by line (header first); text cells are made spreadsheet-safe."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    yield _drain(buffer)
    for row in rows:
        writer.writerow({k: ("" if v is None else spreadsheet_safe(v)) for k, v in row.items()})
        yield _drain(buffer)


def _drain(buffer: io.StringIO) -> str:
    value = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate(0)
    return value
