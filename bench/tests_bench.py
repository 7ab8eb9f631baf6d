"""A run's per-test results at scale (docs/format.md "The tests of a run", docs/performance.md).

Writes study cells whose official test output is Django's runner at --verbosity 2 (2% of the tests
failing): a pair of 50,000 tests a run, and 100 pairs of 1,000 tests a run. Times their import with and
without the tests (the reading of the evaluation files replaced by an empty one, for the comparison
only), the pair page of each size (its queries and the test list's own query) and the per-test export
of all 300,000 rows (time to the first bytes and to the end).

SQLite in a scratch directory by default; BENCH_DATABASE_URL=postgres://… for PostgreSQL (the
database is flushed first).

    .venv/bin/python bench/tests_bench.py
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.django_env import setup_django  # noqa: E402

scratch = Path(setup_django("parallax-tests-bench-"))

from django.contrib.auth.models import Group, User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from accounts.roles import ADMIN  # noqa: E402
from trajectories import evaluation  # noqa: E402
from trajectories.formats import detect  # noqa: E402
from trajectories.models import Run, TestOutcome  # noqa: E402
from trajectories.services import import_paths  # noqa: E402

EXEC = ROOT / "tests/fixtures/artifact-excerpts/codex-exec/trajectory__EXCERPT_lines1-9.jsonl"
OFFICIAL = "cell/evaluation/official-run/logs/run_evaluation/bench/model/instance"


def django_output(n: int) -> str:
    failed = n // 50
    lines = [f"test_ok_{i:06d} (proj.tests.OkTests) ... ok" for i in range(n - failed)]
    lines += [f"test_bad_{i:06d} (proj.tests.BadTests) ... FAIL" for i in range(failed)]
    lines += ["", "-" * 70, f"Ran {n} tests in 0.5s", "", f"FAILED (failures={failed})"]
    return "+ : '>>>>> Start Test Output'\n" + "\n".join(lines) + "\n+ : '>>>>> End Test Output'\n"


def write_cell(root: Path, task: str, mode: str, n: int) -> None:
    folder = root / "swebench_verified" / task / "codex" / mode
    (folder / OFFICIAL).mkdir(parents=True)
    (folder / "cell.json").write_text(json.dumps({"mode": mode, "agent": "codex"}))
    shutil.copy(EXEC, folder / "cell" / "trajectory.jsonl")
    (folder / OFFICIAL / "test_output.txt").write_text(django_output(n))


def timed_import(path: Path, *, tests: bool) -> float:
    detect.cell_tests = evaluation.cell_tests if tests else (lambda *args, **kwargs: evaluation.CellTests())
    started = time.perf_counter()
    results = import_paths(paths=[path]).results
    assert {r.status for r in results} == {"imported"}, results[:3]
    return time.perf_counter() - started


def main() -> None:
    data = scratch / "cells"
    for mode in ("parallel", "serial"):
        write_cell(data / "big", "big-1", mode, 50_000)
        for i in range(100):
            write_cell(data / "many", f"many-{i:03d}", mode, 1_000)
    if connection.vendor == "postgresql":
        call_command("flush", interactive=False, verbosity=0)
    call_command("migrate", verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)  # production static storage, as deployed
    print(f"database: {connection.vendor}")
    for name, runs in (("many", 200), ("big", 2)):
        call_command("flush", "--noinput", verbosity=0)
        without = timed_import(data / name, tests=False)
        call_command("flush", "--noinput", verbosity=0)
        with_tests = timed_import(data / name, tests=True)
        print(f"import {name} ({runs} runs): {without:.2f} s without tests, {with_tests:.2f} s with them")
    timed_import(data / "many", tests=True)  # both sets stored for the pages and the export
    print(f"TestOutcome rows: {TestOutcome.objects.count():,}")
    user = User.objects.create_user("bench")
    user.groups.add(Group.objects.get_or_create(name=ADMIN)[0])
    client = Client()
    client.force_login(user)
    for label, task in (("50,000 tests a run", "big-1"), ("1,000 tests a run", "many-000")):
        run = Run.objects.get(task__external_id=task, mode="concurrent")
        url = f"/trajectories/runs/{run.pk}/"
        client.get(url)
        times, test_query = [], []
        for _ in range(7):
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                assert client.get(url).status_code == 200
                times.append(time.perf_counter() - started)
            test_query += [float(q["time"]) for q in queries.captured_queries if "testoutcome" in q["sql"]]
        print(
            f"pair page, {label}: median {statistics.median(times) * 1000:.0f} ms, {len(queries)} queries, "
            f"the test lists' query {statistics.median(test_query) * 1000:.0f} ms"
        )
    started, first, lines = time.perf_counter(), None, 0
    for chunk in client.get("/trajectories/tests.csv").streaming_content:
        first = first or time.perf_counter() - started
        lines += chunk.count(b"\n")
    print(
        f"tests.csv: {lines - 1:,} rows, first bytes after {first * 1000:.0f} ms, "
        f"all in {time.perf_counter() - started:.1f} s"
    )
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
