"""A run's per-test results stored at import (TestOutcome), shown on the pair page and the file page,
and exported (the metrics export's group counts, the per-test CSV, `export_metrics --tests`, the API).

The cells here are written in the study's layout with test output in the shapes the runners write;
the study's own files are in test_real_task_folder.py. Each cell's log is the real `codex exec --json`
excerpt (tests/fixtures/artifact-excerpts)."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from tests.factories import FIXTURES, client_for
from trajectories import evaluation as ev
from trajectories.models import Run, RunFile, TestOutcome
from trajectories.selectors import PAIR_TESTS_SHOWN
from trajectories.services import import_paths

pytestmark = pytest.mark.django_db

EXEC = FIXTURES / "artifact-excerpts" / "codex-exec" / "trajectory__EXCERPT_lines1-9.jsonl"
OFFICIAL = "cell/evaluation/official-run/logs/run_evaluation/run-1/model/proj__proj-1"


def django_output(passed: int, failed: int) -> str:
    """The runner's verbose output: `passed` tests ok, then `failed` tests that FAIL, and its summary."""
    lines = [f"test_ok_{i:04d} (proj.tests.OkTests) ... ok" for i in range(passed)]
    lines += [f"test_bad_{i:04d} (proj.tests.BadTests) ... FAIL" for i in range(failed)]
    lines += ["", "-" * 70, f"Ran {passed + failed} tests in 0.5s", ""]
    lines.append(f"FAILED (failures={failed})" if failed else "OK")
    return "+ : '>>>>> Start Test Output'\n" + "\n".join(lines) + "\n+ : '>>>>> End Test Output'\n"


def write_cell(root: Path, mode: str, files: dict[str, str], *, task: str = "proj__proj-1", **cell) -> Path:
    folder = root / "swebench_verified" / task / "codex" / mode
    (folder / "cell").mkdir(parents=True)
    (folder / "cell.json").write_text(json.dumps({"mode": mode, "agent": "codex", **cell}))
    shutil.copy(EXEC, folder / "cell" / "trajectory.jsonl")
    for relative, text in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    return folder


def report(f2p: tuple[list[str], list[str]], p2p: tuple[list[str], list[str]], resolved: bool) -> str:
    status = {"FAIL_TO_PASS": {"success": f2p[0], "failure": f2p[1]}}
    status["PASS_TO_PASS"] = {"success": p2p[0], "failure": p2p[1]}
    return json.dumps({"proj__proj-1": {"resolved": resolved, "tests_status": status}}, indent=4)


def line_of(folder: Path, relative: str, text: str) -> int:
    """The first line of a cell's file that holds `text` (read here, not by Parallax)."""
    lines = (folder / relative).read_text().splitlines()
    return 1 + next(i for i, line in enumerate(lines) if text in line)


def import_one(root: Path) -> Run:
    result = import_paths(paths=[root]).results
    assert [r.status for r in result] == ["imported"] * len(result), result
    return Run.objects.get(pk=result[-1].run_id)


@pytest.fixture
def pair(tmp_path) -> tuple[Run, Run]:
    """A SWE-bench pair: the concurrent run has a report.json (1 of 2 FAIL_TO_PASS fixed) and its output;
    the sequential run has only its output (3 passed, 2 failed)."""
    f2p = (["test_ok_0000 (proj.tests.OkTests)"], ["test_bad_0000 (proj.tests.BadTests)"])
    p2p = (["test_ok_0001 (proj.tests.OkTests)", "test_ok_0002 (proj.tests.OkTests)"], [])
    write_cell(
        tmp_path,
        "parallel",
        {f"{OFFICIAL}/report.json": report(f2p, p2p, False), f"{OFFICIAL}/test_output.txt": django_output(3, 1)},
        solution_passed=False,
    )
    write_cell(tmp_path, "serial", {f"{OFFICIAL}/test_output.txt": django_output(3, 2)}, solution_passed=False)
    import_paths(paths=[tmp_path])
    return Run.objects.get(mode="concurrent"), Run.objects.get(mode="sequential")


