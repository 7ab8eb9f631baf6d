"""A study cell's artifacts (final answer, patch, evaluation, test output, harness status) are stored
with its run and shown beside the trajectory; evidence anchors resolve to a file and line of the pair.

The cells are the study's own files for `nl2repo/parse/codex` (tests/fixtures/artifact-excerpts/cells,
PROVENANCE.md there): their rollouts are too large to transcribe, so each test gives the cells a log,
the real `codex exec --json` excerpt, as `cell/trajectory.jsonl`."""

from __future__ import annotations

import shutil

import pytest
from django.test import override_settings

from tests.factories import CELLS, EXEC, PATCH, TEST_OUTPUT, client_for, parse_pair
from trajectories.artifacts import AnchorError, diff_files, parse_anchor
from trajectories.evaluation import pytest_output
from trajectories.models import Run, RunFile
from trajectories.selectors import resolve_anchor
from trajectories.services import import_paths

pytestmark = pytest.mark.django_db


def test_a_cells_artifacts_are_stored_with_its_run(tmp_path):
    concurrent, sequential = parse_pair(tmp_path)
    files = dict(RunFile.objects.filter(run=concurrent).values_list("path", "kind"))
    assert files == {
        "cell.json": "cell",
        "cell/evaluation/summary.json": "evaluation",
        "cell/final.txt": "final",
        "cell/trajectory.jsonl": "log",
    }
    final = RunFile.objects.get(run=sequential, path="cell/final.txt")
    assert final.content == (CELLS / "nl2repo/parse/codex/serial/cell/final.txt").read_text()
    assert final.size == 1147 and final.n_lines == 3 and "couldn’t" in final.content  # bytes, not characters
    status = RunFile.objects.get(run=sequential, path="cell/status.json")
    assert status.kind == "status" and status.n_lines == 354
    log = RunFile.objects.get(run=concurrent, kind="log")
    # a log is kept as the events read from it and as its text, so that any line of it opens
    assert log.n_lines == 9 and log.content == EXEC.read_text()
    # The outcomes come from the study's own records: NL2RepoBench counts, and cell.json's quality.
    assert (concurrent.tests_passed, concurrent.tests_total, concurrent.task_pass) == (96, 96, True)
    assert (sequential.tests_passed, sequential.tests_total) == (96, 96)
    assert set(concurrent.contexts.values_list("source_file", flat=True)) == {"cell/trajectory.jsonl"}


def test_the_studys_own_anchor_resolves_to_its_line(tmp_path, browser_client):
    concurrent, sequential = parse_pair(tmp_path)
    # nl2repo/parse/codex/annotation.md cites `serial/cell/status.json:317`, the evaluation record.
    resolved = resolve_anchor(run=concurrent, text="`serial/cell/status.json:317`", default_mode="concurrent")
    assert resolved.run == sequential and resolved.file.path == "cell/status.json"
    response = browser_client.get(f"/trajectories/runs/{concurrent.pk}/anchor/", {"a": "serial/cell/status.json:317"})
    assert response.status_code == 302 and response.url == resolved.url
    page = browser_client.get(response.url).content.decode()
    assert '<tr id="L317" class="target">' in page
    assert page.split('id="L317"')[1].split("</tr>")[0].count("&quot;evaluation&quot;: {") == 1


@pytest.mark.parametrize(
    ("anchor", "message"),
    [
        # the record's parallel anchor: that status.json is not among the transcribed files
        ("parallel/cell/status.json:331", "no file 'cell/status.json' in the concurrent run"),
        ("serial/cell/status.json:355", "cell/status.json has 354 lines"),
        ("serial/cell/final.txt:0", "lines are numbered from 1"),
        ("serial/cell/final.txt:3-2", "a range goes forward"),
        ("status.json", "is not an anchor"),
    ],
)
def test_an_anchor_that_cites_nothing_says_why(tmp_path, anchor, message):
    concurrent, _ = parse_pair(tmp_path)
    with pytest.raises(AnchorError, match=message):
        resolve_anchor(run=concurrent, text=anchor, default_mode="concurrent")


