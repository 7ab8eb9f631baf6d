"""Per-test results of a run's evaluation, from every runner the study's artifact holds (ORM-free).

A study cell keeps what its evaluation said in several files under `cell/evaluation/`, and each
says it its own way:

* SWE-bench's `report.json` — `{instance: {resolved, tests_status: {FAIL_TO_PASS: {success: [...],
  failure: [...]}, PASS_TO_PASS: ..., FAIL_TO_FAIL: ..., PASS_TO_FAIL: ...}}}`;
* the same report as SWE-bench logs it in `run_instance.log` (`... - INFO - report: {...}`, a
  Python literal on one line) — the only copy when `report.json` was not kept;
* the official test output: Django's own runner (`runtests.py --verbosity 2`: `test_x (mod.Class)
  ... ok`, then `Ran N tests` and `OK` / `FAILED (failures=F)`) or pytest (`-v` / `-rA` lines);
* the evaluation summary: LoopsBench's per-test `final_test_results`, NL2RepoBench's `counts`.

Each parser turns one file into a `Reading`: its tests (name, outcome, group when known, the line it
was read from) and the counts it gives. `cell_tests` reads a cell's files and orders the readings by
precedence (report.json, the logged report, the test output, the summary): the first with counts
gives the run's tests passed/total, the first with per-test results is the run's test list.

Outcomes: passed, failed, error, skipped, xfailed (an expected failure), xpassed (an unexpected
success), unfinished (started, no result written: the output was cut or the runner died), other (a
summary's word we do not know, kept in `detail`). **Counted** as passed: passed and xfailed (the
runner's own verdict: an expected failure leaves the run OK); the total is every test but the
skipped ones. A report counts FAIL_TO_PASS + PASS_TO_PASS, as SWE-bench decides `resolved` on them.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .artifacts import read_text

PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"
XFAILED, XPASSED, UNFINISHED, OTHER = "xfailed", "xpassed", "unfinished", "other"
OUTCOMES = (PASSED, FAILED, ERROR, SKIPPED, XFAILED, XPASSED, UNFINISHED, OTHER)
PASSING = frozenset({PASSED, XFAILED})
NOT_OK = (FAILED, ERROR, UNFINISHED, XPASSED, OTHER)  # shown first

F2P, P2P, F2F, P2F = "FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_FAIL", "PASS_TO_FAIL"
GROUPS = (F2P, P2P, F2F, P2F)
COUNTED_GROUPS = (F2P, P2P)

# The kinds of reading, in precedence order (the first with counts gives the run's).
REPORT, LOGGED_REPORT, DJANGO, PYTEST, SUMMARY = "swebench_report", "swebench_log", "django", "pytest", "summary"
PRECEDENCE = (REPORT, LOGGED_REPORT, DJANGO, PYTEST, SUMMARY)

READ_LIMIT = 32 * 1024 * 1024  # bytes of one evaluation file read for its tests; a longer one is read cut
DETAIL_MAX = 300  # TestOutcome.detail's max_length

# Words a summary uses for an outcome (LoopsBench writes pytest's), lower-cased.
_OUTCOME_WORDS = {
    "passed": PASSED, "pass": PASSED, "ok": PASSED, "success": PASSED,
    "failed": FAILED, "fail": FAILED, "failure": FAILED,
    "error": ERROR, "errored": ERROR,
    "skipped": SKIPPED, "skip": SKIPPED,
    "xfailed": XFAILED, "xfail": XFAILED, "expected failure": XFAILED,
    "xpassed": XPASSED, "xpass": XPASSED, "unexpected success": XPASSED,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class TestResult:
    __test__ = False  # not a pytest test class

    name: str
    outcome: str  # one of OUTCOMES
    line: int | None = None  # in the file it was read from
    group: str = ""  # one of GROUPS, when a report says
    detail: str = ""  # a skip's reason, failing sub-tests, a docstring, an unknown outcome word


@dataclass
class Reading:
    """What one file says about the tests: its per-test results and the counts it gives."""

    file: str  # relative to the cell folder
    kind: str  # one of PRECEDENCE
    tests: list[TestResult] = field(default_factory=list)
    stated: tuple[int, int] | None = None  # (passed, total) the file states without listing tests
    resolved: bool | None = None  # a SWE-bench report's verdict
    warnings: list[str] = field(default_factory=list)

    @property
    def counts(self) -> tuple[int, int] | None:
        """(passed, total), or None when the file gives neither tests nor counts."""
        if self.kind in (REPORT, LOGGED_REPORT):
            counted = [t for t in self.tests if t.group in COUNTED_GROUPS]
            return count(counted) if self.tests else None
        if self.tests:
            return count(self.tests)
        return self.stated

    def group_counts(self, group: str) -> tuple[int, int] | None:
        tests = [t for t in self.tests if t.group == group]
        return count(tests) if self.kind in (REPORT, LOGGED_REPORT) and self.tests else None


def count(tests: Iterable[TestResult]) -> tuple[int, int]:
    """(passed, total): passed and xfailed pass; skipped tests are not in the total."""
    passed = total = 0
    for test in tests:
        if test.outcome != SKIPPED:
            total += 1
            passed += test.outcome in PASSING
    return passed, total


def _warn(file: str, message: str, *, field: str = "", line: int | None = None) -> str:
    where = file + (f":{line}" if line else "")
    return f"{where}: field '{field}': {message}" if field else f"{where}: {message}"


def _a(value: Any) -> str:
    """What a JSON value is, for a message: "a list", "a string", "null" …"""
    if value is None:
        return "null"
    name = {dict: "object", list: "list", str: "string", bool: "boolean"}.get(type(value), "number")
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"


def _cut(text: str, limit: int = DETAIL_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- SWE-bench's report ------------------------------------------------------------------------------


def swebench_report(data: Any, *, file: str, text: str = "", line: int | None = None, kind: str = REPORT) -> Reading:
    """A SWE-bench report (`report.json`, or the dict its harness logs): one test per name listed,
    passed under `success`, failed under `failure`, with its group. Each test's line is found in
    `text` (the file as written), or is `line` (the log line that holds the whole report). What is
    not in the expected shape is a warning naming the field, never an exception."""
    reading = Reading(file=file, kind=kind)
    if not isinstance(data, dict) or not data:
        got = _a(data) if data != {} else "an empty object"
        reading.warnings.append(
            _warn(file, f"expected an object {{instance_id: {{resolved, tests_status}}}}, got {got}", line=line)
        )
        return reading
    instance, report = next(iter(data.items()))
    if len(data) > 1:
        reading.warnings.append(_warn(file, f"reports {len(data)} instances; only {instance!r} is read", line=line))
    if not isinstance(report, dict):
        reading.warnings.append(_warn(file, f"expected an object, got {_a(report)}", field=str(instance), line=line))
        return reading
    if isinstance(report.get("resolved"), bool):
        reading.resolved = report["resolved"]
    status = report.get("tests_status")
    if not isinstance(status, dict):
        got = "nothing" if "tests_status" not in report else _a(status)
        reading.warnings.append(
            _warn(file, f"expected an object of test groups, got {got}", field=f"{instance}.tests_status", line=line)
        )
        return reading
    finder = _JsonStrings(text) if text else None
    for group, lists in status.items():
        where = f"{instance}.tests_status.{group}"
        if group not in GROUPS:
            reading.warnings.append(_warn(file, f"unknown test group, one of {', '.join(GROUPS)}", field=where))
            continue
        if not isinstance(lists, dict):
            reading.warnings.append(
                _warn(file, f"expected {{success: [...], failure: [...]}}, got {_a(lists)}", field=where)
            )
            continue
        if finder:
            finder.seek(group)
        for key, outcome in (("success", PASSED), ("failure", FAILED)):
            names = lists.get(key, [])
            if not isinstance(names, list):
                reading.warnings.append(
                    _warn(file, f"expected a list of test names, got {_a(names)}", field=f"{where}.{key}")
                )
                continue
            if finder:
                finder.seek(key)
            for name in names:
                if not isinstance(name, str):
                    reading.warnings.append(_warn(file, f"not a test name: {name!r}", field=f"{where}.{key}"))
                    continue
                found = finder.find(name) if finder else line
                reading.tests.append(TestResult(name, outcome, found, group))
    return reading


class _JsonStrings:
    """Lines of JSON strings in a document as written, found front to back (a report lists its
    groups and names in the order json.dump wrote them), counting lines only once."""

    def __init__(self, text: str):
        self.text, self.cursor = text, 0
        self.counted_to, self.line = 0, 1  # the line of position `counted_to`

    def _at(self, value: str) -> int:
        for encoded in (json.dumps(value, ensure_ascii=False), json.dumps(value)):
            position = self.text.find(encoded, self.cursor)
            if position >= 0:
                self.cursor = position + len(encoded)
                return position
        return -1

    def seek(self, key: str) -> None:
        self._at(key)

    def find(self, value: str) -> int | None:
        position = self._at(value)
        if position < 0:
            return None
        self.line += self.text.count("\n", self.counted_to, position)
        self.counted_to = position
        return self.line


LOGGED_REPORT_LINE = re.compile(r"\breport: (\{.*\})\s*$")


def logged_report(text: str, *, file: str) -> Reading | None:
    """The report SWE-bench's harness logs in run_instance.log (`report: {...}`), or None."""
    for number, line in enumerate(text.splitlines(), start=1):
        match = LOGGED_REPORT_LINE.search(line)
        if match:
            try:
                data = ast.literal_eval(match[1])
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):  # TypeError: `{[1]: 2}`
                reading = Reading(file=file, kind=LOGGED_REPORT)
                reading.warnings.append(_warn(file, "the logged report is not a Python literal", line=number))
                return reading
            return swebench_report(data, file=file, line=number, kind=LOGGED_REPORT)
    return None


