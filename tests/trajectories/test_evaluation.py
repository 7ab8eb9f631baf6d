"""The evaluation parsers (trajectories/evaluation.py), ORM-free: Django's test runner, pytest,
SWE-bench's report (as report.json and as its harness logs it), the evaluation summaries, and the
precedence between them. The outputs here are written in the shapes the runners write (Python's
unittest at verbosity 2 before and after 3.11, SWE-bench's harness); the study's own files are read
in test_real_task_folder.py."""

from __future__ import annotations

import json
from pathlib import Path

from trajectories import evaluation as ev

DJANGO = """\
test_a (app.tests.ATests) ... ok
test_b (app.tests.ATests) ... FAIL
test_c (app.tests.ATests) ... ERROR
test_d (app.tests.ATests) ... skipped 'needs PostgreSQL'
test_e (app.tests.ATests) ... expected failure
test_f (app.tests.ATests) ... unexpected success

======================================================================
ERROR: test_c (app.tests.ATests)
----------------------------------------------------------------------
Traceback (most recent call last):
ZeroDivisionError: division by zero

======================================================================
FAIL: test_b (app.tests.ATests)
----------------------------------------------------------------------
AssertionError: 1 != 2

----------------------------------------------------------------------
Ran 6 tests in 0.010s

FAILED (failures=1, errors=1, skipped=1, expected failures=1, unexpected successes=1)
"""


def outcomes(reading: ev.Reading) -> dict[str, tuple[str, int | None]]:
    return {t.name: (t.outcome, t.line) for t in reading.tests}


def test_django_runner_lines_give_each_test_its_outcome_and_line():
    reading = ev.django_output(DJANGO, file="out.txt")
    assert outcomes(reading) == {
        "test_a (app.tests.ATests)": ("passed", 1),
        "test_b (app.tests.ATests)": ("failed", 2),
        "test_c (app.tests.ATests)": ("error", 3),
        "test_d (app.tests.ATests)": ("skipped", 4),
        "test_e (app.tests.ATests)": ("xfailed", 5),
        "test_f (app.tests.ATests)": ("xpassed", 6),
    }
    assert next(t for t in reading.tests if t.outcome == "skipped").detail == "needs PostgreSQL"
    # passed and the expected failure pass; the skipped test is not in the total
    assert reading.counts == (2, 5) and reading.warnings == []


def test_a_result_written_after_the_tests_own_output_is_its_result():
    text = """\
test_parse_time (utils_tests.test_dateparse.DateParseTests) ... ok
test_seconds (utils_tests.test_dateparse.DurationParseTests) ... Testing against Django installed in '/testbed/django'
Importing application utils_tests
System check identified no issues (0 silenced).
ok

----------------------------------------------------------------------
Ran 2 tests in 0.001s

OK
"""
    reading = ev.django_output(text, file="out.txt")
    assert outcomes(reading) == {
        "test_parse_time (utils_tests.test_dateparse.DateParseTests)": ("passed", 1),
        "test_seconds (utils_tests.test_dateparse.DurationParseTests)": ("passed", 5),
    }
    assert reading.counts == (2, 2) and reading.warnings == []


SUBTESTS_BEFORE_311 = """\
test_days (dateparse.DurationTests) ... ok
test_negative (dateparse.DurationTests) ... test_seconds (dateparse.DurationTests) ... ok

======================================================================
FAIL: test_negative (dateparse.DurationTests) (source='-15:30')
----------------------------------------------------------------------
AssertionError: datetime.timedelta(-1, 85530) != datetime.timedelta(-1, 85470)

======================================================================
FAIL: test_negative (dateparse.DurationTests) (source='-1:15:30')
----------------------------------------------------------------------
AssertionError: datetime.timedelta(-1, 83730) != datetime.timedelta(-1, 81870)

----------------------------------------------------------------------
Ran 3 tests in 0.001s

FAILED (failures=2)
"""


