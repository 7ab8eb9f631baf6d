"""Inter-annotator agreement on multi-label codings (pure; definitions in docs/agreement.md).

Input is plain data: a taxonomy (mode → subcategory, category) and codings
(item, annotator, set of mode keys). A picked mode implies its subcategory and category.
The code universe of a level is every code of that level in the taxonomy, not only the
codes seen. Cohen's κ comes from scikit-learn; an undefined statistic is None, never a
number (κ is undefined exactly when p_e = 1; α when the expected disagreement is 0).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations

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
    # (mode, episodes) for the modes seen in more than one episode, or all of them; a mode of `codes`
    # not named here is one episode (a coding from a file of mode sets).
    counts: tuple[tuple[str, int], ...] = field(default=(), compare=False)

    def episodes(self, code: str) -> int:
        """How many episodes (instances) of the mode this coding recorded: 0 if it did not pick it."""
        if code not in self.codes:
            return 0
        return dict(self.counts).get(code, 1)


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
    # Imported here: scikit-learn (with SciPy) weighs ~80 MB, and every process that loads the
    # URL conf (imports, workers) would otherwise pay for it.
    from sklearn.metrics import cohen_kappa_score

    return float(cohen_kappa_score(x, y, labels=[0, 1]))


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


def alpha_nominal_binary(units: Sequence[Sequence[int]]) -> float | None:
    """Krippendorff's nominal α for units of binary values, two or more per unit (the krippendorff
    package; a unit may have fewer coders than another: the rest are missing values)."""
    pairable = [list(unit) for unit in units if len(unit) >= 2]
    if not pairable or len({value for unit in pairable for value in unit}) < 2:
        return None  # no expected disagreement: α is undefined
    import krippendorff
    import numpy as np

    width = max(len(unit) for unit in pairable)
    data = np.full((width, len(pairable)), np.nan)
    for column, unit in enumerate(pairable):
        data[: len(unit), column] = unit
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))


def alpha_interval(units: Sequence[Sequence[float]]) -> float | None:
    """Krippendorff's interval α (δ² = (a − b)²) for units of numbers, two or more per unit (the
    krippendorff package; units with fewer values than another have the rest missing)."""
    pairable = [list(unit) for unit in units if len(unit) >= 2]
    if not pairable or len({value for unit in pairable for value in unit}) < 2:
        return None  # every value the same: no expected disagreement, α is undefined
    import krippendorff
    import numpy as np

    width = max(len(unit) for unit in pairable)
    data = np.full((width, len(pairable)), np.nan)
    for column, unit in enumerate(pairable):
        data[: len(unit), column] = unit
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement="interval"))


def count_agreement(codings: Sequence[Coding]) -> dict:
    """Agreement on what Table 3 counts: how many episodes of each mode a run shows. A unit is a (run,
    mode) that at least one of the run's independent codings picked, in a run coded by two annotators or
    more; each coding's value is its number of episodes of the mode, 0 when it did not pick it.
    Krippendorff's interval α over those units, and, on the units every coding picked the mode (the
    mode agreed), how often the counts were identical. docs/agreement.md."""
    by_item: dict[str, list[Coding]] = {}
    for coding in codings:
        by_item.setdefault(coding.item, []).append(coding)
    units, agreed, identical, runs = [], 0, 0, 0
    for coders in by_item.values():
        if len(coders) < 2:
            continue
        seen = sorted(set().union(*(c.codes for c in coders)))
        runs += bool(seen)
        for code in seen:
            values = [c.episodes(code) for c in coders]
            units.append(values)
            if all(values):
                agreed += 1
                identical += len(set(values)) == 1
    return {
        "alpha_interval": alpha_interval(units),
        "n_units": len(units),
        "n_runs": runs,
        "n_values": sum(len(u) for u in units),
        "units_mode_agreed": agreed,
        "units_count_identical": identical,
        "share_count_identical": identical / agreed if agreed else None,
    }


def fleiss_kappa_binary(units: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' κ for units each rated by the same number m ≥ 2 of raters into {0, 1} (statsmodels)."""
    if not units or len({value for unit in units for value in unit}) < 2:
        return None  # every rating the same: p_e = 1, κ is undefined
    raters = {len(unit) for unit in units}
    if len(raters) != 1 or raters.pop() < 2:
        raise AgreementInputError("Fleiss' κ needs the same number (≥ 2) of ratings in every unit")
    import numpy as np
    from statsmodels.stats.inter_rater import fleiss_kappa

    counts = np.array([[len(unit) - sum(unit), sum(unit)] for unit in units])
    return float(fleiss_kappa(counts, method="fleiss"))


