"""Inter-annotator agreement on multi-label codings (pure; definitions in docs/agreement.md).

Input is plain data: a taxonomy (mode → subcategory, category) and codings
(item, annotator, set of mode keys). A picked mode implies its subcategory and category.
The code universe of a level is every code of that level in the taxonomy, not only the
codes seen. Cohen's κ comes from scikit-learn; an undefined statistic is None, never a
number (κ is undefined exactly when p_e = 1; α when the expected disagreement is 0).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations

from sklearn.metrics import cohen_kappa_score

LEVELS = ("mode", "subcategory", "category")


class AgreementInputError(ValueError):
    pass


@dataclass(frozen=True)
class Taxonomy:
    modes: dict[str, tuple[str, str]]  # mode key -> (subcategory key, category key)

    def universe(self, level: str) -> list[str]:
        if level == "mode":
            return sorted(self.modes)
        index = 0 if level == "subcategory" else 1
        return sorted({parents[index] for parents in self.modes.values()})

    def lift(self, codes: Iterable[str], level: str) -> frozenset[str]:
        if level == "mode":
            return frozenset(codes)
        index = 0 if level == "subcategory" else 1
        return frozenset(self.modes[code][index] for code in codes)


@dataclass(frozen=True)
class Coding:
    item: str
    annotator: str
    codes: frozenset[str]


def build_index(taxonomy: Taxonomy, codings: Sequence[Coding]) -> dict[str, dict[str, frozenset[str]]]:
    """item -> annotator -> modes; rejects unknown modes and duplicate (item, annotator)."""
    index: dict[str, dict[str, frozenset[str]]] = {}
    for number, coding in enumerate(codings):
        unknown = sorted(set(coding.codes) - set(taxonomy.modes))
        if unknown:
            raise AgreementInputError(f"annotations[{number}]: unknown mode(s) {', '.join(unknown)}")
        per_item = index.setdefault(coding.item, {})
        if coding.annotator in per_item:
            raise AgreementInputError(
                f"annotations[{number}]: item {coding.item!r} is coded twice by {coding.annotator!r}"
            )
        per_item[coding.annotator] = frozenset(coding.codes)
    return index


# -- Cohen's kappa ------------------------------------------------------------------------


def _degenerate(x: Sequence[int], y: Sequence[int]) -> bool:
    """p_e = 1 exactly when both raters put every decision in the same single category."""
    sx, sy, n = sum(x), sum(y), len(x)
    return n == 0 or (sx == sy and sx in (0, n))


def cohen_kappa(x: Sequence[int], y: Sequence[int]) -> float | None:
    if _degenerate(x, y):
        return None
    return float(cohen_kappa_score(x, y, labels=[0, 1]))


def kappa_from_counts(n11: int, n10: int, n01: int, n00: int) -> float | None:
    """Cohen's κ of a 2×2 table (used by the bootstrap; equals scikit-learn's value)."""
    n = n11 + n10 + n01 + n00
    if n == 0:
        return None
    p_o = (n11 + n00) / n
    pa, pb = (n11 + n10) / n, (n11 + n01) / n
    p_e = pa * pb + (1 - pa) * (1 - pb)
    a1, b1 = n11 + n10, n11 + n01
    if a1 == b1 and a1 in (0, n):
        return None
    return (p_o - p_e) / (1 - p_e)


# -- Krippendorff's alpha -----------------------------------------------------------------


def masi_distance(a: frozenset[str], b: frozenset[str]) -> float:
    """1 − Jaccard × monotonicity (Passonneau 2006); d(∅, ∅) = 0."""
    if a == b:
        return 0.0
    union = a | b
    intersection = a & b
    jaccard = len(intersection) / len(union)
    if a <= b or b <= a:
        monotonicity = 2 / 3
    elif intersection:
        monotonicity = 1 / 3
    else:
        monotonicity = 0.0
    return 1.0 - jaccard * monotonicity


def alpha_masi(units: Sequence[Sequence[frozenset[str]]]) -> float | None:
    """Krippendorff's α with MASI distance; units with fewer than two values are ignored."""
    pairable = [list(values) for values in units if len(values) >= 2]
    n = sum(len(values) for values in pairable)
    if n < 2:
        return None
    observed = 0.0
    for values in pairable:
        m = len(values)
        within = sum(masi_distance(a, b) for a, b in combinations(values, 2)) * 2
        observed += within / (m - 1)
    observed /= n
    freq = Counter(value for values in pairable for value in values)
    distinct = list(freq)
    expected = 0.0
    for i, s in enumerate(distinct):
        for t in distinct[i + 1 :]:
            expected += 2 * freq[s] * freq[t] * masi_distance(s, t)
    expected /= n * (n - 1)
    if expected == 0:
        return None
    return 1.0 - observed / expected


