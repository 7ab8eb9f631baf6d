"""Claude Code 2.x: a Task/Agent call is tied to the sub-agent file it started (at any depth) and
its result is the parent's join; a Workflow call to the workflow it launched; a workflow slot
started again under a new agent id (journal.jsonl) is a retry, each attempt a sub-agent of its own.

Built in the shapes of the study's real files (tests/fixtures/real/claude-code-workflow: workflow
state, journal and sub-agent lines of Claude Code 2.1.207); no real session with these calls is
small enough to keep whole (docs/format.md)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from tests.factories import CLAUDE_SID, claude_call, claude_line, claude_result, claude_session, write_jsonl
from trajectories.models import AgentContext, Event, Run
from trajectories.services import import_paths

pytestmark = pytest.mark.django_db


def test_calls_are_tied_to_the_sub_agents_they_started(tmp_path):
    report = import_paths(paths=[claude_session(tmp_path)])
    assert [r.status for r in report.results] == ["imported"], report.results
    run = Run.objects.get()
    contexts = {c.external_id: c for c in AgentContext.objects.filter(run=run).select_related("parent")}
    assert contexts["a1"].parent.external_id == "main" and contexts["a1"].label == "scout the tests"
    assert contexts["a2"].parent.external_id == "a1" and contexts["a2"].depth == 2  # a call inside a sub-agent
    spawn = Event.objects.get(run=run, context=contexts["main"], tool="Agent")
    join = Event.objects.get(run=run, context=contexts["main"], kind="join")
    assert (spawn.kind, spawn.target, join.target) == ("spawn", "a1", "a1")
    # The parent's waiting is visible: it called at 0:05, the sub-agent began at 0:06, the result came at 1:00.
    assert (join.timestamp - spawn.timestamp).total_seconds() == 55
    assert Event.objects.get(run=run, context=contexts["a1"], kind="join").target == "a2"
    launch = Event.objects.get(run=run, tool="Workflow")
    assert (launch.kind, launch.target) == ("spawn", "wf_abc123")
    assert Event.objects.get(run=run, target="wf_abc123", kind="tool_result").source_line == 5
    assert {contexts[a].parent.external_id for a in ("w1", "w2", "w3")} == {"main"}


def test_a_retried_workflow_slot_is_attempts_of_one_slot(tmp_path):
    import_paths(paths=[claude_session(tmp_path)])
    run = Run.objects.get()
    labels = dict(AgentContext.objects.filter(run=run).values_list("external_id", "label"))
    assert labels["w1"] == "fix-it / Try / try · attempt 1 of 2"
    assert labels["w2"] == "fix-it / Try / try · attempt 2 of 2"
    assert labels["w3"] == "fix-it / Try / check"
    # Every attempt ran: each is a sub-agent created (docs/metrics.md), and the retry is said.
    assert run.subagents_created == 5
    assert any("slot 'try' was retried: 2 attempts (w1, w2)" in w for w in run.warnings)
    slots = {c.external_id: (c.workflow, c.slot, c.attempt, c.attempts) for c in AgentContext.objects.filter(run=run)}
    assert slots["w1"] == ("wf_abc123", "try", 1, 2) and slots["w2"] == ("wf_abc123", "try", 2, 2)
    assert slots["w3"] == ("wf_abc123", "check", 1, 1) and slots["main"] == ("", "", None, None)


def test_a_retry_is_timed_by_its_own_transcript(tmp_path):
    """The state's startedAt of a retried slot is the slot's first start: the retry's own lines time it."""
    import_paths(paths=[claude_session(tmp_path)])
    contexts = {c.external_id: c for c in AgentContext.objects.filter(run=Run.objects.get())}
    assert contexts["w2"].started_at == contexts["w1"].started_at + timedelta(seconds=11)  # its first line, 0:21
    assert contexts["w2"].duration_s == 29  # 0:21 .. 0:50


def test_a_lone_workflow_journal_lists_its_attempts(tmp_path):
    """A session folder holding only a workflow's journal still says which agents ran and which retried."""
    write_jsonl(tmp_path / "wf_x1y2z3" / "journal.jsonl", [
        {"type": "started", "key": "k1", "agentId": "a"},
        {"type": "started", "key": "k2", "agentId": "b"},
        {"type": "started", "key": "k1", "agentId": "c"},
    ])  # fmt: skip
    report = import_paths(paths=[tmp_path / "wf_x1y2z3"])
    assert [r.status for r in report.results] == ["imported"], report.results
    run = Run.objects.get()
    rows = list(
        AgentContext.objects.filter(run=run, role="sub")
        .order_by("position")
        .values_list("external_id", "slot", "attempt", "attempts", "started_at")
    )
    assert rows == [("a", "slot 1", 1, 2, None), ("c", "slot 1", 2, 2, None), ("b", "slot 2", 1, 1, None)]
    assert any("its state (workflows/wf_x1y2z3.json) is not in the bundle" in w for w in run.warnings)
    assert any("main transcript not in the bundle" in w for w in run.warnings)