# -- Django's test runner --------------------------------------------------------------------------

# `test_x (mod.Class)`, Python 3.11+ `test_x (mod.Class.test_x)`, a sub-test `… (param=1)` or `… [msg]`.
_TEST_ID = r"(?P<id>[A-Za-z_]\w* \([A-Za-z_][\w.]*\))(?P<sub>(?: \[[^\]]*\])?(?: \([^()]*(?:\([^()]*\)[^()]*)*\))?)"
_STARTED = re.compile(_TEST_ID + r" \.\.\.(?: |$)")
_ALONE = re.compile(_TEST_ID + r"\s*$")  # the id alone: a docstring line follows, then ` ... status`
_HEADER = re.compile(r"^(?P<kind>FAIL|ERROR|UNEXPECTED SUCCESS): " + _TEST_ID + r"\s*$")
_RAN = re.compile(r"^Ran (?P<n>\d+) tests? in ")
_VERDICT = re.compile(r"^(?P<verdict>OK|FAILED)(?: \((?P<counts>[^)]*)\))?$")
_STATUS = re.compile(r"^(?:ok|FAIL|ERROR|skipped(?: (?P<reason>.*))?|expected failure|unexpected success)$")
_STATUS_OUTCOME = {"ok": PASSED, "FAIL": FAILED, "ERROR": ERROR, "expected failure": XFAILED}
_STATUS_OUTCOME["unexpected success"] = XPASSED
START_MARK, END_MARK = ">>>>> Start Test Output", ">>>>> End Test Output"


