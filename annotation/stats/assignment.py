"""Balanced double assignment and queue order (ORM-free).

Each run goes to exactly two of three annotators, so to one of the three annotator *pairs*. A run
goes to the pair that has the fewest runs in the run's stratum (agent system × benchmark ×
difficulty), then the fewest runs overall, ties broken in an order drawn from the study's seed for
that stratum. The dealer starts from the counts the study already has (`already`), so runs added
later — even one at a time — continue the balance instead of restarting it: pair counts differ by
at most 1 overall and within every stratum, however the runs arrive.

Queue order: each annotator's new runs join the end of their queue in an order drawn from the seed
and the annotator, so two annotators do not work through their shared runs in the same order.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from itertools import combinations

Pair = tuple[int, int]


def annotator_pairs(annotators: Sequence[int]) -> list[Pair]:
    if len(annotators) != 3 or len(set(annotators)) != 3:
        raise ValueError("balanced double assignment needs exactly three distinct annotators")
    return list(combinations(sorted(annotators), 2))


def assign_pairs(
    runs: Sequence[tuple[int, Hashable]],
    annotators: Sequence[int],
    *,
    seed: int = 0,
    already: Mapping[tuple[Hashable, Pair], int] | None = None,
) -> dict[int, Pair]:
    """runs: (run id, stratum) to assign; already: (stratum, pair) → runs the study has given that
    pair so far. Returns run id → (annotator for slot 1, annotator for slot 2)."""
    pairs = annotator_pairs(annotators)
    in_stratum: Counter = Counter({key: n for key, n in (already or {}).items() if key[1] in pairs})
    overall: Counter = Counter()
    for (_, pair), n in in_stratum.items():
        overall[pair] += n
    strata: dict[Hashable, list[int]] = {}
    for run_id, stratum in runs:
        strata.setdefault(stratum, []).append(run_id)
    result: dict[int, Pair] = {}
    for stratum in sorted(strata, key=repr):
        members = sorted(strata[stratum])
        rng = random.Random(f"{seed}:{stratum!r}")
        rng.shuffle(members)
        tie_order = {pair: i for i, pair in enumerate(rng.sample(pairs, len(pairs)))}
        for run_id in members:
            pair = min(pairs, key=lambda p: (in_stratum[(stratum, p)], overall[p], tie_order[p]))
            result[run_id] = pair
            in_stratum[(stratum, pair)] += 1
            overall[pair] += 1
    return result


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
