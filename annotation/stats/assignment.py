"""Balanced double assignment (ORM-free).

Each run goes to exactly two of three annotators. The three annotator pairs each get a third
of the runs, and the split is balanced inside every stratum (agent system × benchmark):
within a stratum the runs are shuffled with a seeded RNG and dealt to the pairs in turn;
the dealer's starting pair carries over from stratum to stratum, so the remainders of small
strata spread evenly too. Pair counts then differ by at most 1 overall and within a stratum.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Sequence
from itertools import combinations


def annotator_pairs(annotators: Sequence[int]) -> list[tuple[int, int]]:
    if len(annotators) != 3 or len(set(annotators)) != 3:
        raise ValueError("balanced double assignment needs exactly three distinct annotators")
    return list(combinations(sorted(annotators), 2))


def assign_pairs(
    runs: Sequence[tuple[int, Hashable]], annotators: Sequence[int], *, seed: int = 0
) -> dict[int, tuple[int, int]]:
    """runs: (run id, stratum). Returns run id → (annotator for slot 1, annotator for slot 2)."""
    pairs = annotator_pairs(annotators)
    strata: dict[Hashable, list[int]] = {}
    for run_id, stratum in runs:
        strata.setdefault(stratum, []).append(run_id)
    result: dict[int, tuple[int, int]] = {}
    dealt = 0
    for stratum in sorted(strata, key=repr):
        members = sorted(strata[stratum])
        random.Random(f"{seed}:{stratum!r}").shuffle(members)
        for run_id in members:
            result[run_id] = pairs[dealt % 3]
            dealt += 1
    return result


def pilot_sample(run_ids: Sequence[int], *, size: int = 50, seed: int = 0) -> list[int]:
    """A deterministic sample of runs for pilot open coding."""
    ids = sorted(run_ids)
    random.Random(f"pilot:{seed}").shuffle(ids)
    return sorted(ids[:size])