def _test_section(lines: list[str]) -> range:
    """The indexes of the lines to read: between SWE-bench's `>>>>> Start Test Output` and `>>>>> End
    Test Output` marks when they are there (the rest is the harness's script and its `git diff`)."""
    start = next((i for i, line in enumerate(lines) if START_MARK in line), None)
    if start is None:
        return range(len(lines))
    end = next((i for i in range(start + 1, len(lines)) if END_MARK in lines[i]), len(lines))
    return range(start + 1, end)


@dataclass
class _Test:
    name: str
    line: int
    outcome: str = ""
    result_line: int | None = None
    detail: str = ""
    sub_failed: int = 0
    sub_error: int = 0


def _short(test_id: str) -> str:
    return test_id.split(" (")[0]


def django_output(text: str, *, file: str) -> Reading:
    """Django's runner at `--verbosity 2` (unittest's verbose format). A result is usually on its
    test's own line (`test_x (mod.Class) ... ok`), but a test's own output may come first and its
    result on a later line (`test_x (mod.Class) ... Testing against Django …` / … / `ok`); a test
    whose sub-tests failed writes no result before Python 3.11 (the next test then starts on the
    same line) and is known by its `FAIL:` blocks, one per failing sub-test; from 3.11 each failing
    sub-test has a line of its own. A test with a docstring is written as its id alone on a line,
    then `docstring ... ok`. A test started whose result never comes is `unfinished`."""
    reading = Reading(file=file, kind=DJANGO)
    tests: dict[str, _Test] = {}
    current: _Test | None = None  # the last test started whose result is not written yet
    described: tuple[str, int] | None = None  # a test id alone on its line: its docstring follows
    ran: int | None = None
    verdict, stated = "", {}
    shared: list[tuple[str, str, int]] = []  # (test, the test whose line it started on, line)
    lines = text.splitlines()
    for index in _test_section(lines):
        line, number = lines[index], index + 1
        position = len(line) - len(line.lstrip(" "))
        started = sub_test = False
        while match := _STARTED.match(line, position):
            if started and current is not None and not current.outcome:
                shared.append((match["id"], current.name, number))
            started, position = True, match.end()
            name = match["id"]
            if match["sub"].strip():  # a sub-test's own result (Python 3.11+): it belongs to its test
                test = tests.setdefault(name, _Test(name, number))
                status = line[position:].strip()
                test.sub_failed += status == "FAIL"
                test.sub_error += status == "ERROR"
                sub_test = True
                break
            current = tests[name] = _Test(name, number)
        if started:
            described = None
            if not sub_test and current is not None:
                _set_status(current, line[position:].strip(), number)
            continue
        stripped = line.strip()
        if described is not None and " ... " in line:  # `Docstring first line ... ok`
            name, first = described
            docstring, _, status = line.partition(" ... ")
            current = tests[name] = _Test(name, first, detail=_cut(docstring.strip()))
            _set_status(current, status.strip(), number)
            described = None
            continue
        described = None
        if (alone := _ALONE.match(line)) and not alone["sub"].strip():
            described = (alone["id"], number)
            continue
        if current is not None and not current.outcome and _STATUS.match(stripped):
            _set_status(current, stripped, number)  # the result, after the test's own output
            continue
        if header := _HEADER.match(line):
            name = header["id"]
            test = tests.get(name)
            if test is None:  # a class or module failing before its tests ran (setUpClass …)
                test = tests[name] = _Test(name, number)
            if header["sub"].strip():
                test.sub_failed += header["kind"] == "FAIL"
                test.sub_error += header["kind"] == "ERROR"
            if test.outcome not in (FAILED, ERROR):
                test.outcome = {"FAIL": FAILED, "ERROR": ERROR}.get(header["kind"], XPASSED)
                test.result_line = number
            continue
        if ran_match := _RAN.match(stripped):
            ran = int(ran_match["n"])
        elif ran is not None and not verdict and (verdict_match := _VERDICT.match(stripped)):
            verdict, stated = stripped, _runner_counts(verdict_match["counts"] or "")
    for test in tests.values():
        if test.sub_failed or test.sub_error:
            if test.outcome in ("", PASSED):
                test.outcome = FAILED if test.sub_failed else ERROR
            said = [f"{n} sub-test{'s' if n != 1 else ''} {word}"
                    for n, word in ((test.sub_failed, "failed"), (test.sub_error, "errored")) if n]  # fmt: skip
            test.detail = _cut("; ".join([test.detail, *said] if test.detail else said))
    reading.tests = [
        TestResult(t.name, t.outcome or UNFINISHED, t.result_line or t.line, detail=t.detail) for t in tests.values()
    ]
    reading.warnings += _django_checks(reading, ran=ran, verdict=verdict)
    for name, first, number in shared:
        # SWE-bench's grader reads a line as the result of the test it starts with: it counts `name` failed.
        reading.warnings.append(
            _warn(
                file,
                f"{_short(name)} was written on {_short(first)}'s line (its sub-tests failed and wrote no "
                f"result): read here by its own result; SWE-bench's grader, which reads the line as "
                f"{_short(first)}'s, counts it as failed",
                line=number,
            )  # fmt: skip
        )
    if ran is not None and verdict and not reading.tests:
        # No per-test lines (a run below --verbosity 2): the runner's own counts. Its failures count
        # failing sub-tests one by one, so they may be more than the tests that failed.
        bad = sum(stated.get(key, 0) for key in ("failures", "errors", "unexpected successes"))
        total = max(ran - stated.get("skipped", 0), 0)
        reading.stated = (max(total - bad, 0), total)
        reading.warnings.append(
            _warn(
                file,
                f"no per-test lines (the tests were not run with --verbosity 2): counts from the runner's "
                f"'Ran {ran} tests' and '{verdict}', where each failing sub-test is a failure",
            )
        )
    return reading


