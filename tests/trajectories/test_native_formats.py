"""Native adapters on the real files in tests/fixtures/real (copied from ../shared/data)."""

from __future__ import annotations

import shutil

import pytest

from tests.factories import FIXTURES, REAL, write_jsonl
from trajectories.models import AgentContext, Event, Run
from trajectories.services import import_paths

pytestmark = pytest.mark.django_db


def _only_run(report):
    assert report.count("failed") == 0, [r.message for r in report.results]
    assert report.count("imported") == 1
    return Run.objects.get()


def test_claude_code_inline_sidechains():
    run = _only_run(import_paths(paths=[REAL / "claude-code-inline"]))
    assert run.agent.name == "Claude Code" and run.source_format == "claude_code"
    subs = list(AgentContext.objects.filter(run=run, role="sub").order_by("position"))
    # Two sidechains, matched to their Task calls by prompt; the third Task call failed validation.
    assert [s.label for s in subs] == ["Check package configuration", "Analyze current project structure"]
    assert all(s.parent.role == "main" for s in subs)
    assert run.subagents_created == 2
    assert run.peak_concurrency == 1  # the two ran one after the other
    joins = Event.objects.filter(run=run, kind="join")
    assert {e.target for e in joins} == {f"task-{s.external_id.removeprefix('task-')}" for s in subs}
    writes = Event.objects.filter(run=run, kind="file_write")
    assert writes.exists() and "/path/to/Demo/CLAUDE.md" in writes.first().files
    assert run.shell_calls == Event.objects.filter(run=run, tool="Bash").count()
    assert run.tokens and run.tokens > 0
    assert any("mode not stated" in w for w in run.warnings)


def test_claude_code_workflow_subagent_files():
    run = _only_run(import_paths(paths=[REAL / "claude-code-workflow"]))
    sub = AgentContext.objects.get(run=run, role="sub")
    assert sub.external_id == "ad89b5caf0addd033"
    assert sub.label == "fits-card-subcard-regex-scope / Characterize / characterize"
    assert sub.status == "killed"
    assert sub.n_events == 3  # user prompt, text, Bash call (the attachment line is skipped)
    # its own transcript's first line starts it; the excerpt's last line (09:36:46) is before the
    # workflow state's last progress of the agent, which ends it
    assert sub.started_at.isoformat().startswith("2026-08-15T09:36:41.992")
    assert sub.ended_at.isoformat().startswith("2026-08-15T09:48:28.334")
    assert any("main transcript not in the bundle" in w for w in run.warnings)


def test_codex_child_rollout_without_its_parent():
    run = _only_run(import_paths(paths=[REAL / "codex"]))
    main = AgentContext.objects.get(run=run, role="main")
    sub = AgentContext.objects.get(run=run, role="sub")
    assert main.external_id == "019ff8fa-0a3d-75b2-bb71-da34d14f02f5"  # parent_thread_id from session_meta
    assert sub.external_id == "019ff8fa-2df4-7db0-bb93-10125fd3ccff"
    assert sub.label == "Epicurus (/root/inspect_auth_validator_tests)"
    assert run.subagents_created == 1


def test_codex_rollouts_are_grouped_by_parent_thread(tmp_path):
    root_id, child_id = "11111111-0000-0000-0000-000000000001", "11111111-0000-0000-0000-000000000002"
    root = [
        {"timestamp": "2026-08-13T02:36:00Z", "type": "session_meta", "payload": {"id": root_id}},
        {
            "timestamp": "2026-08-13T02:36:01Z",
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "name": "spawn_agent",
                "call_id": "c1",
                "arguments": '{"message": "inspect tests", "agent_type": "explorer"}',
            },
        },
        {
            "timestamp": "2026-08-13T02:36:02Z",
            "type": "response_item",
            "payload": {"type": "function_call_output", "call_id": "c1", "output": f'{{"agent_id": "{child_id}"}}'},
        },
        {
            "timestamp": "2026-08-13T02:36:03Z",
            "type": "response_item",
            "payload": {
                "type": "custom_tool_call",
                "name": "apply_patch",
                "call_id": "c2",
                "input": "*** Begin Patch\n*** Update File: django/core/validators.py\n@@\n*** End Patch",
            },
        },
        {
            "timestamp": "2026-08-13T02:36:09Z",
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "name": "exec_command",
                "call_id": "c3",
                "arguments": '{"cmd": "pytest"}',
            },
        },
    ]
    child = [
        {
            "timestamp": "2026-08-13T02:36:02Z",
            "type": "session_meta",
            "payload": {
                "id": child_id,
                "parent_thread_id": root_id,
                "session_id": root_id,
                "agent_nickname": "Epicurus",
            },
        },
        {
            "timestamp": "2026-08-13T02:36:05Z",
            "type": "response_item",
            "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]},
        },
    ]
    write_jsonl(tmp_path / "rollout-a.jsonl", root)
    write_jsonl(tmp_path / "rollout-b.jsonl", child)
    run = _only_run(import_paths(paths=[tmp_path]))
    assert run.n_contexts == 2 and run.subagents_created == 1 and run.shell_calls == 1
    spawn = Event.objects.get(run=run, kind="spawn")
    assert spawn.tool == "spawn_agent"
    result = Event.objects.get(run=run, kind="tool_result", tool="spawn_agent")
    assert result.target == child_id
    patch = Event.objects.get(run=run, kind="file_write")
    assert patch.files == ["django/core/validators.py"]


