"""The study's own files: one complete task folder of its public artifact (SWE-bench Verified
django__django-10999, 3 agents × parallel/serial; PROVENANCE.md beside it), imported whole from where
it is kept, never copied into the repository. What Parallax stores of each run's tests is compared with
what a small reader written here finds in the same files (regular expressions over the text,
`json.load`, `ast.literal_eval`), never with Parallax's own parsers."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from tests.conftest import ARTIFACT
from trajectories.models import Run, RunFile, TestOutcome
from trajectories.selectors import resolve_anchor
from trajectories.services import import_paths

TASK = ARTIFACT / "swebench_verified" / "django__django-10999"
CELLS = [(agent, side) for agent in ("claude", "codex", "kimi") for side in ("parallel", "serial")]
MODES = {"parallel": "concurrent", "serial": "sequential"}
AGENTS = {"claude": "Claude Code", "codex": "Codex", "kimi": "Kimi Code"}

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        not TASK.is_dir(),
        reason=f"the study's task folder is not on this machine ({TASK}); it is kept outside the repository",
    ),
]


# -- an independent reading of the native files -----------------------------------------------------


def official(cell: Path) -> Path:
    """The folder SWE-bench's harness wrote for the instance (…/run_evaluation/<run>/<model>/<instance>)."""
    (folder,) = (cell / "cell/evaluation/official-run/logs/run_evaluation").glob("*/*/django__django-10999")
    return folder


def read_output(path: Path) -> dict:
    """Django's runner output between the harness's marks: every test named before ` ... `; failed if a
    FAIL:/ERROR: block names it, else passed at the line where its `ok` is written (on its own line, or
    the first line that is only `ok` after it)."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if ">>>>> Start Test Output" in line)
    end = next(i for i, line in enumerate(lines) if ">>>>> End Test Output" in line)
    text = "\n".join(lines[start:end])
    names = list(dict.fromkeys(re.findall(r"(test_\w+ \([\w.]+\)) \.\.\. ", text)))
    ran = int(re.search(r"^Ran (\d+) tests", text, re.M)[1])
    verdict = re.search(r"^(OK|FAILED.*)$", text, re.M)[1]
    blocks = re.findall(r"^(?:FAIL|ERROR): (test_\w+ \([\w.]+\))", text, re.M)
    tests = {}
    for name in names:
        if name in blocks:
            line = start + 1 + next(i for i, s in enumerate(lines[start:end]) if s.startswith(f"FAIL: {name}"))
            tests[name] = ("failed", line, f"{blocks.count(name)} sub-tests failed")
            continue
        begun = next(i for i in range(start, end) if f"{name} ... " in lines[i])
        if lines[begun].endswith(f"{name} ... ok"):
            tests[name] = ("passed", begun + 1, "")
        else:
            tests[name] = ("passed", 1 + next(i for i in range(begun + 1, end) if lines[i] == "ok"), "")
    return {"tests": tests, "ran": ran, "verdict": verdict, "failures": len(blocks)}


def read_report(path: Path) -> dict:
    """report.json: each name under its group's success/failure list, at the line that holds it."""
    data = json.loads(path.read_text())
    (report,) = data.values()
    lines = path.read_text().splitlines()
    tests = {}
    for group, lists in report["tests_status"].items():
        for key, outcome in (("success", "passed"), ("failure", "failed")):
            for name in lists[key]:
                line = 1 + next(i for i, text in enumerate(lines) if text.strip().rstrip(",") == json.dumps(name))
                tests[name] = (outcome, line, group)
    return {"tests": tests, "resolved": report["resolved"]}


def read_logged_report(path: Path) -> dict | None:
    """The report SWE-bench's harness writes into run_instance.log, one line `… - INFO - report: {…}`."""
    if not path.exists():
        return None
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if " - INFO - report: " in line:
            (report,) = ast.literal_eval(line.split(" - INFO - report: ", 1)[1]).values()
            tests = {}
            for group, lists in report["tests_status"].items():
                for key, outcome in (("success", "passed"), ("failure", "failed")):
                    tests.update(dict.fromkeys(lists[key], (outcome, number, group)))
            return {"tests": tests, "resolved": report["resolved"]}
    return None


def group_count(tests: dict, group: str) -> tuple[int, int]:
    mine = [outcome for outcome, _, g in tests.values() if g == group]
    return sum(o == "passed" for o in mine), len(mine)


def expected(agent: str, side: str) -> dict:
    """What the run should hold: the report.json if there is one, else the report its log holds, else
    the runner's output; each with the file it was read from."""
    cell = TASK / agent / side
    folder = official(cell)
    relative = folder.relative_to(cell).as_posix()
    output = read_output(folder / "test_output.txt")
    report_file = folder / "report.json"
    if report_file.exists():
        report, source = read_report(report_file), f"{relative}/report.json"
    else:
        report, source = read_logged_report(folder / "run_instance.log"), f"{relative}/run_instance.log"
    if report is None:
        tests = {name: (o, line, "", detail) for name, (o, line, detail) in output["tests"].items()}
        source = f"{relative}/test_output.txt"
        passed = sum(o == "passed" for o, *_ in tests.values())
        return {"tests": tests, "counts": (passed, len(tests)), "source": source, "f2p": None, "p2p": None,
                "output": output, "folder": relative}  # fmt: skip
    f2p, p2p = group_count(report["tests"], "FAIL_TO_PASS"), group_count(report["tests"], "PASS_TO_PASS")
    tests = {name: (o, line, group, "") for name, (o, line, group) in report["tests"].items()}
    return {"tests": tests, "counts": (f2p[0] + p2p[0], f2p[1] + p2p[1]), "source": source, "f2p": f2p,
            "p2p": p2p, "output": output, "resolved": report["resolved"], "folder": relative}  # fmt: skip