def _django_checks(reading: Reading, *, ran: int | None, verdict: str) -> list[str]:
    """What a Django output says that its per-test lines do not bear out."""
    file, tests, said = reading.file, reading.tests, []
    unfinished = [t for t in tests if t.outcome == UNFINISHED]
    if unfinished:
        n, first = len(unfinished), unfinished[0]
        said.append(
            _warn(
                file,
                f"{n} test{'s' if n != 1 else ''} started but no result was written (the first: "
                f"{first.name}); counted as not passed",
                line=first.line,
            )
        )
    if not tests:
        return said
    listed = sum(1 for t in tests if t.name.split(" ", 1)[0] not in FIXTURES)
    if ran is None:
        said.append(_warn(file, f"no 'Ran N tests' line: the output ends early ({len(tests)} results read)"))
    elif ran != listed:
        said.append(_warn(file, f"the runner says it ran {ran} tests, but {listed} are listed"))
    bad = any(t.outcome in (FAILED, ERROR, XPASSED) for t in tests)
    if (verdict.startswith("OK") and bad) or (verdict.startswith("FAILED") and not bad):
        said.append(_warn(file, f"the runner says '{verdict}', which its per-test lines do not bear out"))
    return said


FIXTURES = ("setUpClass", "tearDownClass", "setUpModule", "tearDownModule")


