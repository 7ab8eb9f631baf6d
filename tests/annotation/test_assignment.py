"""Balanced assignment of each run to k of N annotators (pure)."""

from __future__ import annotations

from collections import Counter

import pytest

from annotation.assignment import assign_groups, balance, coder_groups, pilot_sample


def _paper_runs():
    # 1,062 concurrent runs over 3 agents × 5 benchmarks with uneven stratum sizes.
    sizes = {"SWE": 100, "Repo": 64, "NL2": 70, "Prog": 60, "Loops": 60}
    runs, run_id = [], 0
    for agent in ("Codex", "Claude", "Kimi"):
        for bench, n in sizes.items():
            for _ in range(n):
                runs.append((run_id, (agent, bench)))
                run_id += 1
    return runs


def test_paper_scale_is_balanced_per_pair_annotator_and_stratum():
    runs = _paper_runs()
    plan = assign_groups(runs, [7, 8, 9], seed=1)
    assert len(plan) == 1062
    pairs = Counter(plan.values())
    assert sorted(pairs.values()) == [354, 354, 354]
    per_annotator = Counter(a for pair in plan.values() for a in pair)
    assert set(per_annotator.values()) == {708}
    strata = {}
    for run_id, stratum in runs:
        strata.setdefault(stratum, Counter())[plan[run_id]] += 1
    for counts in strata.values():
        assert max(counts.values()) - min(counts.values()) <= 1
        assert len(counts) == 3


def test_every_run_gets_two_distinct_annotators():
    plan = assign_groups([(i, "s") for i in range(10)], [1, 2, 3])
    assert all(len(set(pair)) == 2 for pair in plan.values())


def test_deterministic_from_the_seed():
    runs = _paper_runs()
    assert assign_groups(runs, [1, 2, 3], seed=5) == assign_groups(list(reversed(runs)), [3, 1, 2], seed=5)
    assert assign_groups(runs, [1, 2, 3], seed=5) != assign_groups(runs, [1, 2, 3], seed=6)


def test_small_strata_remainders_spread():
    runs = [(i, f"s{i}") for i in range(9)]  # nine strata of one run each
    assert sorted(Counter(assign_groups(runs, [1, 2, 3]).values()).values()) == [3, 3, 3]


def test_coders_per_run_between_two_and_the_annotators():
    with pytest.raises(ValueError, match="2 ≤ k"):
        coder_groups([1, 2], 3)
    with pytest.raises(ValueError, match="2 ≤ k"):
        coder_groups([1, 2, 3], 1)
    with pytest.raises(ValueError, match="distinct"):
        coder_groups([1, 1, 2], 2)
    assert coder_groups([3, 1, 2, 4], 3) == [(1, 2, 3), (1, 2, 4), (1, 3, 4), (2, 3, 4)]


def test_four_annotators_three_per_run_at_paper_scale():
    runs = _paper_runs()
    plan = assign_groups(runs, [1, 2, 3, 4], k=3, seed=2)
    assert all(len(set(group)) == 3 for group in plan.values())
    report = balance(plan, dict(runs))
    assert report["groups"]["spread"] <= 1 and report["worst_stratum_group_spread"] <= 1
    assert report["annotators"]["spread"] <= 1
    assert report["pairs"]["spread"] <= 2  # 1,062 = 4·265 + 2: two triples of four always share a pair


def test_five_annotators_two_per_run_keeps_every_pair_within_one():
    runs = _paper_runs()
    report = balance(assign_groups(runs, [1, 2, 3, 4, 5], k=2, seed=0), dict(runs))
    assert len(report["pairs"]["counts"]) == 10
    assert report["pairs"]["spread"] <= 1 and report["annotators"]["spread"] <= 1
    assert report["worst_stratum_group_spread"] <= 1


def test_three_of_four_added_one_at_a_time():
    """Runs arriving one by one in three strata: after every arrival the coder groups are within 1
    (overall and per stratum), the annotators within 1, and after every fourth run each pair has
    co-coded exactly as often as every other."""
    already: Counter = Counter()
    plan: dict = {}
    strata = {}
    for run_id in range(48):
        strata[run_id] = f"s{run_id % 3}"
        step = assign_groups([(run_id, strata[run_id])], [1, 2, 3, 4], k=3, seed=9, already=already)
        plan.update(step)
        already[(strata[run_id], step[run_id])] += 1
        report = balance(plan, strata, annotators=[1, 2, 3, 4])
        assert report["groups"]["spread"] <= 1, run_id
        assert report["worst_stratum_group_spread"] <= 1, run_id
        assert report["annotators"]["spread"] <= 1, run_id
        assert report["pairs"]["spread"] <= 2, run_id
        if (run_id + 1) % 4 == 0:
            assert report["pairs"]["spread"] == 0, run_id


def test_pilot_sample():
    sample = pilot_sample(range(200), size=50, seed=3)
    assert len(sample) == 50 == len(set(sample)) and sample == pilot_sample(range(200), size=50, seed=3)


def test_runs_added_one_at_a_time_continue_the_balance():
    """Thirty runs of one stratum arriving one by one: each goes where the pair counts are lowest, so
    the three pairs end with ten each (the old dealer restarted at the first pair every time)."""
    already: Counter = Counter()
    for run_id in range(30):
        plan = assign_groups([(run_id, "s")], [1, 2, 3], seed=3, already=already)
        already[("s", plan[run_id])] += 1
    assert sorted(Counter(pair for (_, pair) in already.elements()).values()) == [10, 10, 10]


def test_a_new_stratum_keeps_the_overall_balance():
    already = Counter({("a", (1, 2)): 2, ("a", (1, 3)): 1, ("a", (2, 3)): 1})
    plan = assign_groups([(10, "b"), (11, "b")], [1, 2, 3], seed=0, already=already)
    assert (1, 2) not in plan.values()  # the pair that has most overall waits


def test_queue_order_is_reproducible_and_differs_between_annotators():
    from annotation.assignment import queue_order

    runs = list(range(20))
    first = queue_order(runs, seed=1, annotator="ann1", start=1)
    assert first == queue_order(list(reversed(runs)), seed=1, annotator="ann1", start=1)
    assert first != queue_order(runs, seed=1, annotator="ann2", start=1)
    assert sorted(first) == runs
