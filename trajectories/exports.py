"""Metric and per-test rows for export (CSV/JSON); shared by the commands, the API and the pages."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from itertools import batched

from django.db.models import QuerySet

from common.spreadsheet import spreadsheet_safe

from .metrics import METRIC_FIELDS
from .models import Run, TestOutcome

ID_FIELDS = ("run_id", "benchmark", "task_id", "difficulty", "agent", "mode", "source_name")
OUTCOME_FIELDS = ("task_pass", "tests_passed", "tests_total", "test_pass", "duration_s", "shell_calls", "tokens")
# Where tests passed/total come from, and SWE-bench's FAIL_TO_PASS / PASS_TO_PASS counts when a report gives them.
TEST_COUNT_FIELDS = ("tests_source", "f2p_passed", "f2p_total", "p2p_passed", "p2p_total")
METRICS_COLUMNS = (*ID_FIELDS, *OUTCOME_FIELDS, *TEST_COUNT_FIELDS, "n_contexts", "n_events", *METRIC_FIELDS)
TEST_COLUMNS = ("run_id", "benchmark", "task_id", "agent", "mode", "test", "group", "outcome", "detail", "file", "line")


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
    for name in (*OUTCOME_FIELDS, *TEST_COUNT_FIELDS, "n_contexts", "n_events", *METRIC_FIELDS):
        row[name] = getattr(run, name)
    return row


def by_pk(qs: QuerySet, size: int = 500, first: int = 50) -> Iterator:
    """`qs` in primary-key order, fetched in batches of `first` rows doubling up to `size`, each batch a plain
    indexed query (`pk > last`), so a streamed export's first row comes after one small query (and few model
    instances) whatever the study's size. Not a server-side cursor: PostgreSQL plans a cursor for its first rows,
    and for a semi-join (the twins of a study's runs) that plan re-ran the sub-query for every outer row (issue 17:
    40 s at 10× the paper's study)."""
    last, limit = None, min(first, size)
    while True:
        batch = list((qs if last is None else qs.filter(pk__gt=last)).order_by("pk")[:limit])
        yield from batch
        if len(batch) < limit:
            return
        last, limit = batch[-1].pk, min(limit * 2, size)


def metrics_rows(runs: Iterable[Run]) -> Iterator[dict[str, object]]:
    for run in runs:
        yield metrics_row(run)


def test_rows(runs: QuerySet[Run], size: int = 500) -> Iterator[dict[str, object]]:
    """One row per run × test of each run's test list (its primary TestOutcome rows), runs in id
    order, tests in the order their file lists them. Runs are read `size` at a time (`by_pk`), and
    their tests `size` rows at a time: memory stays bounded however many runs and tests there are."""
    runs = runs.select_related("task__benchmark", "agent")
    for batch in batched(by_pk(runs, size), size):
        by_id = {run.pk: run for run in batch}
        for test in _run_order(TestOutcome.objects.filter(run_id__in=by_id, primary=True), size):
            run = by_id[test.run_id]
            yield {
                "run_id": run.pk,
                "benchmark": run.task.benchmark.name,
                "task_id": run.task.external_id,
                "agent": run.agent.name,
                "mode": run.mode,
                "test": test.name,
                "group": test.group,
                "outcome": test.outcome,
                "detail": test.detail,
                "file": test.source,
                "line": test.line,
            }


def _run_order(tests: QuerySet[TestOutcome], size: int) -> Iterator[TestOutcome]:
    """`tests` by run, then position, `size` at a time. Each page is an index range (the index leads with
    run, primary, position): the rest of the run the last page stopped in, else the runs after it. A
    single `(run > a) OR (run = a AND position > b)` would make every page scan from the first row again."""
    key: tuple[int, int] | None = None
    while True:
        batch: list[TestOutcome] = []
        if key is not None:
            batch = list(tests.filter(run_id=key[0], position__gt=key[1]).order_by("position")[:size])
        if not batch:
            after = tests if key is None else tests.filter(run_id__gt=key[0])
            batch = list(after.order_by("run_id", "position")[:size])
        if not batch:
            return
        yield from batch
        key = (batch[-1].run_id, batch[-1].position)


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