def test_a_log_anchor_opens_the_events_read_from_that_line(tmp_path, browser_client):
    concurrent, _ = parse_pair(tmp_path)
    resolved = resolve_anchor(run=concurrent, text="parallel/cell/trajectory.jsonl:7", default_mode="concurrent")
    page = browser_client.get(resolved.url).content.decode()
    assert "rg: command not found" in page and "line 7" in page
    empty = browser_client.get(resolved.url.replace("line=7&end=7", "line=2&end=2")).content.decode()
    assert "No event was read from this line" in empty  # turn.started: no event, but the line itself
    cited = empty.split('<tr id="L2" class="target">')[1].split("</tr>")[0]
    assert "{&quot;type&quot;:&quot;turn.started&quot;}" in cited


def test_a_patch_is_shown_as_a_diff_and_test_output_as_results(tmp_path, browser_client):
    concurrent, sequential = parse_pair(tmp_path, patch=True)
    patch = RunFile.objects.get(run=sequential, path="cell/model.patch")
    assert patch.kind == "patch"
    page = browser_client.get(f"/trajectories/runs/{sequential.pk}/files/{patch.pk}/", {"line": 11}).content.decode()
    assert "<code>parse.py</code>" in page and "<code>README.rst</code>" in page
    assert '<tr id="L11" class="meta target">' in page  # +++ b/README.rst
    output = RunFile.objects.get(run=sequential, path="cell/evaluation/test_output.txt")
    page = browser_client.get(f"/trajectories/runs/{sequential.pk}/files/{output.pk}/").content.decode()
    assert "2/3 tests passed" in page and "1 failed" in page
    assert page.index("test_named") < page.index("test_no_match")  # failures first
    # The pair page (and the coding view) shows each side's artifacts.
    pair = browser_client.get(f"/trajectories/runs/{concurrent.pk}/").content.decode()
    assert "Final answer" in pair and "96/96 passed" in pair and 'Counts from <a href="' in pair
    assert 'title="cell.json">cell.json</a>' in pair  # the study's own figure
    assert "2 files" in pair and "+4" in pair and "−1" in pair


def test_loopsbench_per_test_results_are_read(tmp_path, browser_client):
    cell = tmp_path / "loopsbench" / "task_cpachecker" / "codex" / "parallel"
    shutil.copytree(CELLS / "loopsbench" / "task_cpachecker" / "codex" / "parallel", cell)
    (cell / "cell.json").write_text('{"mode": "parallel", "agent": "codex"}')
    shutil.copy(EXEC, cell / "cell" / "trajectory.jsonl")
    report = import_paths(paths=[tmp_path / "loopsbench"])
    run = Run.objects.get(pk=report.results[0].run_id)
    assert (run.tests_passed, run.tests_total, run.task_pass) == (15, 15, True)  # bookkeeping entry left out
    page = browser_client.get(f"/trajectories/runs/{run.pk}/").content.decode()
    assert "15/15 passed" in page and "cpachecker_v3/test_outputs.py::test_experiment_count" in page
    assert "__loopsbench_pytest_session_tail__" not in page


def test_an_over_long_artifact_is_kept_cut_with_a_warning(tmp_path):
    with override_settings(PARALLAX_ARTIFACT_MAX_BYTES=1000):
        _, sequential = parse_pair(tmp_path)
    status = RunFile.objects.get(run=sequential, path="cell/status.json")
    assert status.truncated and len(status.content) == 1000 and status.size == 13842 and status.n_lines is None
    assert any("cell/status.json: 13,842 bytes; the first 1,000 are kept" in w for w in sequential.warnings)


def test_hostile_artifact_bytes_are_stored(tmp_path):
    cell = tmp_path / "b" / "t" / "codex" / "parallel"
    (cell / "cell").mkdir(parents=True)
    (cell / "cell.json").write_text('{"mode": "parallel"}')
    shutil.copy(EXEC, cell / "cell" / "trajectory.jsonl")
    (cell / "cell" / "final.txt").write_bytes(b"nul \x00 and bad utf-8 \xff\xfe done")
    report = import_paths(paths=[tmp_path / "b"])
    assert [r.status for r in report.results] == ["imported"], report.results
    final = RunFile.objects.get(path="cell/final.txt")
    assert final.content == "nul \ufffd and bad utf-8 \ufffd\ufffd done"


