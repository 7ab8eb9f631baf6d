from __future__ import annotations

import csv
import io
import json
from datetime import datetime

import pytest
from django.core.management import CommandError, call_command

from tests.factories import FIXTURES, simple_run, write_jsonl
from trajectories.generate import task_list
from trajectories.metrics import METRIC_FIELDS
from trajectories.models import Run

pytestmark = pytest.mark.django_db


def test_import_command_reports_and_fails_on_bad_runs(tmp_path):
    write_jsonl(tmp_path / "good.jsonl", simple_run("good"))
    write_jsonl(tmp_path / "bad.jsonl", ["{not json"])
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError):
        call_command("import_trajectories", str(tmp_path), stdout=out, stderr=err)
    assert "imported" in out.getvalue() and "bad.jsonl:1" in err.getvalue()
    assert Run.objects.count() == 1


def test_import_command_missing_path():
    with pytest.raises(CommandError, match="no such file"):
        call_command("import_trajectories", "/nonexistent/x.jsonl")


def test_export_metrics_csv_and_json(tmp_path):
    call_command("import_trajectories", str(write_jsonl(tmp_path / "r.jsonl", simple_run())), stdout=io.StringIO())
    out = io.StringIO()
    call_command("export_metrics", "--format", "csv", stdout=out)
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert len(rows) == 1
    for name in ("run_id", "task_id", "agent", "mode", *METRIC_FIELDS):
        assert name in rows[0]
    assert rows[0]["subagents_created"] == "2" and rows[0]["created_without_overlap"] == "False"
    out = io.StringIO()
    call_command("export_metrics", "--format", "json", stdout=out)
    data = json.loads(out.getvalue())
    assert data[0]["peak_concurrency"] == 2 and data[0]["first_overlap_pos"] == pytest.approx(0.11)


def test_generate_corpus_is_deterministic_and_importable(tmp_path):
    call_command(
        "generate_corpus", "--scale", "demo", "--seed", "7", "--out", str(tmp_path / "a"), stdout=io.StringIO()
    )
    call_command(
        "generate_corpus", "--scale", "demo", "--seed", "7", "--out", str(tmp_path / "b"), stdout=io.StringIO()
    )
    files_a = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files_a == sorted(p.name for p in (tmp_path / "b").iterdir())
    assert all((tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes() for n in files_a)
    assert len(files_a) == len(task_list("demo")) * 3 * 2
    call_command("import_trajectories", str(tmp_path / "a"), "--quiet-ok", stdout=io.StringIO())
    assert Run.objects.count() == len(files_a)
    assert not Run.objects.filter(mode="sequential", subagents_created__gt=0).exists()


def test_demo_corpus_in_the_cell_layout_keeps_its_artifacts(tmp_path):
    from trajectories.models import RunFile, TestOutcome

    call_command("generate_corpus", "--scale", "demo", "--cells", "--out", str(tmp_path / "c"), stdout=io.StringIO())
    call_command("import_trajectories", str(tmp_path / "c"), stdout=io.StringIO())
    assert Run.objects.count() == len(task_list("demo")) * 3 * 2
    kinds = {"cell", "evaluation", "final", "log", "patch", "test_output"}
    run = Run.objects.filter(mode="concurrent").order_by("pk").first()
    assert set(RunFile.objects.filter(run=run).values_list("kind", flat=True)) == kinds
    # The demo output's pytest lines are the run's test list; cell.json's quality, which says the same, its counts.
    listed = TestOutcome.objects.filter(run=run, primary=True)
    assert set(listed.values_list("source", flat=True)) == {"cell/evaluation/test_output.txt"}
    assert (listed.filter(outcome="passed").count(), listed.count()) == (run.tests_passed, run.tests_total)
    assert run.tests_source == "cell.json" and not run.warnings
    assert "[demo data]" in RunFile.objects.get(run=run, kind="final").content


def test_paper_scale_shape():
    tasks = task_list("paper")
    assert len(tasks) == 354 and len(tasks) * 3 * 2 == 2124
    assert {b for b, _, _ in tasks} == {"SWE-bench Verified", "RepoZero", "NL2Repo", "ProgramBench", "LoopsBench"}


def test_paper_scale_fanout_on_hard_loopsbench(tmp_path):
    import random

    from trajectories.generate import AGENTS, _run_lines

    created = {}
    for agent in AGENTS:
        counts = []
        for i in range(6):
            lines = list(_run_lines(random.Random(i), "LoopsBench", f"x{i}", "hard", agent, "concurrent", 1))
            counts.append(sum(1 for line in lines if line["type"] == "context") - 1)
        created[agent.name] = sum(counts) / len(counts)
    assert 110 < created["Codex"] < 160
    assert 50 < created["Claude Code"] < 85
    assert created["Kimi Code"] <= 6


def test_corpus_fixture_via_command():
    out = io.StringIO()
    call_command("import_trajectories", str(FIXTURES / "corpus"), stdout=out)
    assert "2 imported" in out.getvalue()


def test_csv_exports_neutralise_spreadsheet_formulas(tmp_path, browser_client):
    lines = simple_run('=HYPERLINK("http://evil")')
    lines[0]["task"]["benchmark"] = "-2+3"
    call_command("import_trajectories", str(write_jsonl(tmp_path / "r.jsonl", lines)), stdout=io.StringIO())
    body = b"".join(browser_client.get("/trajectories/metrics.csv").streaming_content).decode()
    row = next(csv.DictReader(io.StringIO(body)))
    assert row["task_id"] == '\'=HYPERLINK("http://evil")' and row["benchmark"] == "'-2+3"
    assert row["subagents_created"] == "2" and row["duration_s"] == "60.0"  # numbers stay numbers


def _contexts_in_order(lines: list[dict]) -> bool:
    """Every agent starts before it ends, and a sub-agent's events are in time order."""
    when = datetime.fromisoformat
    contexts = [line for line in lines if line["type"] == "context"]
    if any(when(c["ended_at"]) < when(c["started_at"]) for c in contexts):
        return False
    for ctx in contexts[1:]:
        stamps = [when(line["ts"]) for line in lines if line["type"] == "event" and line["context"] == ctx["id"]]
        if stamps != sorted(stamps):
            return False
    return True


def test_generated_agents_never_end_before_they_start(tmp_path):
    import random

    from trajectories.generate import AGENTS, _run_lines

    # Seeds 1643 and 2632 filled every Codex slot up to the run's end: its last workers started
    # after the run had ended and (their end clamped to the run's) ended before they began.
    for seed in (1643, 2632, *range(10)):
        lines = list(_run_lines(random.Random(seed), "LoopsBench", "x", "hard", AGENTS[0], "concurrent", 2))
        assert sum(line["type"] == "context" for line in lines) > 100
        assert _contexts_in_order(lines), seed
    call_command("generate_corpus", "--scale", "demo", "--seed", "3", "--out", str(tmp_path), stdout=io.StringIO())
    for path in tmp_path.iterdir():
        assert _contexts_in_order([json.loads(line) for line in path.read_text().splitlines()]), path.name