def test_kimi_swarm_session():
    run = _only_run(import_paths(paths=[REAL / "kimi"]))
    assert run.agent.name == "Kimi Code"
    subs = list(AgentContext.objects.filter(run=run, role="sub").order_by("external_id"))
    assert [s.external_id for s in subs] == ["agent-0", "agent-1"]
    # labels come from state.json's AgentSwarm items
    assert subs[0].label.startswith("Edit /workspace/django/contrib/auth/backends.py only.")
    assert run.peak_concurrency == 2  # both ran at once
    assert run.first_overlap_pos is not None and 0 < run.overlap_ratio < 1
    edit = Event.objects.get(run=run, kind="file_write", context=subs[0])
    assert edit.files == ["/workspace/django/contrib/auth/backends.py"]
    assert Event.objects.filter(run=run, kind="spawn", context__role="main").count() >= 2
    # the excerpt ends mid-run: sub-agents with no completion event get a warning-free end at their last event
    assert all(s.ended_at is not None for s in subs)


def test_study_corpus_tree_imports_cells_with_outcomes(tmp_path):
    shutil.copytree(FIXTURES / "corpus", tmp_path / "corpus")
    report = import_paths(paths=[tmp_path / "corpus"])
    assert report.count("failed") == 0, [r.message for r in report.results]
    runs = {r.agent.name: r for r in Run.objects.select_related("agent", "task__benchmark")}
    assert set(runs) == {"Kimi Code", "Codex"}
    kimi = runs["Kimi Code"]
    assert (kimi.task.benchmark.name, kimi.task.external_id, kimi.task.difficulty) == (
        "SWE-bench Verified",  # the folder says swebench_verified: stored under the benchmark's one name
        "django__django-11451",
        "easy",
    )
    assert kimi.mode == "concurrent" and kimi.task_pass is True
    assert kimi.duration_s == pytest.approx(652.985) and kimi.tokens == 641332
    assert kimi.shell_calls == 20  # usage.tools.Bash from cell.json
    assert kimi.task.prompt_sha256.startswith("3b394ef3")
    assert not any("mode not stated" in w for w in kimi.warnings)


def test_corpus_cell_pairs_with_a_parallax_twin(tmp_path):
    """The cell's folder says `swebench_verified`, the twin's header `SWE-bench Verified`: one benchmark."""
    from tests.factories import ctx, ev, header, t
    from trajectories.selectors import run_twin

    shutil.copytree(FIXTURES / "corpus", tmp_path / "corpus")
    import_paths(paths=[tmp_path / "corpus"])
    twin = [
        header("django__django-11451", "sequential", "Kimi Code", "SWE-bench Verified"),
        ctx("main", start=t(0), end=t(10)),
        ev("main", 0, t(1)),
    ]
    twin[0]["task"]["prompt_sha256"] = "3b394ef33a4c2eb7541dfa1eb6dd8672bd86a4de24b7c674cccf909c32b1f346"
    import_paths(paths=[write_jsonl(tmp_path / "serial.jsonl", twin)])
    kimi = Run.objects.get(agent__name="Kimi Code", mode="concurrent")
    assert run_twin(run=kimi).source_format == "parallax"