# -- the report -----------------------------------------------------------------------------


def _mean(values: Iterable[float | None]) -> float | None:
    defined = [v for v in values if v is not None]
    return sum(defined) / len(defined) if defined else None


class _Codes:
    """Every coding of one level as arrays: `coded[i, a]` — item i coded by annotator a; `x[i, a, c]` —
    code c in that coding (lifted to the level). The report is sums over these, not loops over codes."""

    def __init__(self, taxonomy: Taxonomy, index: dict[str, dict[str, frozenset[str]]], annotators, level: str):
        import numpy as np

        self.universe = taxonomy.universe(level)
        column = {code: c for c, code in enumerate(self.universe)}
        position = {a: j for j, a in enumerate(annotators)}
        items = list(index)
        self.coded = np.zeros((len(items), len(annotators)), dtype=bool)
        self.x = np.zeros((len(items), len(annotators), len(self.universe)), dtype=bool)
        rows, cols, codes = [], [], []
        for i, item in enumerate(items):
            for annotator, modes in index[item].items():
                self.coded[i, position[annotator]] = True
                for code in taxonomy.lift(modes, level):
                    rows.append(i), cols.append(position[annotator]), codes.append(column[code])
        self.x[rows, cols, codes] = True


def _kappa(n11, n10, n01, n00):
    """Cohen's κ of 2×2 tables (arrays of counts, element-wise): (p_o − p_e) / (1 − p_e), NaN where
    p_e = 1 (both raters put every decision in one category) or there is no decision. The same
    number as scikit-learn's cohen_kappa_score (tests/annotation/test_agreement.py)."""
    import numpy as np

    n11, n10, n01, n00 = (np.asarray(v, dtype=float) for v in (n11, n10, n01, n00))
    n = n11 + n10 + n01 + n00
    with np.errstate(divide="ignore", invalid="ignore"):
        pa, pb = (n11 + n10) / n, (n11 + n01) / n
        p_e = pa * pb + (1 - pa) * (1 - pb)
        kappa = ((n11 + n00) / n - p_e) / (1 - p_e)
    a1, b1 = n11 + n10, n11 + n01
    return np.where((n == 0) | ((a1 == b1) & ((a1 == 0) | (a1 == n))), np.nan, kappa)


def _value(number) -> float | None:
    import math

    return None if number is None or math.isnan(number) else float(number)


def _masi(inter, size_a, size_b):
    """MASI distances from the sizes of two code sets and of their intersection (arrays, element-wise):
    1 − Jaccard × monotonicity, as masi_distance."""
    import numpy as np

    union = size_a + size_b - inter
    equal = (inter == size_a) & (inter == size_b)
    weight = np.where((inter == size_a) | (inter == size_b), 2 / 3, np.where(inter > 0, 1 / 3, 0.0))
    jaccard = inter / np.maximum(union, 1)
    return np.where(equal, 0.0, 1.0 - jaccard * weight)


def _masi_rows(xa, xb):
    """MASI distances between the code sets in the rows of two bool matrices, row by row."""
    return _masi((xa & xb).sum(axis=-1), xa.sum(axis=-1), xb.sum(axis=-1))


def _alpha_masi_arrays(values: list, units: list) -> float | None:
    """Krippendorff's α with the MASI distance (alpha_masi, over arrays): `values` — the pairable code
    sets as bool rows; `units` — for each unit, the row numbers of its values (two or more)."""
    import numpy as np

    n = sum(len(unit) for unit in units)
    if n < 2:
        return None
    observed = 0.0
    by_size: dict[int, list] = {}
    for unit in units:
        by_size.setdefault(len(unit), []).append(unit)
    for m, group in by_size.items():
        rows = np.array(group)
        within = sum(_masi_rows(values[rows[:, i]], values[rows[:, j]]).sum() for i, j in combinations(range(m), 2))
        observed += 2 * within / (m - 1)
    observed /= n
    # The expected disagreement over every pair of values, through the D distinct sets: a distance depends
    # only on the two sizes and the intersection's, so the pairs are counted by those three numbers.
    packed = np.packbits(values, axis=1)
    _, first, freq = np.unique(packed.view(np.dtype((np.void, packed.shape[1]))).ravel(), return_index=True,
                               return_counts=True)  # fmt: skip
    sets = values[first].astype(np.float32)
    sizes = values[first].sum(axis=1)
    width = values.shape[1] + 1
    pairs = np.zeros(width**3)
    for start in range(0, len(sets), 512):  # the D × D intersections, a block of rows at a time
        block = slice(start, start + 512)
        inter = (sets[block] @ sets.T).astype(np.int64)
        key = (inter * width + sizes[block, None]) * width + sizes[None, :]
        pairs += np.bincount(key.ravel(), weights=np.outer(freq[block], freq).ravel(), minlength=width**3)
    inter, rest = np.divmod(np.arange(width**3), width * width)
    size_a, size_b = np.divmod(rest, width)
    expected = float(pairs @ _masi(inter, size_a, size_b))
    expected /= n * (n - 1)
    return None if expected == 0 else 1.0 - observed / expected