def pair_folder(root: Path) -> Path:
    return root / "swebench_verified" / "proj__proj-1" / "codex"


def test_a_runs_tests_and_counts_are_stored_with_it(pair, tmp_path):
    concurrent, sequential = pair
    assert (concurrent.tests_passed, concurrent.tests_total, concurrent.test_pass) == (3, 4, 0.75)
    assert (concurrent.f2p_passed, concurrent.f2p_total, concurrent.p2p_passed, concurrent.p2p_total) == (1, 2, 2, 2)
    assert concurrent.tests_source == f"{OFFICIAL}/report.json"
    assert not [w for w in concurrent.warnings if "cell/evaluation" in w]  # the files agree
    listed = TestOutcome.objects.filter(run=concurrent, primary=True).order_by("position")
    cell = pair_folder(tmp_path) / "parallel"
    names = ["test_ok_0000 (proj.tests.OkTests)", "test_bad_0000 (proj.tests.BadTests)",
             "test_ok_0001 (proj.tests.OkTests)", "test_ok_0002 (proj.tests.OkTests)"]  # fmt: skip
    lines = [line_of(cell, f"{OFFICIAL}/report.json", f'"{name}"') for name in names]
    assert [(t.name, t.group, t.outcome, t.line) for t in listed] == [
        (names[0], "FAIL_TO_PASS", "passed", lines[0]),
        (names[1], "FAIL_TO_PASS", "failed", lines[1]),
        (names[2], "PASS_TO_PASS", "passed", lines[2]),
        (names[3], "PASS_TO_PASS", "passed", lines[3]),
    ]
    # the output is kept as read, for its own page
    output = TestOutcome.objects.filter(run=concurrent, source=f"{OFFICIAL}/test_output.txt")
    assert output.count() == 4 and not output.filter(primary=True).exists()
    assert (sequential.tests_passed, sequential.tests_total, sequential.f2p_total) == (3, 5, None)
    assert sequential.tests_source == f"{OFFICIAL}/test_output.txt"
    assert RunFile.objects.get(run=concurrent, path=f"{OFFICIAL}/report.json").kind == "evaluation"


def test_every_outcome_and_group_the_parsers_give_is_one_the_model_stores():
    assert TestOutcome.Outcome.values == list(ev.OUTCOMES)
    assert [g for g in TestOutcome.Group.values if g] == list(ev.GROUPS)


def test_importing_the_same_cells_again_stores_nothing_twice(pair, tmp_path):
    rows = TestOutcome.objects.count()
    assert {r.status for r in import_paths(paths=[tmp_path]).results} == {"duplicate"}
    assert TestOutcome.objects.count() == rows


@pytest.mark.parametrize(
    ("text", "warning"),
    [
        ("[]", "expected an object {instance_id: {resolved, tests_status}}, got a list"),
        ('{"proj__proj-1": {"tests_status": "all passed"}}',
         "field 'proj__proj-1.tests_status': expected an object of test groups, got a string"),
        ("{not json", "not valid JSON"),
    ],
)  # fmt: skip
def test_a_report_that_is_not_a_report_is_a_warning_and_the_output_counts(tmp_path, text, warning):
    write_cell(
        tmp_path, "serial", {f"{OFFICIAL}/report.json": text, f"{OFFICIAL}/test_output.txt": django_output(2, 1)}
    )
    run = import_one(tmp_path)
    assert (run.tests_passed, run.tests_total, run.f2p_total) == (2, 3, None)
    assert run.tests_source == f"{OFFICIAL}/test_output.txt"
    assert any(w.startswith(f"{OFFICIAL}/report.json: ") and warning in w for w in run.warnings), run.warnings
    assert RunFile.objects.filter(run=run, path=f"{OFFICIAL}/report.json").exists()  # kept as it is