def test_twin_with_a_different_prompt_is_refused(tmp_path):
    from tests.factories import ctx, header, t

    shutil.copytree(FIXTURES / "corpus", tmp_path / "corpus")
    import_paths(paths=[tmp_path / "corpus"])
    twin = [
        header("django__django-11451", "sequential", "Kimi Code", "swebench_verified"),
        ctx("main", start=t(0), end=t(10)),
    ]
    twin[0]["task"]["prompt_sha256"] = "0" * 64
    report = import_paths(paths=[write_jsonl(tmp_path / "serial.jsonl", twin)])
    assert report.results[0].status == "failed" and "prompt_sha256" in report.results[0].message


def test_manifest_supplies_task_mode_and_outcomes(tmp_path):
    shutil.copytree(REAL / "kimi", tmp_path / "kimi")
    manifest = tmp_path / "manifest.csv"
    manifest.write_text(
        "path,benchmark,task_id,agent,mode,task_pass,tests_passed,tests_total\n"
        "kimi/server/events/*.jsonl,SWE-bench Verified,django__django-11451,Kimi Code,concurrent,"
        "true,12,12\n"
    )
    run = _only_run(import_paths(paths=[tmp_path / "kimi"], manifest=manifest))
    assert (run.task.benchmark.name, run.task.external_id, run.mode) == (
        "SWE-bench Verified",
        "django__django-11451",
        "concurrent",
    )
    assert (run.task_pass, run.tests_passed, run.tests_total, run.test_pass) == (True, 12, 12, 1.0)


def test_bad_manifest_row_is_named(tmp_path):
    shutil.copytree(REAL / "kimi", tmp_path / "kimi")
    manifest = tmp_path / "manifest.csv"
    manifest.write_text("path,tests_passed\nkimi/server/events/*.jsonl,many\n")
    report = import_paths(paths=[tmp_path / "kimi"], manifest=manifest)
    assert report.results[0].status == "failed"
    assert "manifest.csv:2: field 'tests_passed'" in report.results[0].message
    assert Run.objects.count() == 0


def test_unrecognised_file_is_reported_not_dropped(tmp_path):
    (tmp_path / "notes.jsonl").write_text('{"hello": "world"}\n')
    report = import_paths(paths=[tmp_path])
    assert report.results[0].status == "failed" and "notes.jsonl:1" in report.results[0].message


def test_swe_agent_traj():
    run = _only_run(import_paths(paths=[REAL / "swe-agent"]))
    assert (run.agent.name, run.mode, run.source_format) == ("SWE-agent", "sequential", "swe_agent")
    assert run.n_contexts == 1 and run.subagents_created == 0
    assert run.tokens == 7141 + 243  # info.model_stats tokens_sent + tokens_received
    assert run.shell_calls == 5  # every SWE-agent action runs in its shell
    assert run.duration_s == pytest.approx(1.6329, abs=1e-3)  # sum of execution_time (no timestamps in .traj)
    edit = Event.objects.get(run=run, kind="file_write")
    assert edit.tool == "edit" and edit.files == ["/SWE-agent__test-repo/tests/missing_colon.py"]


def test_openhands_event_list():
    run = _only_run(import_paths(paths=[REAL / "openhands"]))
    assert run.agent.name == "OpenHands" and run.n_events == 4
    write = Event.objects.get(run=run, kind="file_write")
    assert write.tool == "edit" and write.files == ["/workspace/game_2048.py"]
    assert Event.objects.get(run=run, kind="tool_result").tool == "edit"
    assert run.started_at.isoformat().startswith("2025-01-27T22:44:56")