def test_a_test_whose_sub_tests_failed_is_one_failed_test_not_one_per_sub_test():
    """Python < 3.11 writes no result for it (the next test starts on its line); its sub-tests'
    FAIL blocks say it failed. The runner's failures=2 counts sub-tests: 2 of its 3 tests passed."""
    reading = ev.django_output(SUBTESTS_BEFORE_311, file="out.txt")
    assert outcomes(reading) == {
        "test_days (dateparse.DurationTests)": ("passed", 1),
        "test_negative (dateparse.DurationTests)": ("failed", 5),  # its first FAIL block
        "test_seconds (dateparse.DurationTests)": ("passed", 2),
    }
    negative = next(t for t in reading.tests if t.name.startswith("test_negative"))
    assert negative.detail == "2 sub-tests failed"
    assert reading.counts == (2, 3)
    # test_seconds's own result was read; SWE-bench's grader reads that line as test_negative's: said
    assert reading.warnings == [
        "out.txt:2: test_seconds was written on test_negative's line (its sub-tests failed and wrote no result): "
        "read here by its own result; SWE-bench's grader, which reads the line as test_negative's, counts it as failed"
    ]


def test_sub_test_lines_of_python_311_belong_to_their_test():
    text = """\
test_negative (utils_tests.test_dateparse.DurationParseTests.test_negative) ...
  test_negative (utils_tests.test_dateparse.DurationParseTests.test_negative) (source='-15:30') ... FAIL
  test_negative (utils_tests.test_dateparse.DurationParseTests.test_negative) (source='-1:15:30') ... ERROR
test_seconds (utils_tests.test_dateparse.DurationParseTests.test_seconds) ... ok

----------------------------------------------------------------------
Ran 2 tests in 0.001s

FAILED (failures=1, errors=1)
"""
    reading = ev.django_output(text, file="out.txt")
    assert outcomes(reading) == {
        "test_negative (utils_tests.test_dateparse.DurationParseTests.test_negative)": ("failed", 1),
        "test_seconds (utils_tests.test_dateparse.DurationParseTests.test_seconds)": ("passed", 4),
    }
    assert reading.tests[0].detail == "1 sub-test failed; 1 sub-test errored" and reading.warnings == []


def test_a_test_with_a_docstring_is_named_by_its_id_and_keeps_the_docstring():
    text = """\
test_plain (app.tests.T) ... ok
test_documented (app.tests.T)
Regression test for #12345 ... ok

----------------------------------------------------------------------
Ran 2 tests in 0.001s

OK
"""
    reading = ev.django_output(text, file="out.txt")
    documented = reading.tests[1]
    assert (documented.name, documented.outcome, documented.line) == ("test_documented (app.tests.T)", "passed", 3)
    assert documented.detail == "Regression test for #12345" and reading.counts == (2, 2)


def test_a_cut_output_keeps_what_it_has_and_says_so():
    text = "test_a (app.tests.T) ... ok\ntest_b (app.tests.T) ... ok\ntest_c (app.tests.T) ... "
    reading = ev.django_output(text, file="cell/evaluation/test_output.txt")
    assert outcomes(reading) == {
        "test_a (app.tests.T)": ("passed", 1),
        "test_b (app.tests.T)": ("passed", 2),
        "test_c (app.tests.T)": ("unfinished", 3),
    }
    assert reading.counts == (2, 3)  # started, never reported: not passed
    assert reading.warnings == [
        "cell/evaluation/test_output.txt:3: 1 test started but no result was written (the first: "
        "test_c (app.tests.T)); counted as not passed",
        "cell/evaluation/test_output.txt: no 'Ran N tests' line: the output ends early (3 results read)",
    ]