def test_a_cut_output_imports_with_its_tests_and_a_warning(tmp_path):
    cut = django_output(4, 0).split("\n-----")[0].rsplit(" ok", 1)[0]  # ends inside the last test's line
    write_cell(tmp_path, "serial", {"cell/evaluation/test_output.txt": cut})
    run = import_one(tmp_path)
    assert (run.tests_passed, run.tests_total) == (3, 4)
    last = TestOutcome.objects.get(run=run, name="test_ok_0003 (proj.tests.OkTests)")
    assert last.outcome == "unfinished" and last.get_outcome_display() == "no result"
    assert any("no 'Ran N tests' line: the output ends early (4 results read)" in w for w in run.warnings)


def test_a_run_whose_tests_cannot_be_stored_is_not_stored_at_all(tmp_path, monkeypatch):
    from trajectories import services

    write_cell(tmp_path, "serial", {"cell/evaluation/test_output.txt": django_output(2, 0)})
    store = services.run_tests_store

    def store_then_fail(**kwargs):
        store(**kwargs)
        assert TestOutcome.objects.count() == 2  # written, and then the database gives out
        raise DatabaseError("disk full")

    monkeypatch.setattr(services, "run_tests_store", store_then_fail)
    (result,) = import_paths(paths=[tmp_path]).results
    assert result.status == "failed" and "disk full" in result.message
    assert not Run.objects.exists() and not RunFile.objects.exists() and not TestOutcome.objects.exists()


def test_test_names_are_stored_as_written(tmp_path):
    names = ["tests/t.py::test_a[back\\slash]", "tests/t.py::test_b['quote\"é→']", "tests/t.py::test_c[100%]"]
    output = "".join(f"{name} PASSED\n" for name in names)
    write_cell(tmp_path, "serial", {"cell/evaluation/pytest.log": output})
    run = import_one(tmp_path)
    assert list(TestOutcome.objects.filter(run=run).order_by("position").values_list("name", flat=True)) == names


# -- pages -----------------------------------------------------------------------------------------


def test_the_pair_page_shows_each_runs_tests_failures_first_with_links(pair, tmp_path, browser_client):
    concurrent, sequential = pair
    page = browser_client.get(f"/trajectories/runs/{sequential.pk}/").content.decode()
    left, right = page.split('aria-label="sequential run"')
    assert "3/4 passed" in left and "FAIL_TO_PASS 1/2 · PASS_TO_PASS 2/2" in left
    assert ">group</th>" in left and ">group</th>" not in right  # groups are known for the report only
    report = RunFile.objects.get(run=concurrent, path=f"{OFFICIAL}/report.json")
    n = line_of(pair_folder(tmp_path) / "parallel", report.path, '"test_bad_0000 (proj.tests.BadTests)"')
    link = f'href="/trajectories/runs/{concurrent.pk}/files/{report.pk}/?line={n}#L{n}">line {n}</a>'
    assert link in left and left.index("test_bad_0000") < left.index("test_ok_0000")  # the failure first
    output = RunFile.objects.get(run=sequential, path=f"{OFFICIAL}/test_output.txt")
    n = line_of(pair_folder(tmp_path) / "serial", output.path, "test_bad_0000 (proj.tests.BadTests) ... FAIL")
    assert "3/5 passed" in right and f'/trajectories/runs/{sequential.pk}/files/{output.pk}/?line={n}#L{n}"' in right
    assert right.index("test_bad_0001") < right.index("test_ok_0000") and "more test" not in right
    # the outcomes table says the groups too
    assert "F2P 1/2 · P2P 2/2" in page.split("</table>")[0]


def test_the_file_page_lists_the_tests_read_from_that_file(pair, tmp_path, browser_client):
    concurrent, _ = pair
    output = RunFile.objects.get(run=concurrent, path=f"{OFFICIAL}/test_output.txt")
    page = browser_client.get(f"/trajectories/runs/{concurrent.pk}/files/{output.pk}/").content.decode()
    assert "3/4 tests passed" in page and "1 failed" in page
    n = line_of(pair_folder(tmp_path) / "parallel", output.path, "test_bad_0000 (proj.tests.BadTests) ... FAIL")
    assert page.index("test_bad_0000") < page.index("test_ok_0000") and f'href="?line={n}#L{n}">line {n}</a>' in page