@pytest.fixture
def runs() -> dict[tuple[str, str], Run]:
    report = import_paths(paths=[ARTIFACT])
    assert [r.status for r in report.results] == ["imported"] * 6, report.results
    stored = {}
    for agent, side in CELLS:
        stored[agent, side] = Run.objects.get(agent__name=AGENTS[agent], mode=MODES[side])
    return stored


def test_each_runs_tests_are_what_its_files_say(runs):
    for (agent, side), run in runs.items():
        want = expected(agent, side)
        where = f"{agent}/{side}"
        assert (run.tests_passed, run.tests_total) == want["counts"], where
        assert run.tests_source == want["source"], where
        f2p = None if run.f2p_total is None else (run.f2p_passed, run.f2p_total)
        p2p = None if run.p2p_total is None else (run.p2p_passed, run.p2p_total)
        assert (f2p, p2p) == (want["f2p"], want["p2p"]), where
        listed = TestOutcome.objects.filter(run=run, primary=True)
        assert {t.name: (t.outcome, t.line, t.group, t.detail) for t in listed} == want["tests"], where
        assert set(listed.values_list("source", flat=True)) == {want["source"]}, where
        if "resolved" in want:
            assert run.task_pass is want["resolved"], where
        # The runner's own output is kept too, read the same way, for its file's page.
        output = TestOutcome.objects.filter(run=run, source=f"{want['folder']}/test_output.txt")
        assert {t.name: (t.outcome, t.line, t.detail) for t in output} == want["output"]["tests"], where
        assert len(want["output"]["tests"]) == want["output"]["ran"] == 12, where


def test_the_figures_the_artifact_shows(runs):
    """The same figures, stated: what a reader of the folder sees."""
    serial = expected("claude", "serial")
    assert serial["source"].endswith("/report.json") and (serial["f2p"], serial["p2p"]) == ((2, 2), (10, 10))
    assert runs["claude", "serial"].tests_passed == 12
    for agent, side in (("codex", "parallel"), ("codex", "serial"), ("kimi", "parallel"), ("kimi", "serial")):
        output = expected(agent, side)["output"]
        # The runner says 5 failures: five failing sub-tests of one test. 11 of its 12 tests passed.
        assert output["verdict"] == "FAILED (failures=5)" and output["failures"] == 5
        run = runs[agent, side]
        assert (run.tests_passed, run.tests_total, run.f2p_total) == (11, 12, None)
        failed = TestOutcome.objects.get(run=run, primary=True, outcome="failed")
        assert failed.name == "test_negative (utils_tests.test_dateparse.DurationParseTests)"
        assert failed.detail == "5 sub-tests failed"
        # test_parse_postgresql_format's "ok" is on test_negative's line: SWE-bench's grader would count it
        # failed (as it did for claude/parallel below), so the run says so beside its 11 of 12
        text = (official(TASK / agent / side) / "test_output.txt").read_text()
        shared = [
            number for number, line in enumerate(text.splitlines(), start=1)
            if line.startswith("test_negative ") and "test_parse_postgresql_format" in line
        ]  # fmt: skip
        assert len(shared) == 1
        assert any(
            f"test_output.txt:{shared[0]}: test_parse_postgresql_format was written on test_negative's line" in w
            and "counts it as failed" in w
            for w in run.warnings
        ), run.warnings
    # claude/parallel has no report.json, but its run_instance.log holds the report SWE-bench graded it by:
    # FAIL_TO_PASS 0/2, though the runner's output shows test_parse_postgresql_format ok (on test_negative's
    # line, which has no result of its own): a warning on the run says so.
    parallel, want = runs["claude", "parallel"], expected("claude", "parallel")
    assert (parallel.f2p_passed, parallel.f2p_total, parallel.p2p_passed, parallel.p2p_total) == (0, 2, 10, 10)
    name = "test_parse_postgresql_format (utils_tests.test_dateparse.DurationParseTests)"
    outcome, line, _ = want["output"]["tests"][name]
    assert outcome == "passed" and want["tests"][name][0] == "failed"
    folder = want["folder"]
    assert (
        f"{folder}/run_instance.log: the report counts {name} as failed, but {folder}/test_output.txt:{line} "
        "shows it passed"
    ) in parallel.warnings


def test_the_report_is_a_file_of_the_run_and_anchors_into_it_open(runs, browser_client):
    serial = runs["claude", "serial"]
    folder = expected("claude", "serial")["folder"]
    report = RunFile.objects.get(run=serial, path=f"{folder}/report.json")
    assert report.kind == "evaluation" and report.content == (TASK / "claude/serial" / report.path).read_text()
    resolved = resolve_anchor(run=runs["claude", "parallel"], text=f"serial/{report.path}:8", default_mode="concurrent")
    assert resolved.run == serial and resolved.file == report
    page = browser_client.get(resolved.url).content.decode()
    assert '<tr id="L8" class="target">' in page and "FAIL_TO_PASS" in page.split('id="L8"')[1].split("</tr>")[0]
    # the file's page lists the tests read from it, each linked to its line
    line = expected("claude", "serial")["tests"]["test_negative (utils_tests.test_dateparse.DurationParseTests)"][1]
    assert f'href="?line={line}#L{line}">line {line}</a>' in page and "12/12 tests passed" in page
