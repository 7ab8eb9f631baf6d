"""Layouts of the study's artifact (schwerli/Concurrency-Failures-Trajectory-Artifact) beyond the
agents' homes: Codex's `cell/trajectory.jsonl` (`codex exec --json`) when the rollouts are missing, and
Kimi Code's per-agent `wire.jsonl` files when the server event journal is missing. Real excerpts in
tests/fixtures/artifact-excerpts (PROVENANCE.md there); the sub-agent shapes of the exec stream are
built as `codex exec --json` writes them (documented in docs/format.md)."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime

import pytest

from tests.factories import FIXTURES, REAL, write_jsonl
from trajectories.models import AgentContext, Event, Run
from trajectories.services import import_paths

pytestmark = pytest.mark.django_db

EXCERPTS = FIXTURES / "artifact-excerpts"
EXEC = EXCERPTS / "codex-exec" / "trajectory__EXCERPT_lines1-9.jsonl"
WIRE_SESSION = EXCERPTS / "kimi-wire" / "session_26c15e02-e408-4cd6-aa8e-423502339338"
REAL_KIMI = REAL / "kimi"


def _imported(report) -> Run:
    assert [r.status for r in report.results] == ["imported"], report.results
    return Run.objects.get(pk=report.results[0].run_id)


def test_a_codex_exec_stream_imports_the_main_threads_items():
    run = _imported(import_paths(paths=[EXEC]))
    assert run.source_format == "codex_exec" and run.agent.name == "Codex"
    assert run.task.external_id == "019fdbb2-17cc-71b3-aacc-09129567a5f0"  # the thread id, without a cell.json
    kinds = list(Event.objects.filter(run=run).order_by("seq").values_list("kind", flat=True))
    assert kinds == ["message"] + ["tool_call", "tool_result"] * 3
    result = Event.objects.get(run=run, kind="tool_result", text__contains="rg: command not found")
    assert result.tool == "shell" and result.source_line == 7
    assert run.shell_calls == 3 and run.subagents_created == 0
    assert any("the main agent and its events are not timed" in w for w in run.warnings)


def test_a_codex_exec_stream_names_the_sub_agents_the_main_thread_spawned(tmp_path):
    """spawn_agent → wait → close_agent as `codex exec --json` writes them: the brief only on the
    started item, the receiving thread only on the completed one, the child's state on wait."""
    main, child = "019f6dea-f0bb-7101-b471-5fb23063155d", "019f6deb-1900-75c2-bc23-d254fab96b5c"
    spawn = {"id": "item_2", "type": "collab_tool_call", "tool": "spawn_agent", "sender_thread_id": main}
    lines = [
        {"type": "thread.started", "thread_id": main},
        {"type": "turn.started"},
        {"type": "item.started", "item": {**spawn, "receiver_thread_ids": [], "prompt": "Run `echo sub`\nand report",
                                          "status": "in_progress"}},
        {"type": "item.completed", "item": {**spawn, "receiver_thread_ids": [child], "prompt": None,
                                            "status": "completed"}},
        {"type": "item.completed", "item": {"id": "item_3", "type": "collab_tool_call", "tool": "wait",
                                            "sender_thread_id": main, "receiver_thread_ids": [child],
                                            "agents_states": {child: {"status": "completed", "message": "sub"}},
                                            "status": "completed"}},
        {"type": "item.completed", "item": {"id": "item_4", "type": "file_change", "status": "completed",
                                            "changes": [{"path": "/workspace/a.py", "kind": "add"}]}},
        {"type": "item.started", "item": {"id": "item_5", "type": "command_execution", "command": "pytest",
                                          "status": "in_progress"}},
        {"type": "turn.completed", "usage": {"input_tokens": 100, "cached_input_tokens": 40, "output_tokens": 7}},
    ]  # fmt: skip
    run = _imported(import_paths(paths=[write_jsonl(tmp_path / "trajectory.jsonl", lines)]))
    sub = AgentContext.objects.get(run=run, role="sub")
    assert (sub.external_id, sub.label, sub.status, sub.parent.external_id) == (
        child,
        "Run `echo sub`",
        "completed",
        main,
    )
    assert run.subagents_created == 1 and run.mode == "concurrent" and run.tokens == 107
    events = {e.kind: e for e in Event.objects.filter(run=run)}
    assert events["spawn"].target == child and events["wait"].target == child
    assert events["file_write"].files == ["/workspace/a.py"]
    assert events["tool_call"].text == "pytest"  # still running when the stream ended