def alpha_nominal_binary(pairs: Sequence[tuple[int, int]]) -> float | None:
    """Krippendorff's nominal α for units of two binary values each."""
    n = 2 * len(pairs)
    if n < 2:
        return None
    disagreements = sum(1 for x, y in pairs if x != y)
    ones = sum(x + y for x, y in pairs)
    zeros = n - ones
    observed = 2 * disagreements / n  # o_01 + o_10 over n
    expected = 2 * ones * zeros / (n * (n - 1))
    if expected == 0:
        return None
    return 1.0 - observed / expected


def fleiss_kappa_binary(pairs: Sequence[tuple[int, int]]) -> float | None:
    """Fleiss' κ for units rated by two raters into {0, 1}."""
    units = len(pairs)
    if units == 0:
        return None
    agree = sum(1 for x, y in pairs if x == y)
    p_bar = agree / units  # P_i is 1 when both agree, 0 otherwise (two raters)
    p1 = sum(x + y for x, y in pairs) / (2 * units)
    p_e = p1 * p1 + (1 - p1) * (1 - p1)
    if p_e == 1:
        return None
    return (p_bar - p_e) / (1 - p_e)


# -- the report -----------------------------------------------------------------------------


def _mean(values: Iterable[float | None]) -> float | None:
    defined = [v for v in values if v is not None]
    return sum(defined) / len(defined) if defined else None


def pair_level(taxonomy: Taxonomy, index, a: str, b: str, level: str) -> dict:
    universe = taxonomy.universe(level)
    shared = sorted(item for item, coders in index.items() if a in coders and b in coders)
    sets_a = [taxonomy.lift(index[item][a], level) for item in shared]
    sets_b = [taxonomy.lift(index[item][b], level) for item in shared]
    x = [int(code in s) for s in sets_a for code in universe]
    y = [int(code in s) for s in sets_b for code in universe]
    per_code = {}
    for code in universe:
        per_code[code] = cohen_kappa([int(code in s) for s in sets_a], [int(code in s) for s in sets_b])
    defined = [k for k in per_code.values() if k is not None]
    return {
        "n_shared_items": len(shared),
        "pooled": {"kappa": cohen_kappa(x, y) if shared else None},
        "macro": {
            "kappa": _mean(defined) if shared else None,
            "n_codes_defined": len(defined) if shared else 0,
            "n_codes_undefined": (len(universe) - len(defined)) if shared else len(universe),
        },
        "per_code_kappa": per_code if shared else dict.fromkeys(universe),
        "alpha_masi": {"alpha": alpha_masi(list(zip(sets_a, sets_b, strict=True))) if shared else None},
    }


def agreement_report(taxonomy: Taxonomy, codings: Sequence[Coding]) -> dict:
    index = build_index(taxonomy, codings)
    annotators = sorted({c.annotator for c in codings})
    pairs = [
        {"annotators": [a, b], "levels": {level: pair_level(taxonomy, index, a, b, level) for level in LEVELS}}
        for a, b in combinations(annotators, 2)
    ]
    overall = {}
    for level in LEVELS:
        rows = [p["levels"][level] for p in pairs]
        defined = [r for r in rows if r["pooled"]["kappa"] is not None]
        weight = sum(r["n_shared_items"] for r in defined)
        universe = taxonomy.universe(level)
        doubles = [coders for coders in index.values() if len(coders) == 2]
        binary = [
            (int(code in taxonomy.lift(v1, level)), int(code in taxonomy.lift(v2, level)))
            for coders in doubles
            for v1, v2 in [tuple(coders.values())]
            for code in universe
        ]
        overall[level] = {
            "mean_pairwise_pooled_kappa": _mean(r["pooled"]["kappa"] for r in defined),
            "item_weighted_mean_pairwise_pooled_kappa": (
                sum(r["pooled"]["kappa"] * r["n_shared_items"] for r in defined) / weight if weight else None
            ),
            "mean_pairwise_macro_kappa": _mean(r["macro"]["kappa"] for r in rows if r["n_shared_items"]),
            "n_pairs_defined": len(defined),
            "fleiss_kappa_pooled": fleiss_kappa_binary(binary),
            "alpha_nominal_pooled_binary": alpha_nominal_binary(binary),
            "alpha_masi_all_annotators": alpha_masi(
                [[taxonomy.lift(v, level) for v in coders.values()] for coders in index.values()]
            ),
        }
    return {"pairs": pairs, "overall": overall}