def _set_status(test: _Test, status: str, number: int) -> None:
    match = _STATUS.match(status)
    if not match:
        return  # the test's own output: its result comes on a later line
    if status.startswith("skipped"):
        test.outcome, test.detail = SKIPPED, _cut((match["reason"] or "").strip().strip("'\""))
    else:
        test.outcome = _STATUS_OUTCOME[status]
    test.result_line = number


def _runner_counts(text: str) -> dict[str, int]:
    """`failures=5, errors=1, skipped=2, expected failures=1` as a dict."""
    counts = {}
    for part in text.split(","):
        key, _, value = part.strip().partition("=")
        if value.strip().isdigit():
            counts[key.strip()] = int(value)
    return counts


# -- pytest ---------------------------------------------------------------------------------------

PYTEST_LINE = re.compile(
    r"^(?:(?P<pre>PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (?P<name1>\S+::\S+.*?)(?: - .*)?"
    r"|(?P<name2>\S+::\S+?) (?P<post>PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?: +\[ *\d+%\])?)\s*$"
)
_PYTEST_OUTCOME = {
    "PASSED": PASSED, "FAILED": FAILED, "ERROR": ERROR, "SKIPPED": SKIPPED, "XFAIL": XFAILED, "XPASS": XPASSED,
}  # fmt: skip