def test_only_the_harness_test_section_is_read_and_a_class_failure_is_listed():
    text = """\
+ git diff
test_not_a_result (x.Y) ... ok
+ : '>>>>> Start Test Output'
test_a (app.tests.T) ... ok
ERROR: setUpClass (app.tests.U)
----------------------------------------------------------------------
Ran 1 test in 0.001s

FAILED (errors=1)
+ : '>>>>> End Test Output'
test_after (x.Y) ... ok
"""
    reading = ev.django_output(text, file="out.txt")
    assert outcomes(reading) == {"test_a (app.tests.T)": ("passed", 4), "setUpClass (app.tests.U)": ("error", 5)}
    assert reading.warnings == []  # one test ran; the class's error is not one of them


def test_a_verdict_the_lines_contradict_and_a_wrong_count_are_warnings():
    text = "test_a (app.tests.T) ... FAIL\n\nRan 2 tests in 0.1s\n\nOK\n"
    warnings = ev.django_output(text, file="o.txt").warnings
    assert warnings == [
        "o.txt: the runner says it ran 2 tests, but 1 are listed",
        "o.txt: the runner says 'OK', which its per-test lines do not bear out",
    ]


def test_without_per_test_lines_the_runners_own_counts_are_taken_with_a_warning():
    text = "..F.s\n----------------------------------------------------------------------\nRan 5 tests in 0.2s\n\n"
    text += "FAILED (failures=1, skipped=1)\n"
    reading = ev.django_output(text, file="o.txt")
    assert reading.tests == [] and reading.counts == (3, 4)
    assert "counts from the runner's 'Ran 5 tests' and 'FAILED (failures=1, skipped=1)'" in reading.warnings[0]


def test_pytest_lines_last_outcome_wins_and_xfail_passes():
    text = """\
tests/test_x.py::test_one FAILED                                         [ 33%]
tests/test_x.py::test_two XFAIL                                          [ 66%]
tests/test_x.py::test_three SKIPPED                                      [100%]
=========================== short test summary info ============================
PASSED tests/test_x.py::test_one
"""
    reading = ev.pytest_output(text, file="o.txt")
    assert outcomes(reading) == {
        "tests/test_x.py::test_one": ("passed", 5),
        "tests/test_x.py::test_two": ("xfailed", 2),
        "tests/test_x.py::test_three": ("skipped", 3),
    }
    assert reading.counts == (2, 2)


def test_an_output_is_read_by_the_runner_that_lists_more_and_text_without_tests_is_none():
    assert ev.output_reading(DJANGO, file="o.txt").kind == "django"
    assert ev.output_reading("tests/t.py::test_x PASSED\n", file="o.txt").kind == "pytest"
    assert ev.output_reading("2026-08-14 12:21:12 - INFO - Creating container\n", file="o.txt") is None


# -- SWE-bench's report --------------------------------------------------------------------------

REPORT = {
    "astropy__astropy-1": {
        "patch_is_None": False,
        "resolved": False,
        "tests_status": {
            "FAIL_TO_PASS": {"success": ["test_new (m.T)"], "failure": ["test_fix (m.T)"]},
            "PASS_TO_PASS": {"success": ["test_old (m.T)", "test_é (m.T)"], "failure": []},
            "FAIL_TO_FAIL": {"success": [], "failure": ["test_broken (m.T)"]},
            "PASS_TO_FAIL": {"success": [], "failure": []},
        },
    }
}