def headline_bootstrap(
    taxonomy: Taxonomy,
    codings: Sequence[Coding],
    *,
    level: str = "mode",
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict:
    """Percentile bootstrap over items of the mean pairwise pooled κ (the headline)."""
    index = build_index(taxonomy, codings)
    universe = taxonomy.universe(level)
    annotators = sorted({c.annotator for c in codings})
    pair_list = list(combinations(annotators, 2))
    items = sorted(item for item, coders in index.items() if len(coders) >= 2)
    # Per item and pair: the item's 2×2 counts over the universe.
    counts: dict[str, dict[tuple[str, str], tuple[int, int, int, int]]] = {}
    for item in items:
        coders = index[item]
        counts[item] = {}
        for a, b in pair_list:
            if a in coders and b in coders:
                sa, sb = taxonomy.lift(coders[a], level), taxonomy.lift(coders[b], level)
                n11 = sum(1 for c in universe if c in sa and c in sb)
                n10 = sum(1 for c in universe if c in sa and c not in sb)
                n01 = sum(1 for c in universe if c not in sa and c in sb)
                counts[item][(a, b)] = (n11, n10, n01, len(universe) - n11 - n10 - n01)

    def headline(sample: Sequence[str]) -> float | None:
        totals = {pair: [0, 0, 0, 0] for pair in pair_list}
        seen = dict.fromkeys(pair_list, 0)
        for item in sample:
            for pair, table in counts[item].items():
                seen[pair] += 1
                for k in range(4):
                    totals[pair][k] += table[k]
        return _mean(kappa_from_counts(*totals[p]) for p in pair_list if seen[p])

    point = headline(items)
    rng = random.Random(seed)
    estimates = []
    for _ in range(n_resamples if items else 0):
        value = headline([items[rng.randrange(len(items))] for _ in items])
        if value is not None:
            estimates.append(value)
    estimates.sort()
    low = high = None
    if estimates:
        tail = (1 - confidence) / 2
        low = estimates[int(tail * (len(estimates) - 1))]
        high = estimates[int((1 - tail) * (len(estimates) - 1))]
    return {
        "level": level,
        "kappa": point,
        "ci_low": low,
        "ci_high": high,
        "confidence": confidence,
        "n_resamples": n_resamples,
        "n_items": len(items),
    }


def taxonomy_from_json(data: dict) -> Taxonomy:
    try:
        modes = data["taxonomy"]["modes"]
    except (KeyError, TypeError) as exc:
        raise AgreementInputError("missing taxonomy.modes") from exc
    if not isinstance(modes, dict) or not modes:
        raise AgreementInputError("taxonomy.modes must be a non-empty object")
    out = {}
    for key, parents in modes.items():
        if not isinstance(parents, dict) or not parents.get("subcategory") or not parents.get("category"):
            raise AgreementInputError(f"taxonomy.modes.{key}: needs 'subcategory' and 'category'")
        out[str(key)] = (str(parents["subcategory"]), str(parents["category"]))
    return Taxonomy(out)


def codings_from_json(data: dict) -> list[Coding]:
    rows = data.get("annotations") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise AgreementInputError("annotations must be a list")
    out = []
    for number, row in enumerate(rows):
        if not isinstance(row, dict) or "item" not in row or "annotator" not in row:
            raise AgreementInputError(f"annotations[{number}]: needs 'item' and 'annotator'")
        codes = row.get("codes", [])
        if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
            raise AgreementInputError(f"annotations[{number}].codes: must be a list of mode keys")
        out.append(Coding(item=str(row["item"]), annotator=str(row["annotator"]), codes=frozenset(codes)))
    return out