def pytest_output(text: str, *, file: str = "") -> Reading:
    """pytest's `-v` lines (`path::test PASSED [ 33%]`) and `-rA` summary lines (`FAILED path::test -
    reason`), with their line numbers; a test's last outcome wins (reruns, and the summary after
    the progress lines)."""
    results: dict[str, TestResult] = {}
    lines = text.splitlines()
    for index in _test_section(lines):
        match = PYTEST_LINE.match(lines[index].strip())
        if match:
            name = (match["name1"] or match["name2"]).strip()
            results[name] = TestResult(name, _PYTEST_OUTCOME[match["pre"] or match["post"]], index + 1)
    return Reading(file=file, kind=PYTEST, tests=list(results.values()))


def output_reading(text: str, *, file: str) -> Reading | None:
    """A test output file as Django's runner or pytest wrote it (whichever lists more), or None."""
    django = django_output(text, file=file)
    pytest = pytest_output(text, file=file)
    best = django if len(django.tests) >= len(pytest.tests) else pytest
    return best if best.tests or best.stated else None


# -- evaluation summaries ----------------------------------------------------------------------


def summary_tests(summary: Any, *, text: str = "") -> list[TestResult]:
    """Per-test results an evaluation summary lists (LoopsBench's `final_test_results`); the
    harness's own bookkeeping entries (`__…__`) are left out."""
    results = summary.get("final_test_results") if isinstance(summary, dict) else None
    if not isinstance(results, dict):
        return []
    finder = _JsonStrings(text) if text else None
    if finder:
        finder.seek("final_test_results")
    tests = []
    for name, value in results.items():
        line = finder.find(str(name)) if finder else None
        if str(name).startswith("__") and str(name).endswith("__"):
            continue
        word = str(value).strip().lower()
        outcome = _OUTCOME_WORDS.get(word, OTHER)
        tests.append(TestResult(str(name), outcome, line, detail="" if outcome != OTHER else _cut(str(value))))
    return tests


def summary_counts(summary: Any) -> dict[str, int]:
    """passed/failed/errors/total as an evaluation summary states them (NL2RepoBench `counts`,
    or counted from LoopsBench's per-test results)."""
    if not isinstance(summary, dict):
        return {}
    counts = summary.get("counts")
    if isinstance(counts, dict):
        return {
            key: value
            for key in ("passed", "failed", "errors", "total")
            if isinstance(value := counts.get(key), int) and not isinstance(value, bool)
        }
    tests = summary_tests(summary)
    if not tests:
        return {}
    passed, total = count(tests)
    return {"passed": passed, "failed": total - passed, "total": total}


def summary_reading(text: str, *, file: str) -> Reading | None:
    try:
        summary = json.loads(text)
    except ValueError:
        return None  # the summary itself is read (and refused) with the cell's outcomes
    reading = Reading(file=file, kind=SUMMARY, tests=summary_tests(summary, text=text))
    counts = summary_counts(summary)
    if not reading.tests and "passed" in counts and "total" in counts and 0 <= counts["passed"] <= counts["total"]:
        reading.stated = (counts["passed"], counts["total"])
    return reading if reading.tests or reading.stated else None


# -- a cell ------------------------------------------------------------------------------------