def _alpha_nominal(ones, m) -> float | None:
    """Krippendorff's nominal α for binary units (alpha_nominal_binary, closed form): with n_u values
    of which k_u are 1, α = 1 − (n − 1) Σ_u k_u (n_u − k_u) / (n_u − 1) / (n_1 n_0)."""
    n = float(m.sum())
    n1 = float(ones.sum())
    n0 = n - n1
    if n < 2 or n1 == 0 or n0 == 0:
        return None
    disagreement = float((ones * (m - ones) / (m - 1)).sum())
    return 1.0 - (n - 1) * disagreement / (n1 * n0)


def _fleiss(ones, raters: int) -> float | None:
    """Fleiss' κ for binary units each rated by `raters` (fleiss_kappa_binary, closed form)."""
    units = ones.size
    if units == 0 or raters < 2:
        return None
    p1 = float(ones.sum()) / (units * raters)
    p_e = p1 * p1 + (1 - p1) * (1 - p1)
    if p_e == 1:
        return None
    agreement = (ones * ones + (raters - ones) * (raters - ones) - raters) / (raters * (raters - 1))
    return (float(agreement.mean()) - p_e) / (1 - p_e)


def _pair_level(codes: _Codes, a: int, b: int) -> dict:
    import numpy as np

    shared = codes.coded[:, a] & codes.coded[:, b]
    universe = codes.universe
    n_shared = int(shared.sum())
    if not n_shared:
        return {
            "n_shared_items": 0,
            "pooled": {"kappa": None},
            "macro": {"kappa": None, "n_codes_defined": 0, "n_codes_undefined": len(universe)},
            "per_code_kappa": dict.fromkeys(universe),
            "alpha_masi": {"alpha": None},
        }
    xa, xb = codes.x[shared, a], codes.x[shared, b]
    n11 = (xa & xb).sum(axis=0)
    n10, n01 = (xa & ~xb).sum(axis=0), (~xa & xb).sum(axis=0)
    n00 = n_shared - n11 - n10 - n01
    per_code = [_value(k) for k in _kappa(n11, n10, n01, n00)]
    defined = [k for k in per_code if k is not None]
    values = np.concatenate([xa, xb])
    return {
        "n_shared_items": n_shared,
        "pooled": {"kappa": _value(_kappa(n11.sum(), n10.sum(), n01.sum(), n00.sum()))},
        "macro": {
            "kappa": _mean(defined),
            "n_codes_defined": len(defined),
            "n_codes_undefined": len(universe) - len(defined),
        },  # fmt: skip
        "per_code_kappa": dict(zip(universe, per_code, strict=True)),
        "alpha_masi": {"alpha": _alpha_masi_arrays(values, [[i, i + n_shared] for i in range(n_shared)])},
    }