def test_the_pair_page_costs_the_same_for_a_run_of_five_tests_or_five_thousand(pair, tmp_path, browser_client):
    small, _ = pair

    def queries(run: Run) -> tuple[int, str]:
        browser_client.get(f"/trajectories/runs/{run.pk}/")  # warm: session, caches
        with CaptureQueriesContext(connection) as captured:
            page = browser_client.get(f"/trajectories/runs/{run.pk}/").content.decode()
        return len(captured), page

    big_root = tmp_path / "big"
    big_files = {f"{OFFICIAL}/test_output.txt": django_output(4990, 10)}
    write_cell(big_root, "parallel", big_files, task="proj__proj-2")
    write_cell(big_root, "serial", big_files, task="proj__proj-2")
    import_paths(paths=[big_root])
    big = Run.objects.get(task__external_id="proj__proj-2", mode="concurrent")
    assert TestOutcome.objects.filter(run=big, primary=True).count() == 5000
    n_small, _ = queries(small)
    n_big, page = queries(big)
    assert n_small == n_big <= 15  # 10: session, user, run, twin, both runs' artifacts, both test lists, hints …
    shown = page.split('aria-label="sequential run"')[0]
    assert shown.count('<tr class="failed">') == 10 and shown.count("<code>test_") == PAIR_TESTS_SHOWN
    assert f"{5000 - PAIR_TESTS_SHOWN} more tests (the first {PAIR_TESTS_SHOWN} are shown, failures first)" in shown


def test_tests_are_shown_only_to_those_who_see_the_run(pair, outsider, annotator):
    concurrent, _ = pair
    output = RunFile.objects.get(run=concurrent, path=f"{OFFICIAL}/test_output.txt")
    for user in (outsider, annotator):  # neither codes this run
        client = client_for(user)
        assert client.get(f"/trajectories/runs/{concurrent.pk}/").status_code == 404
        assert client.get(f"/trajectories/runs/{concurrent.pk}/files/{output.pk}/").status_code == 404


# -- exports -----------------------------------------------------------------------------------------