def test_a_cell_without_rollouts_is_read_from_its_trajectory_jsonl(tmp_path):
    cell = tmp_path / "nl2repo" / "flasky" / "codex" / "serial"
    (cell / "cell").mkdir(parents=True)
    (cell / "cell.json").write_text(json.dumps({"mode": "serial", "solution_passed": False, "cell_seconds": 812.5}))
    shutil.copy(EXEC, cell / "cell" / "trajectory.jsonl")
    run = _imported(import_paths(paths=[tmp_path]))
    assert (run.task.benchmark.name, run.task.external_id, run.agent.name, run.mode) == (
        "NL2RepoBench",  # the folder's `nl2repo`, under the benchmark's one name
        "flasky",
        "Codex",
        "sequential",
    )
    assert run.source_format == "codex_exec" and run.task_pass is False and run.duration_s == 812.5
    assert any("no rollouts under agent/; read cell/trajectory.jsonl" in w for w in run.warnings)


def test_a_cell_with_no_log_at_all_says_what_it_looked_for(tmp_path):
    cell = tmp_path / "nl2repo" / "flasky" / "codex" / "serial"
    cell.mkdir(parents=True)
    (cell / "cell.json").write_text(json.dumps({"mode": "serial"}))
    [result] = import_paths(paths=[tmp_path]).results
    assert result.status == "failed" and "cell.json: no agent log found" in result.message
    assert "cell/trajectory.jsonl" in result.message


def test_a_kimi_session_without_its_journal_is_read_from_the_wire_files(tmp_path):
    session = tmp_path / "sessions" / "wd_workspace_c52ddf65534b" / WIRE_SESSION.name
    shutil.copytree(WIRE_SESSION, session)
    # The main agent's wire, in the same shapes: it starts the sub-agent's work and reads its result.
    main = [
        {"type": "metadata", "protocol_version": "1.5", "created_at": 1786360430000},
        {"type": "context.append_loop_event", "time": 1786360431000,
         "event": {"type": "tool.call", "toolCallId": "AgentSwarm_0", "name": "AgentSwarm", "args": {"items": ["a"]}}},
        {"type": "context.append_loop_event", "time": 1786360450000,
         "event": {"type": "tool.result", "toolCallId": "AgentSwarm_0", "result": {"output": "agent-0 done"}}},
        {"type": "context.append_loop_event", "time": 1786360451000,
         "event": {"type": "content.part", "part": {"type": "text", "text": "All checks ran."}}},
    ]  # fmt: skip
    write_jsonl(session / "agents" / "main" / "wire.jsonl", main)
    run = _imported(import_paths(paths=[tmp_path]))
    assert run.source_format == "kimi" and run.agent.name == "Kimi Code"
    sub = AgentContext.objects.get(run=run, role="sub")
    assert (sub.external_id, sub.parent.external_id) == ("agent-0", "main")
    assert list(sub.events.order_by("seq").values_list("kind", "tool")) == [
        ("reasoning", ""),
        ("tool_call", "Bash"),
        ("tool_result", "Bash"),
    ]
    assert sub.started_at == datetime(2026, 8, 10, 11, 14, 2, 233000, tzinfo=UTC)
    assert run.tokens == 5629 + 97 + 3072 and run.shell_calls == 1 and run.subagents_created == 1
    spawn = Event.objects.get(run=run, context__external_id="main", kind="spawn")
    assert spawn.tool == "AgentSwarm"
    assert any("read from its own wire.jsonl" in w for w in run.warnings)