def test_truncated_swe_agent_file_is_rejected(tmp_path):
    data = (REAL / "swe-agent" / "6e44b9__sweagenttestrepo-1c2844.traj").read_bytes()
    (tmp_path / "cut.traj").write_bytes(data[: len(data) // 2])
    report = import_paths(paths=[tmp_path])
    assert report.results[0].status == "failed" and "cut.traj" in report.results[0].message
    assert Run.objects.count() == 0 and Event.objects.count() == 0


def test_codex_children_of_a_child_are_its_children_at_any_depth(tmp_path):
    """A depth-2 thread's spawn record names its spawner (a depth-1 child); the session's root is only
    its session. With the main rollout missing, the children still hang from the right threads."""
    main, child, grandchild = (f"22222222-0000-0000-0000-00000000000{i}" for i in (1, 2, 3))

    def meta(thread: str, spawner: str, depth: int, at: str) -> dict:
        spawn = {"parent_thread_id": spawner, "depth": depth, "agent_nickname": f"d{depth}"}
        payload = {
            "id": thread,
            "session_id": main,
            "parent_thread_id": main,
            "source": {"subagent": {"thread_spawn": spawn}},
        }
        return {"timestamp": at, "type": "session_meta", "payload": payload}

    def said(at: str) -> dict:
        content = [{"type": "output_text", "text": "working"}]
        return {
            "timestamp": at,
            "type": "response_item",
            "payload": {"type": "message", "role": "assistant", "content": content},
        }

    write_jsonl(
        tmp_path / "rollout-child.jsonl",
        [meta(child, main, 1, "2026-08-13T02:36:00Z"), said("2026-08-13T02:36:05Z"), said("2026-08-13T02:37:00Z")],
    )
    write_jsonl(
        tmp_path / "rollout-grandchild.jsonl",
        [
            meta(grandchild, child, 2, "2026-08-13T02:36:10Z"),
            said("2026-08-13T02:36:20Z"),
            said("2026-08-13T02:36:50Z"),
        ],
    )
    run = _only_run(import_paths(paths=[tmp_path]))
    contexts = {c.external_id: c for c in AgentContext.objects.filter(run=run).select_related("parent")}
    assert contexts[grandchild].parent.external_id == child and contexts[grandchild].depth == 2
    assert contexts[child].parent.external_id == main and contexts[main].role == "main"
    assert run.subagents_created == 2 and run.peak_concurrency == 2


def _rollout(thread: str, second: int, *, parent: str | None = None, root: str | None = None, depth: int = 0):
    """A Codex 0.145 rollout in its real shape: `session_meta` (a sub-agent's names its root session
    and, in `source.subagent.thread_spawn`, its parent and depth), then one assistant message."""
    meta: dict = {"id": thread}
    if parent:
        meta.update(session_id=root, parent_thread_id=parent, thread_source="subagent",
                    source={"subagent": {"thread_spawn": {"parent_thread_id": parent, "depth": depth,
                                                          "agent_path": f"/root/t{second}"}}})  # fmt: skip
    return [
        {"timestamp": f"2026-08-13T02:36:{second:02d}Z", "type": "session_meta", "payload": meta},
        {"timestamp": f"2026-08-13T02:36:{second + 5:02d}Z", "type": "response_item",
         "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}},
    ]  # fmt: skip


@pytest.mark.parametrize("with_root", [True, False])
def test_a_codex_grandchild_whose_parent_rollout_is_missing_stays_at_its_depth(tmp_path, with_root):
    """root → child (rollout missing) → grandchild, and root → sibling: one run, the grandchild at
    depth 2 under the missing child, kept as an empty sub-agent; the root kept (empty when it too is missing)."""
    root, child, grandchild, sibling = (f"22222222-0000-0000-0000-00000000000{n}" for n in range(1, 5))
    if with_root:
        write_jsonl(tmp_path / "rollout-1.jsonl", _rollout(root, 0))
    write_jsonl(tmp_path / "rollout-3.jsonl", _rollout(grandchild, 20, parent=child, root=root, depth=2))
    write_jsonl(tmp_path / "rollout-4.jsonl", _rollout(sibling, 10, parent=root, root=root, depth=1))
    run = _only_run(import_paths(paths=[tmp_path]))
    contexts = {c.external_id: c for c in AgentContext.objects.filter(run=run).select_related("parent")}
    assert set(contexts) == {root, child, grandchild, sibling}
    assert contexts[root].role == "main" and contexts[root].n_events == (1 if with_root else 0)
    assert (contexts[grandchild].depth, contexts[grandchild].parent.external_id) == (2, child)
    assert (contexts[child].depth, contexts[child].parent.external_id, contexts[child].n_events) == (1, root, 0)
    assert (contexts[sibling].depth, contexts[sibling].parent.external_id) == (1, root)
    assert run.subagents_created == 3
    assert any(f"parent thread {child} of {grandchild} is not in the bundle" in w for w in run.warnings)