def test_a_journal_of_an_unknown_format_is_refused(tmp_path):
    write_jsonl(tmp_path / "wf" / "journal.jsonl", [{"type": "mystery", "key": "k"}])
    report = import_paths(paths=[tmp_path / "wf"])
    assert [r.status for r in report.results] == ["failed"]


def _second_workflow(projects, *, run_id: str, task_id: str, name: str, agent: str) -> None:
    """Another workflow of the session: its state, its journal and its one agent's transcript."""
    session_dir = projects / "-testbed" / CLAUDE_SID
    state = {"runId": run_id, "taskId": task_id, "workflowName": name, "status": "completed",
             "workflowProgress": [{"type": "workflow_agent", "agentId": agent, "label": "again", "phaseTitle": "Try",
                                   "state": "completed"}]}  # fmt: skip
    (session_dir / "workflows" / f"{run_id}.json").write_text(json.dumps(state))
    folder = session_dir / "subagents" / "workflows" / run_id
    write_jsonl(folder / "journal.jsonl", [{"type": "started", "key": "v2:again", "agentId": agent}])
    write_jsonl(folder / f"agent-{agent}.jsonl", [claude_line("user", 70, "again", agentId=agent, isSidechain=True)])


def _calls_with_results(projects, calls: list[tuple[str, str, str]]) -> None:
    """Replace the main transcript's Workflow call by these: (tool_use id, script, result text)."""
    main = projects / "-testbed" / f"{CLAUDE_SID}.jsonl"
    lines = [json.loads(raw) for raw in main.read_text().splitlines()]
    kept = [ln for ln in lines if "toolu_wf" not in json.dumps(ln)]
    for n, (tool_id, script, said) in enumerate(calls):
        kept += [claude_call(62 + 2 * n, "Workflow", tool_id, script=script), claude_result(63 + 2 * n, tool_id, said)]
    write_jsonl(main, kept)


def test_two_runs_of_one_workflow_are_told_apart_by_what_each_call_returned(tmp_path):
    """The same workflow run twice: the calls' scripts name it alike, their results name each run's task."""
    projects = claude_session(tmp_path)
    _second_workflow(projects, run_id="wf_def456", task_id="tsk67890", name="fix-it", agent="w4")
    _calls_with_results(projects, [
        ("toolu_one", "export const meta = { name: 'fix-it' }", "Workflow launched in background. Task ID: tsk67890"),
        ("toolu_two", "export const meta = { name: 'fix-it' }", "Launched. Transcript: workflows/wf_abc123"),
    ])  # fmt: skip
    import_paths(paths=[projects])
    run = Run.objects.get()
    targets = dict(Event.objects.filter(run=run, tool="Workflow").values_list("source_line", "target"))
    assert sorted(targets.values()) == ["wf_abc123", "wf_def456"]
    first, second = (targets[line] for line in sorted(targets))
    assert (first, second) == ("wf_def456", "wf_abc123")


def test_a_workflow_call_is_tied_to_the_workflow_its_script_names_when_its_result_names_none(tmp_path):
    projects = claude_session(tmp_path)
    _second_workflow(projects, run_id="wf_def456", task_id="tsk67890", name="fix-it-twice", agent="w4")
    _calls_with_results(projects, [
        ("toolu_one", "export const meta = { name: 'fix-it-twice' }", "started"),
        ("toolu_two", "export const meta = { name: 'fix-it' }", "started"),
        ("toolu_three", "runs fix-it and then fix-it-twice", "started"),  # two named: no link
    ])  # fmt: skip
    import_paths(paths=[projects])
    targets = [t for _, t in sorted(Event.objects.filter(tool="Workflow").values_list("source_line", "target"))]
    assert targets == ["wf_def456", "wf_abc123", "task-toolu_three"]


@pytest.mark.parametrize(("field", "value"), [("logs", 5), ("workflowProgress", {"type": "workflow_agent"})])
def test_a_workflow_state_of_the_wrong_shape_fails_its_run_naming_the_field(tmp_path, field, value):
    projects = claude_session(tmp_path)
    state_file = projects / "-testbed" / CLAUDE_SID / "workflows" / "wf_abc123.json"
    state = json.loads(state_file.read_text())
    state[field] = value
    state_file.write_text(json.dumps(state))
    [result] = import_paths(paths=[projects]).results
    assert result.status == "failed" and f"wf_abc123.json: field '{field}'" in result.message
    assert not Run.objects.exists()