@dataclass
class CellTests:
    """Every reading of a cell's evaluation, in precedence order, and what the run takes from them."""

    readings: list[Reading] = field(default_factory=list)
    quality: tuple[int, int] | None = None  # cell.json's own figure: it wins over any reading
    warnings: list[str] = field(default_factory=list)

    @property
    def counted(self) -> Reading | None:
        """The reading the run's counts come from (unless cell.json states them)."""
        return next((r for r in self.readings if r.counts is not None), None)

    @property
    def listed(self) -> Reading | None:
        """The reading whose tests are the run's test list."""
        return next((r for r in self.readings if r.tests), None)

    @property
    def report(self) -> Reading | None:
        return next((r for r in self.readings if r.kind in (REPORT, LOGGED_REPORT) and r.tests), None)

    @property
    def counts(self) -> tuple[int, int] | None:
        if self.quality is not None:
            return self.quality
        return self.counted.counts if self.counted else None

    @property
    def source(self) -> str:
        """The file the run's counts come from ('cell.json' for its quality), '' for none."""
        if self.quality is not None:
            return "cell.json"
        return self.counted.file if self.counted else ""

    def outcomes(self) -> dict[str, int]:
        """tests_passed/tests_total for the run's header: {} when nothing gives them."""
        counts = self.counts
        return {} if counts is None else {"tests_passed": counts[0], "tests_total": counts[1]}


def cell_tests(
    cell_dir: Path,
    files: Iterable[Path],
    *,
    quality: tuple[int, int] | None = None,
    task_pass: bool | None = None,
    limit: int = READ_LIMIT,
) -> CellTests:
    """Read a cell's evaluation files (of `files`, those under `cell/evaluation/`) for their tests.
    `quality` is cell.json's own (passed, total), which the run keeps; `task_pass` its verdict,
    checked against a report's `resolved`. Readings that disagree are warnings for the run."""
    found = CellTests(quality=quality)
    paths = sorted((path.relative_to(cell_dir).as_posix(), path) for path in files)
    for relative, path in paths:
        if not relative.startswith("cell/evaluation/"):
            continue
        text, truncated = read_text(path, limit=limit)
        reading: Reading | None
        name = relative.rsplit("/", 1)[-1]
        if name == "summary.json" and relative == "cell/evaluation/summary.json":
            reading = summary_reading(text, file=relative)
        elif name.endswith(".json"):
            if name != "report.json":
                continue
            try:
                data = json.loads(text)
            except ValueError as exc:
                found.warnings.append(_warn(relative, f"not valid JSON ({exc}); its tests are not read"))
                continue
            reading = swebench_report(data, file=relative, text=text)
        else:
            reading = logged_report(text, file=relative) or output_reading(text, file=relative)
        if reading is None:
            continue
        if truncated:
            reading.warnings.append(_warn(relative, f"longer than {limit:,} bytes: only the first are read for tests"))
        found.readings.append(reading)
        found.warnings += reading.warnings
    found.readings.sort(key=lambda r: PRECEDENCE.index(r.kind))  # stable: path order within a kind
    found.warnings += _disagreements(found, task_pass=task_pass)
    return found


def _disagreements(found: CellTests, *, task_pass: bool | None) -> list[str]:
    said = []
    report = found.report
    if report is not None and report.resolved is not None and task_pass is not None and report.resolved != task_pass:
        said.append(
            f"{report.file}: the report says resolved: {str(report.resolved).lower()}, but the cell's "
            f"solution_passed is {str(task_pass).lower()}"
        )
    outputs = [r for r in found.readings if r.kind in (DJANGO, PYTEST) and r.tests]
    if report is not None and outputs:
        output = outputs[0]
        by_name = {t.name: t for t in output.tests}
        for test in report.tests:
            seen = by_name.get(test.name)
            if seen is not None and (seen.outcome in PASSING) != (test.outcome in PASSING):
                said.append(
                    f"{report.file}: the report counts {test.name} as {test.outcome}, but "
                    f"{output.file}:{seen.line} shows it {seen.outcome}"
                )
    counted = found.counted
    if found.quality is not None and counted is not None and counted.counts != found.quality:
        passed, total = counted.counts
        said.append(
            f"cell.json states {found.quality[0]}/{found.quality[1]} tests passed (kept), but {counted.file} "
            f"reads {passed}/{total}"
        )
    return said