def agreement_report(taxonomy: Taxonomy, codings: Sequence[Coding], *, raters: int | None = None) -> dict:
    """Agreement per annotator pair and level, and over all annotators. `raters`: the study's design, k
    codings per run — Fleiss' κ is over the runs with exactly k (those with fewer or more are counted and
    said, not silently dropped); without it (a file of codings), k is the most codings any run has.
    Computed over arrays (`_Codes`); the scalar functions above (cohen_kappa, alpha_masi,
    alpha_nominal_binary, fleiss_kappa_binary) are the definitions the tests hold it to."""
    import numpy as np

    index = build_index(taxonomy, codings)
    annotators = sorted({c.annotator for c in codings})
    levels = {level: _Codes(taxonomy, index, annotators, level) for level in LEVELS}
    pairs = [
        {"annotators": [annotators[a], annotators[b]],
         "levels": {level: _pair_level(codes, a, b) for level, codes in levels.items()}}
        for a, b in combinations(range(len(annotators)), 2)
    ]  # fmt: skip
    # Macro κ over one code set for every pair: the codes whose κ is defined for every pair that shares runs.
    for level in LEVELS:
        rows = [p["levels"][level] for p in pairs if p["levels"][level]["n_shared_items"]]
        common = [c for c in taxonomy.universe(level) if rows and all(r["per_code_kappa"][c] is not None for r in rows)]
        for row in (p["levels"][level] for p in pairs):
            row["macro"]["kappa"] = _mean(row["per_code_kappa"][c] for c in common) if row["n_shared_items"] else None
            row["macro"]["n_codes"] = len(common)
    # Fleiss' κ needs the same number of ratings per unit: the runs with exactly k codings; α takes every
    # run coded at least twice.
    per_item = next(iter(levels.values())).coded.sum(axis=1) if index else np.zeros(0, dtype=int)
    k = raters if raters is not None else int(per_item.max(initial=0))
    complete, multiple = per_item == k if k >= 2 else np.zeros_like(per_item, dtype=bool), per_item >= 2
    overall = {}
    for level, codes in levels.items():
        rows = [p["levels"][level] for p in pairs]
        defined = [r for r in rows if r["pooled"]["kappa"] is not None]
        weight = sum(r["n_shared_items"] for r in defined)
        ones = codes.x[multiple].sum(axis=1)  # runs coded ≥ 2 times × codes: the codings that have the code
        m = np.broadcast_to(per_item[multiple][:, None], ones.shape)
        which = np.nonzero(codes.coded[multiple])
        values = codes.x[multiple][which]  # every pairable coding's set, unit by unit
        units, start = [], 0
        for size in per_item[multiple]:
            units.append(list(range(start, start + size)))
            start += size
        overall[level] = {
            "mean_pairwise_pooled_kappa": _mean(r["pooled"]["kappa"] for r in defined),
            "item_weighted_mean_pairwise_pooled_kappa": (
                sum(r["pooled"]["kappa"] * r["n_shared_items"] for r in defined) / weight if weight else None
            ),
            "mean_pairwise_macro_kappa": _mean(r["macro"]["kappa"] for r in rows if r["n_shared_items"]),
            "macro_n_codes": rows[0]["macro"]["n_codes"] if rows else 0,
            "n_pairs_defined": len(defined),
            "fleiss_kappa_pooled": _fleiss(codes.x[complete].sum(axis=1), k) if complete.any() else None,
            "fleiss_raters_per_run": k if k >= 2 else None,
            "fleiss_raters_from": "design" if raters is not None else "data",
            "fleiss_n_runs": int(complete.sum()),
            "fleiss_runs_fewer": int(((per_item > 0) & (per_item < k)).sum()),
            "fleiss_runs_more": int((per_item > k).sum()),
            "alpha_nominal_pooled_binary": _alpha_nominal(ones, m),
            "alpha_masi_all_annotators": _alpha_masi_arrays(values, units),
        }
    return {"pairs": pairs, "overall": overall}


def _item_tables(taxonomy: Taxonomy, codings: Sequence[Coding], level: str):
    """Per item (coded ≥ 2 times) and annotator pair: the item's 2×2 counts over the universe.

    Returns (items, pairs, tables[n_items, n_pairs, 4] as n11, n10, n01, n00; present[n_items, n_pairs])."""
    import numpy as np

    index = build_index(taxonomy, codings)
    universe = taxonomy.universe(level)
    size = len(universe)
    pair_list = list(combinations(sorted({c.annotator for c in codings}), 2))
    items = sorted(item for item, coders in index.items() if len(coders) >= 2)
    tables = np.zeros((len(items), len(pair_list), 4), dtype=np.int64)
    present = np.zeros((len(items), len(pair_list)), dtype=np.int64)
    for row, item in enumerate(items):
        coders = index[item]
        for col, (a, b) in enumerate(pair_list):
            if a in coders and b in coders:
                sa, sb = taxonomy.lift(coders[a], level), taxonomy.lift(coders[b], level)
                n11 = len(sa & sb)
                n10, n01 = len(sa) - n11, len(sb) - n11
                tables[row, col] = (n11, n10, n01, size - n11 - n10 - n01)
                present[row, col] = 1
    return items, pair_list, tables, present


