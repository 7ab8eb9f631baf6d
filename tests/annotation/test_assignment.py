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