def test_a_report_gives_each_test_its_group_outcome_and_line():
    text = json.dumps(REPORT, indent=4)
    reading = ev.swebench_report(json.loads(text), file="report.json", text=text)
    lines = text.splitlines()
    where = {name: next(n for n, line in enumerate(lines, 1) if json.dumps(name) in line) for name in
             ("test_new (m.T)", "test_fix (m.T)", "test_old (m.T)", "test_é (m.T)", "test_broken (m.T)")}  # fmt: skip
    assert [(t.name, t.group, t.outcome, t.line) for t in reading.tests] == [
        ("test_new (m.T)", "FAIL_TO_PASS", "passed", where["test_new (m.T)"]),
        ("test_fix (m.T)", "FAIL_TO_PASS", "failed", where["test_fix (m.T)"]),
        ("test_old (m.T)", "PASS_TO_PASS", "passed", where["test_old (m.T)"]),
        ("test_é (m.T)", "PASS_TO_PASS", "passed", where["test_é (m.T)"]),  # written \u00e9 by json.dumps
        ("test_broken (m.T)", "FAIL_TO_FAIL", "failed", where["test_broken (m.T)"]),
    ]
    # the counts are FAIL_TO_PASS + PASS_TO_PASS
    assert reading.counts == (3, 4) and reading.group_counts("FAIL_TO_PASS") == (1, 2)
    assert reading.group_counts("PASS_TO_PASS") == (2, 2) and reading.resolved is False and reading.warnings == []


def test_a_report_in_another_shape_is_a_warning_naming_the_file_and_field():
    def said(data) -> list[str]:
        reading = ev.swebench_report(data, file="r/report.json")
        assert reading.tests == [] or data is not None
        return reading.warnings

    assert said([]) == ["r/report.json: expected an object {instance_id: {resolved, tests_status}}, got a list"]
    assert said({}) == [
        "r/report.json: expected an object {instance_id: {resolved, tests_status}}, got an empty object"
    ]
    assert said({"i": "resolved"}) == ["r/report.json: field 'i': expected an object, got a string"]
    assert said({"i": {"resolved": True}}) == [
        "r/report.json: field 'i.tests_status': expected an object of test groups, got nothing"
    ]
    assert said({"i": {"tests_status": {"FAIL_TO_PASS": {"success": "test_a (m.T)"}}}}) == [
        "r/report.json: field 'i.tests_status.FAIL_TO_PASS.success': expected a list of test names, got a string"
    ]
    mixed = {"i": {"tests_status": {"FAIL_TO_PASS": {"success": ["test_a (m.T)", 3]}, "PASS": {}}}, "j": {}}
    reading = ev.swebench_report(mixed, file="r/report.json")
    assert [t.name for t in reading.tests] == ["test_a (m.T)"]
    assert reading.warnings == [
        "r/report.json: reports 2 instances; only 'i' is read",
        "r/report.json: field 'i.tests_status.FAIL_TO_PASS.success': not a test name: 3",
        "r/report.json: field 'i.tests_status.PASS': unknown test group, one of FAIL_TO_PASS, PASS_TO_PASS, "
        "FAIL_TO_FAIL, PASS_TO_FAIL",
    ]


def test_the_report_as_the_harness_logs_it_is_read_at_its_line():
    log = "2026-08-14 12:21:24,648 - INFO - Grading answer for i...\n"
    log += f"2026-08-14 12:21:24,649 - INFO - report: {REPORT!r}\nResult for i: resolved: False\n"
    reading = ev.logged_report(log, file="run_instance.log")
    assert reading.kind == "swebench_log" and {t.line for t in reading.tests} == {2} and reading.counts == (3, 4)
    broken = ev.logged_report("x - INFO - report: {'i': {'tests_status': [}\n", file="run_instance.log")
    assert broken.tests == [] and broken.warnings == ["run_instance.log:1: the logged report is not a Python literal"]
    assert ev.logged_report("no report here\n", file="run_instance.log") is None


# -- summaries and the precedence between files -----------------------------------------------------