def _headlines(totals, seen):
    """Mean over pairs (with ≥ 1 shared item and defined κ) of the pooled κ; rows = samples."""
    import numpy as np

    n11, n10, n01, n00 = (totals[..., k].astype(float) for k in range(4))
    n = n11 + n10 + n01 + n00
    with np.errstate(divide="ignore", invalid="ignore"):
        p_o = (n11 + n00) / n
        pa, pb = (n11 + n10) / n, (n11 + n01) / n
        p_e = pa * pb + (1 - pa) * (1 - pb)
        kappa = (p_o - p_e) / (1 - p_e)
    a1, b1 = n11 + n10, n11 + n01
    undefined = (n == 0) | ((a1 == b1) & ((a1 == 0) | (a1 == n))) | (seen == 0)
    kappa = np.where(undefined, np.nan, kappa)
    defined = (~np.isnan(kappa)).sum(axis=-1)
    sums = np.nansum(kappa, axis=-1)
    return np.where(defined > 0, sums / np.maximum(defined, 1), np.nan)


def headline_bootstrap(
    taxonomy: Taxonomy,
    codings: Sequence[Coding],
    *,
    level: str = "mode",
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict:
    """Percentile bootstrap over items of the mean pairwise pooled κ (the headline). A resample draws n
    items with replacement; the statistic depends only on how often each *kind* of item was drawn — items
    with the same 2×2 table for every annotator pair are interchangeable — so a resample is one draw of
    Multinomial(n, the kinds' shares): the same distribution as drawing the items one by one, at a cost
    in the number of kinds (hundreds) rather than of items (thousands). Kinds in the order of
    numpy.unique over the tables; resamples drawn 1,000 at a time from default_rng(seed)."""
    import numpy as np

    items, pair_list, tables, present = _item_tables(taxonomy, codings, level)
    n = len(items)
    point = _headlines(tables.sum(axis=0), present.sum(axis=0)) if n else np.nan
    low = high = low_mcse = high_mcse = None
    if n and n_resamples:
        rng = np.random.default_rng(seed)
        kinds, sizes = np.unique(np.concatenate([tables.reshape(n, -1), present], axis=1), axis=0, return_counts=True)
        cells = len(pair_list) * 4
        estimates = []
        for start in range(0, n_resamples, 1000):
            weights = rng.multinomial(n, sizes / n, size=min(1000, n_resamples - start))
            totals = (weights @ kinds[:, :cells]).reshape(len(weights), len(pair_list), 4)
            estimates.append(_headlines(totals, weights @ kinds[:, cells:]))
        drawn = np.concatenate(estimates)
        low, high = _percentile_limits(drawn, confidence)
        # Monte Carlo error of the limits: the same limits from ten consecutive batches of the resamples,
        # their standard deviation over √10 (batch means).
        batches = [_percentile_limits(batch, confidence) for batch in np.array_split(drawn, MC_BATCHES)]
        if n_resamples >= 10 * MC_BATCHES and all(b[0] is not None for b in batches):
            low_mcse = float(np.std([b[0] for b in batches], ddof=1) / np.sqrt(MC_BATCHES))
            high_mcse = float(np.std([b[1] for b in batches], ddof=1) / np.sqrt(MC_BATCHES))
    point_value = None if n == 0 or np.isnan(point) else float(point)
    return {
        "level": level,
        "kappa": point_value,
        "ci_low": low,
        "ci_high": high,
        "ci_low_mcse": low_mcse,
        "ci_high_mcse": high_mcse,
        "confidence": confidence,
        "n_resamples": n_resamples,
        "seed": seed,
        "n_items": n,
    }


MC_BATCHES = 10


def _percentile_limits(estimates, confidence: float) -> tuple[float | None, float | None]:
    """The percentile interval of the defined estimates: the sorted values at tail·(B − 1) and
    (1 − tail)·(B − 1), rounded down."""
    import numpy as np

    values = np.sort(estimates[~np.isnan(estimates)])
    if not len(values):
        return None, None
    tail = (1 - confidence) / 2
    return float(values[int(tail * (len(values) - 1))]), float(values[int((1 - tail) * (len(values) - 1))])


def headline_series(
    taxonomy: Taxonomy,
    codings: Sequence[Coding],
    *,
    item_order: Sequence[str],
    checkpoints: Sequence[int],
    level: str = "mode",
) -> list[float | None]:
    """The headline κ over the first k items of `item_order`, for each k in `checkpoints`."""
    import numpy as np

    items, _, tables, present = _item_tables(taxonomy, codings, level)
    position = {item: row for row, item in enumerate(items)}
    rows = [position[item] for item in item_order if item in position]
    if not rows:
        return [None for _ in checkpoints]
    cum_tables = np.cumsum(tables[rows], axis=0)
    cum_present = np.cumsum(present[rows], axis=0)
    out = []
    for k in checkpoints:
        k = min(max(k, 1), len(rows))
        value = _headlines(cum_tables[k - 1], cum_present[k - 1])
        out.append(None if np.isnan(value) else float(value))
    return out


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
