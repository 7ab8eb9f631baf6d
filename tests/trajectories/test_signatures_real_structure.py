"""The detectors' rules that read the real structure of a run (docs/signatures.md, version 3), on hand-built
traces: a fan-out the run's end cut off, a child stopped with the run against one the parent left behind,
retries that redo work against retries that only re-read, investigation before and after the first write,
artifacts of sub-agents that reach the final patch, and the shell commands and patches they are read from.
Every hit says in words what each of its events shows and what would make it wrong."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from trajectories import signatures as sig
from trajectories.signatures import Agent, Event, Patch, PatchedFile, make_trace, read_patch, shell_effects

T0 = datetime(2026, 8, 1, 10, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def main(start: float = 0, end: float | None = None, **extra) -> Agent:
    return Agent("main", "main", None, started_at=at(start), ended_at=None if end is None else at(end), **extra)


def sub(aid: str, start: float, end: float, **extra) -> Agent:
    return Agent(aid, "sub", "main", started_at=at(start), ended_at=at(end), **extra)


def ev(aid: str, seq: int, seconds: float, kind: str = "tool_call", **extra) -> Event:
    files = tuple(extra.pop("files", ()))
    return Event(aid, seq, kind, at(seconds), files=files, **extra)


def explained(hits: list[sig.Hit]) -> bool:
    """Every hit names what would make it wrong, and says what each piece of its evidence shows."""
    return bool(hits) and all(h.wrong_if.startswith("Wrong if") and all(e.note for e in h.evidence) for h in hits)


# -- a fan-out cut off by the run's end -------------------------------------------------------------


def _workflow(*, closing: bool = False, started: int = 4, killed: int = 3) -> sig.Trace:
    agents = [main(0, 100)]
    events = [ev("main", 0, 0, "message", tool="user", text="fix it"), ev("main", 1, 10, "spawn", target="wf_1")]
    for i in range(started):
        cut = i < killed
        agents.append(sub(f"a{i}", 10, 300 if cut else 50, status="killed" if cut else "completed", workflow="wf_1"))
        events.append(ev(f"a{i}", 0, 10, "message", tool="user", text="Probe the fix for regressions. " * 9))
        events.append(ev(f"a{i}", 1, 300 if cut else 50, "message", tool="user", text="[Request interrupted by user]"))
    events.append(ev("main", 2, 90, tool="Bash", text="pytest -q"))  # its own work while they run
    if closing:
        events.append(ev("main", 3, 100, "message", tool="assistant", text="Done."))
    return make_trace(agents, events)


def test_a_run_cut_off_while_its_fan_out_runs_is_fan_out_budget_exhaustion():
    [hit] = sig.fanout_budget(_workflow())
    assert hit.modes == ("fan-out-budget-exhaustion",)
    assert "3 of the 4 sub-agents it started (workflow wf_1)" in hit.explanation
    assert "its log ends at 10:01:30 without a closing message" in hit.explanation
    assert [(e.agent, e.seq) for e in hit.evidence][0] == ("main", 1)  # the spawn of the workflow
    assert {e.agent for e in hit.evidence[1:-1]} <= {"a0", "a1", "a2"} and hit.evidence[-1].seq == 2
    assert explained([hit])
    # children stopped with the run are not the parent abandoning them
    assert sig.unfinished_children(_workflow()) == []


def test_the_cut_off_fan_out_cites_the_workflows_own_record_of_how_it_ended():
    stall = '[stall] agent "p" stalled (no progress) after 318s — retrying (1/5)'
    record = {"runId": "wf_1", "status": "killed", "result": None, "logs": [stall, "[note] other"]}
    state = sig.read_workflow_state(json.dumps(record), source="home/workflows/wf_1.json")
    assert state == sig.WorkflowState("wf_1", "home/workflows/wf_1.json", status="killed", result=False, retries=1)
    trace = _workflow()
    [hit] = sig.fanout_budget(make_trace(trace.agents, trace.events, workflows=[state]))
    [cited] = [e for e in hit.evidence if e.source]
    assert (cited.source, cited.line) == ("home/workflows/wf_1.json", 1)
    assert cited.note == "workflow wf_1's own record: status killed, no result, 1 agents retried after a stall"
    # another workflow's record is not this run's to cite
    other = sig.WorkflowState("wf_2", "home/workflows/wf_2.json", status="completed", result=True)
    [hit] = sig.fanout_budget(make_trace(trace.agents, trace.events, workflows=[other]))
    assert not any(e.source for e in hit.evidence)


@pytest.mark.parametrize("text", ["", "not json {", "[1, 2]", '{"status": "killed"}', '{"runId": 7}'])
def test_a_file_that_is_no_workflow_record_is_not_read_as_one(text):
    assert sig.read_workflow_state(text, source="workflows/x.json") is None


def test_a_finished_main_agent_or_a_small_fan_out_is_not_cut_off():
    assert sig.fanout_budget(_workflow(closing=True)) == []
    assert sig.fanout_budget(_workflow(started=2, killed=2)) == []  # two sub-agents are no fan-out
    assert sig.fanout_budget(_workflow(killed=1)) == []  # one left running at the end
    no_log = make_trace([main(), sub("a0", 1, 9, status="killed"), sub("a1", 1, 9), sub("a2", 1, 9)], [ev("a0", 0, 9)])
    assert sig.fanout_budget(no_log) == []  # the parent's log is not in the bundle


def test_a_child_killed_while_the_main_agent_goes_on_is_early_termination():
    trace = make_trace(
        [main(0, 200), sub("w0", 10, 60, status="cancelled")],
        [ev("w0", 0, 60, "message", tool="user", text="[cancelled]"), ev("main", 0, 150, tool="Read", files=["a.py"])],
    )
    [hit] = sig.unfinished_children(trace)
    assert hit.modes == ("early-child-termination",) and "went on without it until 10:03:20" in hit.explanation
    assert [(e.agent, e.seq) for e in hit.evidence] == [("w0", 0), ("main", 0)] and explained([hit])


# -- retries -------------------------------------------------------------------------------------------


def _attempts(*events: Event) -> sig.Trace:
    agents = [main(0, 100), *(sub(f"t{k}", 10 * k, 10 * k + 9, label=f"s · attempt {k} of 3") for k in (1, 2, 3))]
    return make_trace(agents, events)


def test_a_retry_that_only_re_reads_redoes_no_work():
    reads = [ev(f"t{k}", 0, 10 * k + 1, tool="Read", files=["a.py"]) for k in (1, 2, 3)]
    assert sig.checkpoint_free_retry(_attempts(*reads)) == []


def test_a_retry_redoing_an_earlier_attempts_write_is_checkpoint_free_even_past_an_empty_attempt():
    trace = _attempts(
        ev("t1", 0, 11, "file_write", tool="Edit", files=["a.py"]),
        ev("t3", 0, 31, "file_write", tool="Edit", files=["a.py"]),  # attempt 2 did nothing
    )
    [hit] = sig.checkpoint_free_retry(trace)
    assert "attempt 3 of 's' (t3) redid 1 of the 1 file actions" in hit.explanation
    assert [(e.agent, e.note) for e in hit.evidence] == [
        ("t1", "earlier attempt: Edit of a.py"),
        ("t3", "attempt 3 again: Edit of a.py"),
    ]
    assert explained([hit])


def _workflow_slot(*events: Event) -> sig.Trace:
    """A Claude Code workflow's slot retried as the importer stores it: each attempt a sub-agent of the workflow
    with its slot and attempt number; its label only names the slot."""
    agents = [
        main(0, 100),
        *(
            sub(f"a{k}", 10 * k, 10 * k + 9, label="probe:tests", workflow="wf_1", slot="probe:tests", attempt=k,
                attempts=2)
            for k in (1, 2)
        ),
    ]  # fmt: skip
    return make_trace(agents, [ev("main", 0, 5, "spawn", target="wf_1"), *events])


def test_workflow_attempts_are_read_from_their_slot_and_attempt_not_their_label():
    edits = [ev(f"a{k}", 0, 10 * k + 1, "file_write", tool="Edit", files=["a.py"]) for k in (1, 2)]
    [hit] = sig.checkpoint_free_retry(_workflow_slot(*edits))
    assert "attempt 2 of 'probe:tests' (a2) redid 1 of the 1 file actions" in hit.explanation and explained([hit])
    # two attempts of one slot reading a file are one reader, not duplicated investigation
    reads = [ev(f"a{k}", 0, 10 * k + 1, tool="Read", files=["a.py"]) for k in (1, 2)]
    assert sig.duplicated_reads(_workflow_slot(*reads)) == []
    # the spawn names the workflow, whose agents ran: not a spawn that produced no sub-agent
    assert sig.fanout_budget(_workflow_slot(*reads)) == []


def test_a_cut_off_fan_out_counts_the_attempts_its_retries_replaced():
    agents = [main(0)]  # its log ends at its last event, before the run
    for slot in ("tests", "docs", "design"):
        agents += [
            sub(f"{slot}1", 10, 200, status="stalled", workflow="wf_1", slot=slot, attempt=1, attempts=2),
            sub(f"{slot}2", 200, 300, status="killed", workflow="wf_1", slot=slot, attempt=2, attempts=2),
        ]
    events = [ev("main", 0, 5, "spawn", target="wf_1"), ev("main", 1, 100, tool="Bash", text="pytest -q")]
    [hit] = sig.fanout_budget(make_trace(agents, events))
    assert "3 of the 6 sub-agents it started (workflow wf_1)" in hit.explanation
    assert "3 earlier attempts had stalled and been retried" in hit.explanation


def test_sub_agents_run_one_after_another_only_count_before_the_main_agent_implements():
    serial = [main(0, 100), sub("w0", 10, 20), sub("w1", 20, 30)]
    [hit] = sig.serial_subagents(make_trace(serial, [ev("main", 0, 40, "file_write", tool="Edit", files=["a.py"])]))
    assert "2 sub-agents ran one after another" in hit.explanation
    assert "before the main agent's first write (a.py at 10:00:40)" in hit.explanation and explained([hit])
    # the main agent edited first, then had its fix checked by one child after another: no serial investigation
    verifiers = [ev("main", 0, 5, "file_write", tool="Edit", files=["a.py"])]
    assert sig.serial_subagents(make_trace(serial, verifiers)) == []
    [hit] = sig.serial_subagents(make_trace(serial, []))
    assert hit.explanation.endswith("and the main agent wrote no file")


def test_verification_order_counts_the_child_writes_the_final_patch_delivers():
    agents = [main(0, 100), sub("w0", 10, 50)]
    events = [
        ev("w0", 0, 30, "file_write", tool="Write", files=["/ws/scratch_check.py"]),  # a probe the patch lacks
        ev("main", 1, 60, "file_write", tool="Edit", files=["/ws/src/fix.py"]),
        ev("main", 2, 100, "message", tool="assistant", text="Done."),
    ]
    delivered = read_patch(PATCH[:7], source="cell/model.patch")  # src/fix.py only
    assert sig.verification_order(make_trace(agents, events, delivered)) == []
    # without a known patch every child write counts: closed with no test after it
    [hit] = sig.verification_order(make_trace(agents, events))
    assert hit.modes == ("unverified-global-completion",) and "closed at 10:01:40" in hit.explanation
    # a child's write of a delivered file, with no test after it: the integrated result was never verified
    events.append(ev("w0", 1, 40, "file_write", tool="Edit", files=["/ws/src/fix.py"]))
    [hit] = sig.verification_order(make_trace(agents, events, delivered))
    assert "/ws/src/fix.py (a file of the final patch) at 10:00:40" in hit.explanation and explained([hit])


def test_unisolated_writes_give_way_to_a_more_specific_write_hit_on_the_run():
    two = [main(0, 100), sub("w0", 10, 60), sub("w1", 20, 70)]
    apart = [ev("w0", 0, 25, "file_write", files=["a.py"]), ev("w1", 0, 30, "file_write", files=["b.py"])]
    assert [h.detector for h in sig.detect(make_trace(two, apart)).hits] == ["unisolated_workspace_writes"]
    same = [ev("w0", 0, 25, "file_write", files=["a.py"]), ev("w1", 0, 30, "file_write", files=["a.py"])]
    assert [h.detector for h in sig.detect(make_trace(two, same)).hits] == ["same_file_collision"]
    # a sub-agent's probe that leaked into the patch, while the main agent and another sub-agent wrote elsewhere
    leaked = _leak(ev("main", 1, 35, "file_write", tool="Edit", files=["/repo/src/other.py"]))
    assert sig.unisolated_workspace_writes(leaked)  # the rule alone fires
    assert {h.detector for h in sig.detect(leaked).hits} == {"artifact_leakage"}


# -- duplicated investigation --------------------------------------------------------------------------


def test_duplicated_reads_count_only_before_the_first_write():
    agents = [main(0, 100), sub("w0", 1, 50), sub("w1", 1, 50)]
    reads = [ev("w0", 0, 20, tool="Read", files=["a.py"]), ev("w1", 0, 21, tool="Read", files=["a.py"])]
    [hit] = sig.duplicated_reads(make_trace(agents, reads))
    assert "and nobody wrote a file" in hit.explanation and explained([hit])
    written_first = [ev("main", 0, 5, "file_write", tool="Edit", files=["a.py"]), *reads]
    assert sig.duplicated_reads(make_trace(agents, written_first)) == []


# -- artifact leakage --------------------------------------------------------------------------------


PATCH = [
    "diff --git a/src/fix.py b/src/fix.py",
    "index 1..2 100644",
    "--- a/src/fix.py",
    "+++ b/src/fix.py",
    "@@ -1 +1 @@",
    "-a",
    "+b",
    "diff --git a/probe/p1.py b/probe/p1.py",
    "new file mode 100644",
    "--- /dev/null",
    "+++ b/probe/p1.py",
    "@@ -0,0 +1 @@",
    "+print(1)",
    "diff --git a/tests/test_new.py b/tests/test_new.py",
    "new file mode 100644",
]


def _leak(*extra: Event, patch: list[str] = PATCH) -> sig.Trace:
    agents = [main(0, 100), sub("w0", 10, 60), sub("w1", 10, 60)]
    events = [
        ev("main", 0, 5, "file_write", tool="Edit", files=["/repo/src/fix.py"]),
        ev(
            "w0",
            0,
            20,
            tool="Bash",
            text='{"command": "mkdir -p /ws/probe && cat > /ws/probe/p1.py <<\'EOF\'\\nx > 1\\nEOF"}',
        ),
        ev("w0", 1, 21, tool="Bash", text='{"command": "python3 /ws/probe/p1.py 2>&1 | tail"}'),
        ev("w1", 0, 30, "file_write", tool="Write", files=["/ws/tests/test_new.py"]),  # a deliverable: kept
        *extra,
    ]
    return make_trace(agents, events, read_patch(patch, source="cell/model.patch"))


def test_a_probe_a_sub_agent_wrote_into_the_final_patch_is_artifact_leakage():
    [hit] = sig.artifact_leakage(_leak())
    assert hit.modes == ("artifact-leakage",)
    assert "1 file(s)" in hit.explanation and "probe/p1.py (w0, run as a script, named as scratch)" in hit.explanation
    assert "tests/test_new.py" not in hit.explanation  # not run, not named as scratch: a deliverable
    write, header = hit.evidence
    assert (write.agent, write.seq, write.note) == ("w0", 0, "w0 writes /ws/probe/p1.py through the shell")
    assert (header.source, header.line, header.file) == ("cell/model.patch", 8, "probe/p1.py")
    assert explained([hit])


@pytest.mark.parametrize(
    "owned",
    [
        ev("main", 1, 70, tool="Read", files=["/ws/probe/p1.py"]),  # the main agent read it
        ev("main", 1, 70, tool="Bash", text='{"command": "python probe/p1.py"}'),  # ran it: named it
        ev("main", 1, 70, "file_write", tool="Edit", files=["probe/p1.py"]),  # owns it
    ],
)
def test_a_file_the_main_agent_read_named_or_wrote_is_not_leaked(owned):
    assert sig.artifact_leakage(_leak(owned)) == []


def test_no_patch_or_no_new_file_means_no_leakage_claim():
    assert (
        sig.artifact_leakage(make_trace([main(0, 9), sub("w0", 1, 5)], [ev("w0", 0, 2, "file_write", files=["x"])]))
        == []
    )
    modified = [line for line in PATCH if not line.startswith("new file")]
    assert sig.artifact_leakage(_leak(patch=modified)) == []


def test_build_output_written_by_a_sub_agent_is_leakage():
    patch = [
        "diff --git a/pkg/__pycache__/m.cpython-311.pyc b/pkg/__pycache__/m.cpython-311.pyc",
        "new file mode 100644",
    ]
    pyc = ev("w0", 5, 40, "file_write", tool="Write", files=["/ws/pkg/__pycache__/m.cpython-311.pyc"])
    [hit] = sig.artifact_leakage(_leak(pyc, patch=patch))
    assert "build output or cache" in hit.explanation


# -- reading commands and patches ----------------------------------------------------------------------


def test_shell_commands_are_read_for_the_files_they_write_and_the_scripts_they_run():
    command = (
        '{"command": "cd /w && cat > a.py <<\'EOF\'\\nif x > y: print(1) >> z\\nEOF\\n'
        'python3 -u a.py 2>&1 | tee run.log > /dev/null"}'
    )
    assert shell_effects(command) == (("a.py", "run.log"), ("a.py",))  # not the heredoc's `> y`, `>> z`
    assert shell_effects("./build.sh && node scripts/x.js && python -m pytest -q") == (
        (),
        ("./build.sh", "scripts/x.js"),
    )
    assert shell_effects("ls -la") == ((), ())


def test_a_patch_lists_its_files_with_their_first_line_and_whether_it_creates_them():
    assert read_patch(PATCH, source="p").files == (
        PatchedFile("src/fix.py", 1, False),
        PatchedFile("probe/p1.py", 8, True),
        PatchedFile("tests/test_new.py", 14, True),
    )
    plain = ["--- /dev/null", "+++ b/new.txt", "@@ -0,0 +1 @@", "+x", "--- a/old.txt", "+++ b/old.txt"]
    assert read_patch(plain, source="p") == Patch(
        "p", (PatchedFile("new.txt", 1, True), PatchedFile("old.txt", 5, False))
    )
    assert read_patch([], source="p").files == ()


def test_every_detector_explains_its_hits_and_says_what_would_make_them_wrong():
    """Each rule's smallest firing trace: every hit carries words for each of its events and a `wrong_if`."""
    two = [main(0, 100), sub("w0", 10, 60), sub("w1", 20, 70)]
    cases = {
        "same_file_collision": make_trace(
            two, [ev("w0", 0, 15, "file_write", files=["a.py"]), ev("w1", 0, 30, "file_write", files=["a.py"])]
        ),
        "unisolated_workspace_writes": make_trace(
            two, [ev("w0", 0, 25, "file_write", files=["a.py"]), ev("w1", 0, 30, "file_write", files=["b.py"])]
        ),
        "serial_subagents": make_trace([main(0, 99), sub("w0", 1, 10), sub("w1", 10, 20)], []),
        "verification_order": make_trace(
            two, [ev("w0", 0, 30, "file_write", files=["a.py"]), ev("main", 9, 100, "message", tool="assistant")]
        ),
        "fanout_budget": make_trace(two, [ev("main", 0, 5, "spawn", target="gone")]),
    }
    for detector, trace in cases.items():
        assert explained(sig.DETECTORS[detector](trace)), detector
