"""Balanced 2-of-3 assignment (pure)."""

from __future__ import annotations

from collections import Counter

import pytest

from annotation.stats.assignment import annotator_pairs, assign_pairs, pilot_sample


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
    plan = assign_pairs(runs, [7, 8, 9], seed=1)
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
    plan = assign_pairs([(i, "s") for i in range(10)], [1, 2, 3])
    assert all(len(set(pair)) == 2 for pair in plan.values())


def test_deterministic_from_the_seed():
    runs = _paper_runs()
    assert assign_pairs(runs, [1, 2, 3], seed=5) == assign_pairs(list(reversed(runs)), [3, 1, 2], seed=5)
    assert assign_pairs(runs, [1, 2, 3], seed=5) != assign_pairs(runs, [1, 2, 3], seed=6)


def test_small_strata_remainders_spread():
    runs = [(i, f"s{i}") for i in range(9)]  # nine strata of one run each
    assert sorted(Counter(assign_pairs(runs, [1, 2, 3]).values()).values()) == [3, 3, 3]


def test_needs_three_annotators():
    with pytest.raises(ValueError):
        annotator_pairs([1, 2])
    with pytest.raises(ValueError):
        annotator_pairs([1, 1, 2])


def test_pilot_sample():
    sample = pilot_sample(range(200), size=50, seed=3)
    assert len(sample) == 50 == len(set(sample)) and sample == pilot_sample(range(200), size=50, seed=3)


def test_runs_added_one_at_a_time_continue_the_balance():
    """Thirty runs of one stratum arriving one by one: each goes where the pair counts are lowest, so
    the three pairs end with ten each (the old dealer restarted at the first pair every time)."""
    already: Counter = Counter()
    for run_id in range(30):
        plan = assign_pairs([(run_id, "s")], [1, 2, 3], seed=3, already=already)
        already[("s", plan[run_id])] += 1
    assert sorted(Counter(pair for (_, pair) in already.elements()).values()) == [10, 10, 10]


def test_a_new_stratum_keeps_the_overall_balance():
    already = Counter({("a", (1, 2)): 2, ("a", (1, 3)): 1, ("a", (2, 3)): 1})
    plan = assign_pairs([(10, "b"), (11, "b")], [1, 2, 3], seed=0, already=already)
    assert (1, 2) not in plan.values()  # the pair that has most overall waits


def test_queue_order_is_reproducible_and_differs_between_annotators():
    from annotation.stats.assignment import queue_order

    runs = list(range(20))
    first = queue_order(runs, seed=1, annotator="ann1", start=1)
    assert first == queue_order(list(reversed(runs)), seed=1, annotator="ann1", start=1)
    assert first != queue_order(runs, seed=1, annotator="ann2", start=1)
    assert sorted(first) == runs
