"""The signature detectors on hand-built traces (pure: no database). Each rule of
docs/signatures.md fires on the smallest trace that shows it and stays silent on its near miss."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from trajectories import signatures as sig
from trajectories.signatures import Agent, Event, detect, make_trace, trace_from_rows

T0 = datetime(2026, 8, 1, 10, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def agent(aid: str, start: float | None = None, end: float | None = None, **extra) -> Agent:
    role = "main" if aid == "main" else "sub"
    parent = None if aid == "main" else "main"
    return Agent(
        aid, role, parent, started_at=None if start is None else at(start), ended_at=None if end is None else at(end),
        **extra,
    )  # fmt: skip


def event(aid: str, seq: int, seconds: float | None, kind: str = "tool_call", **extra) -> Event:
    files = tuple(extra.pop("files", ()))
    return Event(aid, seq, kind, None if seconds is None else at(seconds), files=files, **extra)


def workers(*windows: tuple[float, float], **extra) -> list[Agent]:
    return [agent(f"w{i}", s, e, **extra) for i, (s, e) in enumerate(windows)]


def names(hits) -> list[str]:
    return [h.detector for h in hits]


# -- same-file collision -----------------------------------------------------------------------


def test_a_write_over_a_live_agents_write_is_a_collision_with_both_events():
    trace = make_trace(
        [agent("main", 0, 100), *workers((10, 60), (20, 70))],
        [event("w0", 0, 15, "file_write", files=["src/a.py"]), event("w1", 3, 30, "file_write", files=["./src/a.py"])],
    )
    [hit] = sig.same_file_collision(trace)
    assert hit.modes[0] == "same-file-collision" and "final-tree-overwrite" in hit.modes
    assert [(e.agent, e.seq, e.file) for e in hit.evidence] == [("w0", 0, "src/a.py"), ("w1", 3, "src/a.py")]
    assert "w1 wrote src/a.py" in hit.explanation and "while w0 was still running" in hit.explanation


def test_a_write_after_the_earlier_writer_ended_is_no_collision():
    trace = make_trace(
        [agent("main", 0, 100), *workers((10, 20), (25, 70))],
        [event("w0", 0, 15, "file_write", files=["a.py"]), event("w1", 0, 30, "file_write", files=["a.py"])],
    )
    assert sig.same_file_collision(trace) == []


# -- unisolated workspace writes -----------------------------------------------------------------


def _two_writers(*extra_events: Event) -> sig.Trace:
    return make_trace(
        [agent("main", 0, 100), *workers((10, 60), (20, 70))],
        [
            event("w0", 1, 25, "file_write", files=["a.py"]),
            event("w1", 1, 30, "file_write", files=["b.py"]),
            *extra_events,
        ],
    )


def test_two_live_writers_in_one_workspace_are_unisolated():
    [hit] = sig.unisolated_workspace_writes(_two_writers())
    assert hit.modes == ("unisolated-workspace-writes", "cross-file-scope-collision")
    assert {(e.agent, e.file) for e in hit.evidence} == {("w0", "a.py"), ("w1", "b.py")}


def test_writes_outside_the_time_both_run_are_not_concurrent():
    trace = make_trace(
        [agent("main", 0, 100), *workers((10, 60), (20, 70))],
        [event("w0", 1, 15, "file_write", files=["a.py"]), event("w1", 1, 65, "file_write", files=["b.py"])],
    )
    assert sig.unisolated_workspace_writes(trace) == []


def test_a_worktree_per_writer_is_isolation():
    isolated = _two_writers(
        event("w0", 0, 11, text="git worktree add ../wt0 -b w0"), event("w1", 0, 21, text="git checkout -b w1")
    )
    assert sig.unisolated_workspace_writes(isolated) == []
    half = _two_writers(event("w0", 0, 11, text="git worktree add ../wt0 -b w0"))
    assert sig.unisolated_workspace_writes(half) == []  # one unisolated writer alone cannot collide


# -- unfinished children -------------------------------------------------------------------------


def test_a_child_running_when_the_main_agent_says_done_is_early_termination():
    trace = make_trace(
        [agent("main", 0, 100), *workers((10, 150))],
        [event("main", 0, 0, "message", tool="user"), event("main", 1, 100, "message", tool="assistant", text="Done.")],
    )
    [hit] = sig.unfinished_children(trace)
    assert hit.modes == ("early-child-termination",)  # not late finalization: no unpromoted candidate is seen
    assert hit.evidence[0].agent == "main" and hit.evidence[0].seq == 1 and hit.evidence[1].agent == "w0"


def test_a_completed_child_never_joined_is_an_unused_result_when_joins_are_recorded():
    trace = make_trace(
        [agent("main", 0, 100), *workers((10, 50), (10, 60))],
        [
            event("main", 0, 50, "join", target="w0"),
            event("main", 1, 100, "message", tool="assistant"),
        ],
    )
    [hit] = sig.unfinished_children(trace)
    assert hit.modes == ("unused-completed-result",) and hit.evidence[0].agent == "w1"


def test_a_log_that_stops_has_no_finish_and_a_killed_child_is_early_termination():
    trace = make_trace(
        [agent("main", 0, 100), *workers((10, 150)), agent("w9", 10, 20, status="killed")],
        [event("main", 0, 5, "spawn", target="w0")],  # the log stops on a spawn: no closing message
    )
    [hit] = sig.unfinished_children(trace)
    assert hit.evidence[0].agent == "w9" and "killed" in hit.explanation


# -- parent idle/polling ----------------------------------------------------------------------


def test_a_parent_waiting_on_its_children_until_the_wait_times_out_is_a_blind_timeout_wait():
    trace = make_trace(
        [agent("main", 0, 200), *workers((10, 100))],
        [
            event("main", 0, 10, "spawn", target="w0"),
            event("main", 1, 11, "wait", tool="wait_agent", target="w0"),
            event("main", 2, 71, "tool_result", tool="wait_agent", text='{"status": {}, "timed_out": true}'),
        ],
    )
    [hit] = sig.parent_idle_wait(trace)
    assert hit.modes == ("blind-timeout-wait",)
    assert "waited 60 s on w0" in hit.explanation and "says it timed out" in hit.explanation
    assert [(e.agent, e.seq) for e in hit.evidence] == [("main", 1), ("main", 2)]
    assert "wait_agent" in hit.evidence[0].note and hit.wrong_if


def test_a_wait_that_ends_with_the_childs_result_or_with_own_work_is_not_blind():
    returned = [event("main", 0, 10, "spawn", target="w0"), event("main", 1, 100, "join", target="w0")]
    assert sig.parent_idle_wait(make_trace([agent("main", 0, 200), *workers((10, 100))], returned)) == []
    # the main agent's own commands and thinking while a child runs are never waiting, even if the child is killed
    busy = [event("main", k, 10 + 10 * k, text="edit", tool="Read") for k in range(10)]
    killed = [agent("w0", 10, 100, status="killed")]
    assert sig.parent_idle_wait(make_trace([agent("main", 0, 200), *killed], busy)) == []
    # blocked on it while it is killed: the wait ran out
    [hit] = sig.parent_idle_wait(make_trace([agent("main", 0, 200), *killed], returned))
    assert "w0 ended killed" in hit.explanation


def test_a_parent_without_events_is_not_called_idle():
    assert sig.parent_idle_wait(make_trace([agent("main"), *workers((10, 100))], [event("w0", 0, 20)])) == []


# -- fan-out -------------------------------------------------------------------------------


def test_a_spawn_without_a_child_is_a_refused_spawn():
    trace = make_trace([agent("main", 0, 10), *workers((1, 5))], [event("main", 4, 2, "spawn", target="gone")])
    [hit] = sig.fanout_budget(trace)
    assert hit.modes == ("fan-out-budget-exhaustion",) and hit.evidence[0].seq == 4


def test_tiny_briefs_and_a_dominant_child():
    kids = workers((1, 50), (1, 50), (1, 50))
    briefs = [event(k.id, 0, 1, "message", tool="user", text="fix it") for k in kids]
    [hit] = sig.fanout_budget(make_trace([agent("main", 0, 60), *kids], briefs))
    assert hit.modes == ("incomplete-child-brief",) and "3 of 3" in hit.explanation
    work = [event("w0", k, 2 + k * 0.1) for k in range(1, 9)] + [event("w1", 1, 3), event("w2", 1, 3)]
    [hit] = sig.fanout_budget(make_trace([agent("main", 0, 60), *kids], work))
    assert hit.modes == ("oversized-child-task",) and "w0 did 8 of the 10" in hit.explanation


# -- serial sub-agents, duplicated reads -------------------------------------------------------


def test_sub_agents_that_never_overlap_are_serial_and_touching_is_not_overlap():
    assert names(sig.serial_subagents(make_trace([agent("main", 0, 99), *workers((1, 10), (10, 20))], []))) == [
        "serial_subagents"
    ]
    assert sig.serial_subagents(make_trace([agent("main", 0, 99), *workers((1, 10), (9, 20))], [])) == []
    assert sig.serial_subagents(make_trace([agent("main", 0, 99), *workers((1, 10))], [])) == []


def test_two_sub_agents_reading_one_file_but_not_the_parent_or_a_retry():
    kids = [*workers((1, 10), (1, 10))]
    reads = [event("w0", 0, 2, tool="Read", files=["a.py"]), event("w1", 0, 3, tool="Read", files=["a.py"])]
    [hit] = sig.duplicated_reads(make_trace([agent("main", 0, 20), *kids], reads))
    assert [e.agent for e in hit.evidence] == ["w0", "w1"] and hit.evidence[0].file == "a.py"
    parent = [event("main", 0, 0, tool="Read", files=["a.py"]), reads[0]]
    assert sig.duplicated_reads(make_trace([agent("main", 0, 20), *kids], parent)) == []
    retried = [agent("w0", 1, 5, label="s · attempt 1 of 2"), agent("w1", 6, 10, label="s · attempt 2 of 2")]
    assert sig.duplicated_reads(make_trace([agent("main", 0, 20), *retried], reads)) == []


# -- retry -----------------------------------------------------------------------------------


def test_a_retry_redoing_the_first_attempts_actions_is_checkpoint_free():
    attempts = [agent("w0", 1, 5, label="fix · attempt 1 of 2"), agent("w1", 6, 10, label="fix · attempt 2 of 2")]
    first = [
        event("w0", 1, 2, tool="Read", files=["a.py"]),
        event("w0", 2, 3, "file_write", tool="Edit", files=["a.py"]),
    ]
    again = [
        event("w1", 1, 7, tool="Read", files=["a.py"]),
        event("w1", 2, 8, "file_write", tool="Edit", files=["a.py"]),
    ]
    [hit] = sig.checkpoint_free_retry(make_trace([agent("main", 0, 20), *attempts], first + again))
    # the write is work redone; re-reading a.py (every fresh attempt's orientation) is not counted
    assert hit.modes == ("checkpoint-free-retry",) and "redid 1 of the 1 file actions" in hit.explanation
    other = [event("w1", 1, 7, tool="Read", files=["b.py"])]
    assert sig.checkpoint_free_retry(make_trace([agent("main", 0, 20), *attempts], first + other)) == []


# -- verification order ------------------------------------------------------------------------


def _verified(*main_events: Event) -> sig.Trace:
    return make_trace(
        [agent("main", 0, 100), *workers((10, 50))],
        [event("w0", 0, 30, "file_write", files=["a.py"]), *main_events,
         event("main", 9, 100, "message", tool="assistant", text="Done.")],
    )  # fmt: skip


def test_tests_before_the_last_child_write_and_none_after_is_merge_after_verification():
    [hit] = sig.verification_order(_verified(event("main", 1, 20, text="python -m pytest -q")))
    assert hit.modes == ("merge-after-verification",)
    assert [(e.agent, e.seq) for e in hit.evidence] == [("main", 1), ("w0", 0)]
    assert sig.verification_order(_verified(event("main", 1, 60, text="pytest"))) == []
    [hit] = sig.verification_order(_verified())
    assert hit.modes == ("unverified-global-completion",)
    assert [(e.agent, e.seq) for e in hit.evidence] == [("w0", 0), ("main", 9)]


# -- bad input ---------------------------------------------------------------------------------


def test_empty_and_malformed_runs_give_no_hits_and_a_reason():
    assert detect(make_trace([], [])).reason == "no agents: nothing to examine"
    assert "no main agent" in detect(make_trace(workers((1, 2)), [event("w0", 0, 1)])).reason
    assert "no sub-agents" in detect(make_trace([agent("main", 0, 9)], [event("main", 0, 1)])).reason
    assert detect(make_trace([agent("main"), agent("w0")], [])).reason == "no events: nothing to examine"
    # untimed events, an interval that ends before it starts, empty file names, an unknown kind
    odd = make_trace(
        [agent("main", 50, 10), agent("w0", 30, 20), agent("w1")],
        [event("w0", 0, None, "file_write", files=["", "a.py"]), event("w1", 0, None, "??"),
         event("main", 0, None, "spawn", target="")],
    )  # fmt: skip
    found = detect(odd)
    assert found.hits == [] and found.reason == ""


def test_rows_become_a_trace_of_the_events_that_matter_in_time_order():
    trace = trace_from_rows(
        [{"external_id": "main", "role": "main", "position": 0}, {"external_id": "w0", "parent": "main"}],
        [
            {"agent": "w0", "seq": 0, "kind": "file_write", "timestamp": None, "files": ["a.py"]},
            {"agent": "w0", "seq": 1, "kind": "message", "tool": "user", "timestamp": at(2), "text": "x" * 5000},
            {"agent": "main", "seq": 1, "kind": "tool_call", "timestamp": at(5), "text": "cd x && pytest -q " * 9},
            {"agent": "main", "seq": 0, "kind": "tool_result", "timestamp": at(1), "text": "not kept"},
            {"agent": "main", "seq": 2, "kind": "tool_call", "timestamp": at(60), "text": "ls"},
        ],
    )
    # untimed events last; a tool result and a plain command are only work and counts, not events
    assert [(e.agent, e.seq) for e in trace.events] == [("w0", 1), ("main", 1), ("w0", 0)]
    assert len(trace.events[0].text) == sig.TEXT_CHARS and trace.events[1].text == "pytest"
    assert trace.waits == {}  # no stretch began with a spawn, wait or poll, nor ended with a join
    assert trace.actions == {"w0": 1, "main": 2} and trace.last["main"].seq == 2 and trace.n_events == 5
    assert trace.subs[0].role == "sub" and trace.subs[0].parent == "main"