def read_csv(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_the_per_test_export_has_a_row_per_run_and_test(pair, tmp_path, browser_client):
    concurrent, sequential = pair
    cell = pair_folder(tmp_path) / "parallel"
    first, second = ("test_ok_0000 (proj.tests.OkTests)", "test_bad_0000 (proj.tests.BadTests)")
    response = browser_client.get("/trajectories/tests.csv")
    assert response["Content-Disposition"] == 'attachment; filename="parallax-run-tests.csv"'
    rows = read_csv(b"".join(response.streaming_content).decode())
    assert list(rows[0]) == ["run_id", "benchmark", "task_id", "agent", "mode", "test", "group", "outcome", "detail",
                             "file", "line"]  # fmt: skip
    assert [(r["run_id"], r["test"], r["group"], r["outcome"], r["line"]) for r in rows[:2]] == [
        (str(concurrent.pk), first, "FAIL_TO_PASS", "passed", str(line_of(cell, f"{OFFICIAL}/report.json", first))),
        (str(concurrent.pk), second, "FAIL_TO_PASS", "failed", str(line_of(cell, f"{OFFICIAL}/report.json", second))),
    ]
    assert len(rows) == 4 + 5 and {r["file"] for r in rows[4:]} == {f"{OFFICIAL}/test_output.txt"}
    assert rows[4]["mode"] == "sequential" and rows[4]["benchmark"] == "SWE-bench Verified"
    only = read_csv(b"".join(browser_client.get("/trajectories/tests.csv?mode=sequential").streaming_content).decode())
    assert {r["run_id"] for r in only} == {str(sequential.pk)}


def test_the_per_test_export_streams_many_runs_in_batches(tmp_path, browser_client, monkeypatch):
    from trajectories import exports

    for i in range(3):
        write_cell(tmp_path, "serial", {"cell/evaluation/out.txt": django_output(3, 1)}, task=f"proj__proj-{i}")
    import_paths(paths=[tmp_path])
    rows = list(exports.test_rows(Run.objects.all(), size=2))  # 2 runs, then 1; 2 tests a page
    assert len(rows) == 12 and [r["run_id"] for r in rows] == sorted(r["run_id"] for r in rows)
    by_run = {}
    for row in rows:
        by_run.setdefault(row["run_id"], []).append(row["test"])
    assert all(tests[-1] == "test_bad_0000 (proj.tests.BadTests)" for tests in by_run.values())  # file order


def test_anonymous_users_get_no_export_and_annotators_only_their_runs(pair, client, outsider):
    response = client.get("/trajectories/tests.csv")
    assert response.status_code == 302 and response.url.startswith("/accounts/login/")
    body = b"".join(client_for(outsider).get("/trajectories/tests.csv").streaming_content).decode()
    assert read_csv(body) == []


def test_the_run_list_links_both_exports(pair, browser_client):
    page = browser_client.get("/trajectories/?mode=concurrent").content.decode()
    assert 'href="/trajectories/metrics.csv?mode=concurrent"' in page
    assert 'href="/trajectories/tests.csv?mode=concurrent"' in page


def test_the_metrics_export_and_the_api_carry_the_group_counts(pair, adjudicator):
    concurrent, sequential = pair
    out = io.StringIO()
    call_command("export_metrics", stdout=out)
    rows = {int(r["run_id"]): r for r in read_csv(out.getvalue())}
    assert [rows[concurrent.pk][k] for k in ("tests_passed", "tests_total", "f2p_passed", "f2p_total", "p2p_passed",
                                             "p2p_total")] == ["3", "4", "1", "2", "2", "2"]  # fmt: skip
    assert rows[sequential.pk]["f2p_total"] == "" and rows[sequential.pk]["tests_source"].endswith("test_output.txt")
    api = APIClient()
    api.force_authenticate(adjudicator)
    listed = {row["id"]: row for row in api.get("/api/runs/").json()["results"]}
    assert (listed[concurrent.pk]["f2p_passed"], listed[concurrent.pk]["p2p_total"]) == (1, 2)
    assert listed[sequential.pk]["f2p_passed"] is None


def test_export_metrics_tests_writes_csv_and_json(pair, tmp_path):
    concurrent, _ = pair
    out = io.StringIO()
    call_command("export_metrics", "--tests", "--mode", "concurrent", stdout=out)
    rows = read_csv(out.getvalue())
    assert [(r["test"], r["outcome"]) for r in rows] == [
        ("test_ok_0000 (proj.tests.OkTests)", "passed"),
        ("test_bad_0000 (proj.tests.BadTests)", "failed"),
        ("test_ok_0001 (proj.tests.OkTests)", "passed"),
        ("test_ok_0002 (proj.tests.OkTests)", "passed"),
    ]
    out = io.StringIO()
    call_command("export_metrics", "--tests", "--format", "json", stdout=out)
    data = json.loads(out.getvalue())
    line = line_of(pair_folder(tmp_path) / "parallel", f"{OFFICIAL}/report.json", "test_bad_0000")
    assert len(data) == 9 and data[1] == {**rows[1], "run_id": concurrent.pk, "line": line}
    out = io.StringIO()
    call_command("export_metrics", "--tests", "--format", "json", "--agent", "nobody", stdout=out)
    assert json.loads(out.getvalue()) == []


def test_a_logged_report_that_python_cannot_read_is_a_warning_not_a_crash(tmp_path):
    """`{[1]: 2}` looks like a literal but is not one (a list is no key): the log's report is refused by
    name, the output counts, and the import goes on."""
    log = "2026-08-14 12:00:00,000 - INFO - report: {[1]: 2}\n"
    write_cell(
        tmp_path, "serial", {f"{OFFICIAL}/run_instance.log": log, f"{OFFICIAL}/test_output.txt": django_output(2, 1)}
    )
    run = import_one(tmp_path)
    assert (run.tests_passed, run.tests_total) == (2, 3)
    assert any("run_instance.log:1: the logged report is not a Python literal" in w for w in run.warnings), run.warnings