def test_a_file_path_longer_than_stored_fails_the_run_by_name(tmp_path):
    cell = tmp_path / "b" / "t" / "codex" / "parallel"
    deep = cell / "cell" / "evaluation" / "/".join(["d" * 200] * 5)
    deep.mkdir(parents=True)
    (cell / "cell.json").write_text('{"mode": "parallel"}')
    shutil.copy(EXEC, cell / "cell" / "trajectory.jsonl")
    (deep / "test_output.txt").write_text("x")
    report = import_paths(paths=[tmp_path / "b"])
    assert [r.status for r in report.results] == ["failed"]
    assert "/test_output.txt: path is 1036 characters long; at most 1000 are stored" in report.results[0].message
    assert not Run.objects.exists() and not RunFile.objects.exists()


def test_files_and_anchors_are_only_for_those_who_see_the_run(tmp_path, outsider, annotator):
    concurrent, _ = parse_pair(tmp_path)
    final = RunFile.objects.get(run=concurrent, path="cell/final.txt")
    for user in (outsider, annotator):  # neither is given this run to code
        client = client_for(user)
        assert client.get(f"/trajectories/runs/{concurrent.pk}/files/{final.pk}/").status_code == 404
        assert (
            client.get(f"/trajectories/runs/{concurrent.pk}/anchor/", {"a": "parallel/cell/final.txt:1"}).status_code
            == 404
        )


def test_unresolvable_anchor_page_says_why(tmp_path, browser_client):
    concurrent, _ = parse_pair(tmp_path)
    response = browser_client.get(f"/trajectories/runs/{concurrent.pk}/anchor/", {"a": "serial/cell/model.patch:12"})
    assert response.status_code == 404
    assert "no file &#x27;cell/model.patch&#x27; in the sequential run" in response.content.decode()


def test_anchor_grammar():
    anchor = parse_anchor(" `parallel/agent/codex/x.jsonl:268-270` ", default_mode="sequential")
    assert (anchor.mode, anchor.path, anchor.start, anchor.end) == ("concurrent", "agent/codex/x.jsonl", 268, 270)
    bare = parse_anchor("c.jsonl:6", default_mode="sequential")
    assert (bare.mode, bare.path, bare.start) == ("sequential", "c.jsonl", 6)
    with pytest.raises(AnchorError):
        parse_anchor("parallel/x.jsonl", default_mode="concurrent")


def test_diff_and_pytest_output_parsing():
    files = diff_files(PATCH)
    assert [(f.header, f.added, f.removed) for f in files] == [("parse.py", 3, 0), ("README.rst", 1, 1)]
    # A removed line that starts with "--" stays in its file.
    assert len(diff_files("--- a/x.sql\n+++ b/x.sql\n@@ -1 +1 @@\n--- old comment\n+-- new\n")) == 1
    results = {t.name: (t.outcome, t.line) for t in pytest_output(TEST_OUTPUT).tests}
    assert results == {
        "tests/test_parse.py::test_no_match": ("passed", 2),
        "tests/test_parse.py::test_named": ("failed", 6),
        "tests/test_parse.py::test_spans": ("passed", 4),
    }


def test_a_run_stored_before_files_were_kept_gets_them_when_imported_again(tmp_path, study, trio, codebook):
    from annotation.models import Assignment
    from annotation.selectors.queue import annotation_for
    from annotation.services.coding import LabelInput, anchor_problems, annotation_save, annotation_submit

    run = study.runs.order_by("pk").first()
    RunFile.objects.filter(run=run).delete()  # as an older Parallax stored it
    assignment = Assignment.objects.filter(study=study, run=run).first()
    anchor = f"parallel/{run.source_name}:3"
    label = LabelInput(code_id=codebook.codes.get(key="lossy-handoff").pk, rationale="r", evidence=[anchor])
    annotation = annotation_for(assignment=assignment)
    annotation_save(annotation=annotation, actor=assignment.annotator, version=1, no_failure=False, notes="",
                    labels=[label])  # fmt: skip
    said = anchor_problems(run=run, labels=[label])
    assert "cannot be checked" in next(iter(said.values()))[0]  # said at once…
    annotation_submit(annotation=annotation, actor=assignment.annotator, version=annotation.version)  # …not refused
    report = import_paths(paths=[tmp_path / "study"])
    mine = next(r for r in report.results if r.run_id == run.pk)
    assert mine.status == "duplicate" and mine.message.endswith("its files, not stored before, are now")
    assert RunFile.objects.filter(run=run, kind="log").exists() and not anchor_problems(run=run, labels=[label])