def test_a_kimi_wire_file_alone_imports_with_a_warning_about_the_main_agent(tmp_path):
    shutil.copytree(WIRE_SESSION, tmp_path / WIRE_SESSION.name)
    run = _imported(import_paths(paths=[tmp_path]))
    assert any("main agent's wire.jsonl is not in the bundle" in w for w in run.warnings)
    assert AgentContext.objects.filter(run=run).count() == 2


def test_a_kimi_sub_agent_with_a_wire_file_is_read_from_it_the_others_from_the_journal(tmp_path):
    """The real AgentSwarm journal (two sub-agents at once) with agent-0's own wire file beside it, in the
    wire's real shapes: agent-0's words come from its wire, agent-1 and the main agent from the journal,
    and the journal still says who spawned agent-0 and when."""
    session = "session_a3ac76f5-c5b7-4ff4-8237-76a0892f7908"
    shutil.copytree(REAL_KIMI, tmp_path / "kimi")
    wire = tmp_path / "kimi" / "sessions" / "wd_workspace_c52ddf65534b" / session / "agents" / "agent-0" / "wire.jsonl"
    write_jsonl(wire, [
        {"type": "metadata", "protocol_version": "1.5", "created_at": 1786718450100},
        {"type": "context.append_message", "time": 1786718450101,
         "message": {"role": "user", "content": [{"type": "text", "text": "Fix it."}]}},
        {"type": "context.append_loop_event", "time": 1786718452000,
         "event": {"type": "content.part", "part": {"type": "think", "think": "Read backends.py first."}}},
        {"type": "context.append_loop_event", "time": 1786718453000,
         "event": {"type": "tool.call", "toolCallId": "Read_0", "name": "Read", "args": {"path": "backends.py"}}},
        {"type": "usage.record", "usage": {"inputOther": 100, "output": 7}, "time": 1786718453001},
    ])  # fmt: skip
    run = _imported(import_paths(paths=[tmp_path / "kimi"]))
    contexts = {c.external_id: c for c in AgentContext.objects.filter(run=run).select_related("parent")}
    agent0, agent1 = contexts["agent-0"], contexts["agent-1"]
    assert agent0.source_file.endswith("agents/agent-0/wire.jsonl") and agent0.parent.external_id == "main"
    assert list(Event.objects.filter(context=agent0).order_by("seq").values_list("kind", "text")) == [
        ("message", "Fix it."),
        ("reasoning", "Read backends.py first."),
        ("tool_call", '{\n  "path": "backends.py"\n}'),
    ]
    journal = [json.loads(line) for line in next((REAL_KIMI / "server").rglob("*.jsonl")).read_text().splitlines()]
    first = next(  # the journal's first word of agent-0 starts it
        j["envelope"]["timestamp"] for j in journal
        if "agent-0" in (j.get("envelope", {}).get("payload", {}).get(key) for key in ("agentId", "subagentId"))
    )  # fmt: skip
    assert agent0.started_at == datetime.fromisoformat(first.replace("Z", "+00:00"))
    assert agent1.source_file.startswith("server/events/") and agent1.n_events > 0  # no wire: the journal
    assert Event.objects.filter(context=contexts["main"], kind="spawn", target="agent-0").exists()
    # tokens: agent-0's from its wire, every other agent's from the journal's completed steps
    journal_tokens = sum(
        v for j in journal if j.get("envelope", {}).get("type") == "turn.step.completed"
        and j["envelope"]["payload"].get("agentId") != "agent-0"
        for v in (j["envelope"]["payload"].get("usage") or {}).values() if isinstance(v, int)
    )  # fmt: skip
    assert journal_tokens > 0 and run.tokens == journal_tokens + 107
