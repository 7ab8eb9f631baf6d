"""Balanced assignment of each run to k of a study's N annotators, and queue order (ORM-free).

Each run goes to k of the N annotators (2 ≤ k ≤ N): to one of the C(N, k) coder *groups* (for the
study's design, 2 of 3, the groups are the three annotator pairs). A run goes to the group with the
fewest runs in the run's stratum (agent system × benchmark × difficulty), then the fewest runs
overall; among groups still tied, to the one whose annotator pairs have co-coded least and whose
annotators have the fewest runs, then in an order drawn from the study's seed for that stratum. The
dealer starts from the counts the study already has (`already`), so runs added later — even one at a
time — continue the balance instead of restarting it: group counts differ by at most 1 overall and
within every stratum, however the runs arrive.

For k = 2 the groups are the pairs, so pair counts differ by at most 1. For k ≥ 3 a pair sits in
several groups, and at some counts a spread of 1 per pair is impossible (4 annotators, 3 per run,
after 2 runs: any two triples of four share a pair, which has 2 while another has 0); the dealer
then keeps the spread as small as the group balance allows (`balance` reports all three spreads).

Queue order: each annotator's new runs join the end of their queue in an order drawn from the seed
and the annotator, so two annotators do not work through their shared runs in the same order.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from itertools import combinations

Group = tuple[int, ...]


def coder_groups(annotators: Sequence[int], k: int) -> list[Group]:
    """Every set of k of the annotators, as sorted tuples."""
    if len(set(annotators)) != len(annotators):
        raise ValueError("the annotators must be distinct")
    if not 2 <= k <= len(annotators):
        raise ValueError(f"{k} coders per run needs 2 ≤ k ≤ the number of annotators ({len(annotators)})")
    return list(combinations(sorted(annotators), k))


def assign_groups(
    runs: Sequence[tuple[int, Hashable]],
    annotators: Sequence[int],
    *,
    k: int = 2,
    seed: int = 0,
    already: Mapping[tuple[Hashable, Group], int] | None = None,
) -> dict[int, Group]:
    """runs: (run id, stratum) to assign; already: (stratum, group) → runs the study has given that
    group so far (groups of annotators no longer in the study are ignored). Returns run id → the k
    annotators coding it, in slot order."""
    groups = coder_groups(annotators, k)
    known = set(groups)
    in_stratum: Counter = Counter({key: n for key, n in (already or {}).items() if key[1] in known})
    overall: Counter = Counter()
    pair_count: Counter = Counter()
    load: Counter = Counter()
    for (_, group), n in in_stratum.items():
        overall[group] += n
    for group, n in overall.items():
        for pair in combinations(group, 2):
            pair_count[pair] += n
        for annotator in group:
            load[annotator] += n
    strata: dict[Hashable, list[int]] = {}
    for run_id, stratum in runs:
        strata.setdefault(stratum, []).append(run_id)
    result: dict[int, Group] = {}
    for stratum in sorted(strata, key=repr):
        members = sorted(strata[stratum])
        rng = random.Random(f"{seed}:{stratum!r}")
        rng.shuffle(members)
        tie_order = {group: i for i, group in enumerate(rng.sample(groups, len(groups)))}

        def cost(group: Group, stratum=stratum, tie_order=tie_order) -> tuple:
            return (
                in_stratum[(stratum, group)],
                overall[group],
                sum(pair_count[pair] for pair in combinations(group, 2)),
                sum(load[annotator] for annotator in group),
                tie_order[group],
            )

        for run_id in members:
            group = min(groups, key=cost)
            result[run_id] = group
            in_stratum[(stratum, group)] += 1
            overall[group] += 1
            for pair in combinations(group, 2):
                pair_count[pair] += 1
            for annotator in group:
                load[annotator] += 1
    return result


def balance(
    coders: Mapping[int, Sequence[int]], strata: Mapping[int, Hashable], *, annotators: Sequence[int] | None = None
) -> dict:
    """How even an assignment is: run id → its coders, run id → its stratum (see `balance_of_counts`)."""
    counts = Counter((strata[run_id], tuple(sorted(group))) for run_id, group in coders.items())
    return balance_of_counts(counts, annotators=annotators)


def balance_of_counts(counts: Mapping[tuple[Hashable, Group], int], *, annotators: Sequence[int] | None = None) -> dict:
    """How even an assignment is, from (stratum, coder group) → runs: the spread (max − min) of runs per
    coder group, per annotator pair (runs both code) and per annotator, overall, and the largest group
    spread within a stratum, over the groups, pairs and annotators of `annotators` (default: every
    annotator with a run); one with no run counts as 0."""
    counts = {(stratum, tuple(sorted(group))): n for (stratum, group), n in counts.items() if n}
    if annotators is None:
        annotators = {a for _, group in counts for a in group}
    annotators = sorted(annotators)
    sizes = {len(group) for _, group in counts}
    k = max(sizes, default=2)
    groups: Counter = Counter()
    per_stratum: dict[Hashable, Counter] = {}
    for (stratum, group), n in counts.items():
        groups[group] += n
        per_stratum.setdefault(stratum, Counter())[group] += n
    pairs: Counter = Counter()
    loads: Counter = Counter()
    for group, n in groups.items():
        for pair in combinations(group, 2):
            pairs[pair] += n
        for a in group:
            loads[a] += n
    all_groups = list(combinations(annotators, k)) if len(annotators) >= k else []
    all_pairs = list(combinations(annotators, 2))

    def spread(counter: Counter, keys) -> int:
        values = [counter.get(key, 0) for key in keys]
        return max(values) - min(values) if values else 0

    return {
        "runs": sum(groups.values()),
        "coders_per_run": sorted(sizes),
        "groups": {"counts": dict(groups), "spread": spread(groups, all_groups)},
        "pairs": {"counts": dict(pairs), "spread": spread(pairs, all_pairs)},
        "annotators": {"counts": dict(loads), "spread": spread(loads, annotators)},
        "worst_stratum_group_spread": max((spread(c, all_groups) for c in per_stratum.values()), default=0),
    }


def queue_order(run_ids: Sequence[int], *, seed: int, annotator: str, start: int) -> list[int]:
    """The order in which an annotator's new runs join their queue (after position `start - 1`):
    shuffled from the study's seed, the annotator's username and where they join, so the same study
    gives the same queues in another database too."""
    ordered = sorted(run_ids)
    random.Random(f"queue:{seed}:{annotator}:{start}").shuffle(ordered)
    return ordered


def pilot_sample(run_ids: Sequence[int], *, size: int = 50, seed: int = 0) -> list[int]:
    """A deterministic sample of runs for pilot open coding."""
    ids = sorted(run_ids)
    random.Random(f"pilot:{seed}").shuffle(ids)
    return sorted(ids[:size])