def test_a_loopsbench_summary_lists_its_tests_and_nl2repobench_states_counts():
    text = json.dumps(
        {
            "final_test_results": {
                "__tail__": "passed",
                "t.py::a": "passed",
                "t.py::b": "FAILED",
                "t.py::c": "skipped",
                "t.py::d": "timeout",
            }
        },  # fmt: skip
        indent=2,
    )
    reading = ev.summary_reading(text, file="cell/evaluation/summary.json")
    assert [(t.name, t.outcome, t.line, t.detail) for t in reading.tests] == [
        ("t.py::a", "passed", 4, ""),
        ("t.py::b", "failed", 5, ""),
        ("t.py::c", "skipped", 6, ""),
        ("t.py::d", "other", 7, "timeout"),  # a word we do not know: kept as written, not a pass
    ]
    assert reading.counts == (1, 3)
    counts = ev.summary_reading('{"counts": {"passed": 95, "total": 96}}', file="s.json")
    assert counts.tests == [] and counts.counts == (95, 96)
    assert ev.summary_reading('{"kind": "no tests"}', file="s.json") is None


def _cell(tmp_path: Path, files: dict[str, str]) -> tuple[Path, list[Path]]:
    for relative, text in files.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    return tmp_path, [tmp_path / relative for relative in files]


OUTPUT = "test_fix (m.T) ... ok\ntest_new (m.T) ... ok\ntest_old (m.T) ... ok\n\nRan 3 tests in 0.1s\n\nOK\n"


def test_a_report_comes_before_the_output_and_the_summary_and_disagreements_are_said(tmp_path):
    folder = "cell/evaluation/official-run/logs/i"
    cell, files = _cell(
        tmp_path,
        {
            f"{folder}/report.json": json.dumps(REPORT, indent=4),
            f"{folder}/test_output.txt": OUTPUT,
            "cell/evaluation/summary.json": '{"counts": {"passed": 1, "total": 1}}',
            "cell/final.txt": "not evaluation",
        },
    )
    found = ev.cell_tests(cell, files, task_pass=True)
    assert [r.kind for r in found.readings] == ["swebench_report", "django", "summary"]
    assert found.counts == (3, 4) and found.source == f"{folder}/report.json" and found.listed.kind == "swebench_report"
    assert found.outcomes() == {"tests_passed": 3, "tests_total": 4}
    assert found.warnings == [
        f"{folder}/report.json: the report says resolved: false, but the cell's solution_passed is true",
        f"{folder}/report.json: the report counts test_fix (m.T) as failed, but {folder}/test_output.txt:1 shows it "
        "passed",
    ]
    stated = ev.cell_tests(cell, files, quality=(9, 9))  # cell.json's own figure is kept, and the difference said
    assert stated.counts == (9, 9) and stated.source == "cell.json" and stated.listed.kind == "swebench_report"
    assert stated.warnings[-1] == f"cell.json states 9/9 tests passed (kept), but {folder}/report.json reads 3/4"


def test_a_report_that_cannot_be_read_leaves_the_output_to_count(tmp_path):
    folder = "cell/evaluation/logs"
    cell, files = _cell(tmp_path, {f"{folder}/report.json": "[1, 2", f"{folder}/test_output.txt": OUTPUT})
    found = ev.cell_tests(cell, files)
    assert found.counts == (3, 3) and found.source == f"{folder}/test_output.txt" and found.report is None
    assert len(found.warnings) == 1 and found.warnings[0].startswith(f"{folder}/report.json: not valid JSON")
    cell, files = _cell(tmp_path, {f"{folder}/report.json": '"resolved"', f"{folder}/test_output.txt": OUTPUT})
    found = ev.cell_tests(cell, files)
    assert found.counts == (3, 3) and found.warnings == [
        f"{folder}/report.json: expected an object {{instance_id: {{resolved, tests_status}}}}, got a string"
    ]


def test_a_long_output_is_read_up_to_the_limit_with_a_warning(tmp_path):
    cell, files = _cell(tmp_path, {"cell/evaluation/out.log": OUTPUT})
    found = ev.cell_tests(cell, files, limit=41)  # the first test's line and the start of the second's
    assert [(t.name, t.outcome) for t in found.listed.tests] == [
        ("test_fix (m.T)", "passed"),
        ("test_new (m.T)", "unfinished"),
    ]
    assert "cell/evaluation/out.log: longer than 41 bytes: only the first are read for tests" in found.warnings
