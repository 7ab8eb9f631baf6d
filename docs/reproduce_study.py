"""Recompute a Parallax study's published numbers from its reproducibility bundle alone.

    python docs/reproduce_study.py study-1-bundle.zip            # prints the numbers as JSON
    python docs/reproduce_study.py study-1-bundle.zip --check    # and compares them with dashboard.json

Independent of Parallax: it reads only the bundle's CSV files and study.json, and needs Python 3.12+
and NumPy (for the bootstrap, whose random stream is NumPy's). What it recomputes, by the definitions
in docs/agreement.md:

* agreement on the independent codings: Cohen's kappa per annotator pair and level (pooled over the
  codes of the level, per code, and the macro mean over the codes defined for every pair), the defined and
  undefined code counts, the mean pairwise pooled kappa (plain and weighted by shared runs), the mean
  pairwise macro kappa, Fleiss' kappa on the pooled binary decisions of the runs with the design's k codings
  (and how many runs have fewer or more), Krippendorff's alpha (nominal on the binary decisions, MASI on the
  code sets, per pair and over all annotators) from the coincidence definitions, and the headline
  (mode-level mean pairwise pooled kappa) with its percentile bootstrap CI over runs and the CI limits'
  Monte Carlo error;
* agreement on the episode counts (what Table 3 adds up): interval alpha over the (run, mode) units some
  coding picked, and how often the counts were identical where every coding picked the mode;
* kappa over time: the headline over the runs compared so far, in the order their second coding came in;
* Table 3 from the final labels whose episode count was agreed or ruled: instances per category,
  subcategory and mode, percent, and each code's share of each agent system's instances;
* RQ1 from the pairs: task pass and mean test pass per agent x benchmark; per agent and per agent x
  benchmark McNemar's n, b and c, the exact McNemar p with Holm's correction within each table over the
  rows whose test can reach p <= 0.05 (Tarone 1990), the paired difference in task pass with Newcombe's
  (1998, method 10, continuity-corrected phi) interval and the conditional odds ratio b/c with its exact
  (Clopper-Pearson) and mid-p intervals; the token and time ratios;
* RQ2 from the run metrics: median, Q1 and Q3 (linear interpolation) of each process metric per agent
  x benchmark x difficulty, concurrent and sequential;
* RQ4 from the pairs and study.json's rules: which pairs count as "concurrency helped", and why;
* the code universe kappa is computed over (study.json: every code of the codebook, or the codes
  observed in the independent codings).

`--check` exits 1 and lists every number that differs from dashboard.json by more than 1e-12 (relative
to the number for numbers above 1: the odds ratios' limits come from a root search here and from
SciPy's beta quantiles there). Kappa per codebook version is not recomputed: the bundle carries the
current version's independent codings only.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
import zipfile
from collections import Counter, defaultdict
from datetime import datetime
from itertools import combinations
from pathlib import Path
from statistics import NormalDist

LEVELS = ("mode", "subcategory", "category")
TOLERANCE = 1e-12


# -- reading the bundle ---------------------------------------------------------------------------


class Bundle:
    def __init__(self, path: Path):
        self.path = path
        self.zip = zipfile.ZipFile(path) if path.is_file() else None

    def text(self, name: str) -> str:
        if self.zip is not None:
            return self.zip.read(name).decode("utf-8")
        return (self.path / name).read_text(encoding="utf-8")

    def table(self, name: str) -> list[dict[str, str]]:
        rows = csv.DictReader(io.StringIO(self.text(f"{name}.csv")))
        return [{key: as_written(value) for key, value in row.items()} for row in rows]

    def json(self, name: str):
        return json.loads(self.text(name))


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def as_written(value: str) -> str:
    """A CSV cell without the apostrophe Parallax puts before text a spreadsheet would run as a
    formula (`'-coder1` is the user `-coder1`)."""
    return value[1:] if value.startswith("'") and value[1:].startswith(FORMULA_STARTS) else value


def boolean(value: str) -> bool | None:
    return {"True": True, "False": False, "true": True, "false": False}.get(value)


def number(value: str) -> float | None:
    return None if value == "" else float(value)


# -- agreement ----------------------------------------------------------------------------------


def taxonomy(codebook: list[dict]) -> dict[str, tuple[str, str]]:
    parent = {row["key"]: row["parent"] for row in codebook}
    return {row["key"]: (parent[row["key"]], parent[parent[row["key"]]]) for row in codebook if row["level"] == "mode"}


def universe(modes: dict, level: str) -> list[str]:
    if level == "mode":
        return sorted(modes)
    return sorted({parents[0 if level == "subcategory" else 1] for parents in modes.values()})


def lift(modes: dict, codes: frozenset, level: str) -> frozenset:
    if level == "mode":
        return codes
    return frozenset(modes[code][0 if level == "subcategory" else 1] for code in codes)


def kappa(x: list[int], y: list[int]) -> float | None:
    """Cohen's kappa of two binary raters; None when p_e = 1 (both always say the same one value)."""
    n = len(x)
    if n == 0:
        return None
    n11 = sum(1 for a, b in zip(x, y, strict=True) if a and b)
    n00 = sum(1 for a, b in zip(x, y, strict=True) if not a and not b)
    pa, pb = sum(x) / n, sum(y) / n
    p_o = (n11 + n00) / n
    p_e = pa * pb + (1 - pa) * (1 - pb)
    if sum(x) == sum(y) and sum(x) in (0, n):
        return None
    return (p_o - p_e) / (1 - p_e)


def mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def fleiss_binary(units: list[tuple[int, ...]]) -> float | None:
    """Fleiss' kappa, the same number (k >= 2) of raters per unit, categories {0, 1}."""
    if not units or len({v for unit in units for v in unit}) < 2:
        return None
    n_units, raters = len(units), len(units[0])
    counts = [(raters - sum(unit), sum(unit)) for unit in units]
    p_j = [sum(c[j] for c in counts) / (n_units * raters) for j in (0, 1)]
    p_i = [(sum(c * c for c in row) - raters) / (raters * (raters - 1)) for row in counts]
    p_bar = sum(p_i) / n_units
    p_e = sum(p * p for p in p_j)
    return (p_bar - p_e) / (1 - p_e)


def masi(a: frozenset, b: frozenset) -> float:
    """MASI distance (Passonneau 2006): 1 - Jaccard x monotonicity (1, 2/3, 1/3 or 0)."""
    if a == b:
        return 0.0
    if a <= b or b <= a:
        weight = 2 / 3
    elif a & b:
        weight = 1 / 3
    else:
        weight = 0.0
    return 1.0 - len(a & b) / len(a | b) * weight


def alpha(units: list[list], distance) -> float | None:
    """Krippendorff's alpha from the coincidences of pairable values (units with two values or more):
    1 - D_o / D_e, D_o = sum over units of (sum over ordered pairs within the unit of d) / (m_u - 1), over n;
    D_e = (sum over ordered pairs of all n pairable values of d) / (n (n - 1)). None when D_e = 0."""
    pairable = [unit for unit in units if len(unit) >= 2]
    n = sum(len(unit) for unit in pairable)
    if n < 2:
        return None
    observed = (
        sum(
            sum(distance(x, y) for i, x in enumerate(unit) for j, y in enumerate(unit) if i != j) / (len(unit) - 1)
            for unit in pairable
        )
        / n
    )
    values = Counter(value for unit in pairable for value in unit)
    expected = sum(values[x] * values[y] * distance(x, y) for x in values for y in values if x != y) / (n * (n - 1))
    return None if expected == 0 else 1 - observed / expected


def nominal(x, y) -> float:
    return 0.0 if x == y else 1.0


def interval(x, y) -> float:
    return float(x - y) ** 2


def count_agreement(counts: dict[str, dict[str, Counter]]) -> dict:
    """Agreement on the episode counts: a unit is a (run, mode) some coding of a run coded at least twice
    picked; each coding's value is its episodes of the mode (0 if it did not pick it)."""
    units, agreed, identical, runs = [], 0, 0, 0
    for coders in counts.values():
        if len(coders) < 2:
            continue
        seen = sorted({code for episodes in coders.values() for code in episodes})
        runs += bool(seen)
        for code in seen:
            values = [episodes[code] for episodes in coders.values()]
            units.append(values)
            if all(values):
                agreed += 1
                identical += len(set(values)) == 1
    return {
        "alpha_interval": alpha(units, interval),
        "n_units": len(units),
        "n_runs": runs,
        "n_values": sum(len(u) for u in units),
        "units_mode_agreed": agreed,
        "units_count_identical": identical,
        "share_count_identical": identical / agreed if agreed else None,
    }


def observed_only(modes: dict, codings: dict[str, dict[str, frozenset]]) -> dict:
    """The modes some independent coding used (the study's 'observed' code universe)."""
    seen = {code for coders in codings.values() for codes in coders.values() for code in codes}
    return {key: parents for key, parents in modes.items() if key in seen}


def agreement(modes: dict, codings: dict[str, dict[str, frozenset]], seed: int, resamples: int, raters: int) -> dict:
    annotators = sorted({a for coders in codings.values() for a in coders})
    pairs = []
    for a, b in combinations(annotators, 2):
        levels = {}
        for level in LEVELS:
            codes = universe(modes, level)
            shared = sorted(item for item, coders in codings.items() if a in coders and b in coders)
            sets_a = [lift(modes, codings[item][a], level) for item in shared]
            sets_b = [lift(modes, codings[item][b], level) for item in shared]
            x = [int(code in s) for s in sets_a for code in codes]
            y = [int(code in s) for s in sets_b for code in codes]
            per_code = {c: kappa([int(c in s) for s in sets_a], [int(c in s) for s in sets_b]) for c in codes}
            defined = sum(1 for value in per_code.values() if value is not None) if shared else 0
            levels[level] = {
                "n_shared_items": len(shared),
                "pooled": {"kappa": kappa(x, y) if shared else None},
                "per_code_kappa": per_code if shared else dict.fromkeys(codes),
                "n_codes_defined": defined,
                "n_codes_undefined": len(codes) - defined,
                "alpha_masi": alpha([[sa, sb] for sa, sb in zip(sets_a, sets_b, strict=True)], masi)
                if shared
                else None,
            }
        pairs.append({"annotators": [a, b], "levels": levels})
    macro_codes = {}
    for level in LEVELS:
        # macro: the mean per-code kappa over the codes whose kappa is defined for every pair sharing runs
        rows = [p["levels"][level] for p in pairs if p["levels"][level]["n_shared_items"]]
        common = [c for c in universe(modes, level) if rows and all(r["per_code_kappa"][c] is not None for r in rows)]
        macro_codes[level] = len(common)
        for p in pairs:
            row = p["levels"][level]
            row["macro"] = {
                "kappa": mean(row["per_code_kappa"][c] for c in common) if row["n_shared_items"] else None,
                "n_codes": len(common),
            }
    overall = {}
    # Fleiss: the runs with exactly k codings in, k = the study's coders per run (study.json)
    k = raters
    complete = [coders for coders in codings.values() if len(coders) == k] if k >= 2 else []
    multiple = [coders for coders in codings.values() if len(coders) >= 2]
    for level in LEVELS:
        rows = [p["levels"][level] for p in pairs]
        defined = [r for r in rows if r["pooled"]["kappa"] is not None]
        weight = sum(r["n_shared_items"] for r in defined)
        binary = [
            tuple(int(code in lift(modes, value, level)) for value in coders.values())
            for coders in complete
            for code in universe(modes, level)
        ]
        overall[level] = {
            "mean_pairwise_pooled_kappa": mean(r["pooled"]["kappa"] for r in defined),
            "item_weighted_mean_pairwise_pooled_kappa": (
                sum(r["pooled"]["kappa"] * r["n_shared_items"] for r in defined) / weight if weight else None
            ),
            "mean_pairwise_macro_kappa": mean(r["macro"]["kappa"] for r in rows if r["n_shared_items"]),
            "macro_n_codes": macro_codes[level],
            "fleiss_kappa_pooled": fleiss_binary(binary),
            "fleiss_raters_per_run": k if k >= 2 else None,
            "fleiss_n_runs": len(complete),
            "fleiss_runs_fewer": sum(1 for coders in codings.values() if 0 < len(coders) < k),
            "fleiss_runs_more": sum(1 for coders in codings.values() if len(coders) > k),
            "n_pairs_defined": len(defined),
            # alpha on the binary decisions (run x code, every run coded twice or more) and on the code sets
            "alpha_nominal_pooled_binary": alpha(
                [[int(code in lift(modes, v, level)) for v in coders.values()]
                 for coders in multiple for code in universe(modes, level)],
                nominal,
            ),
            "alpha_masi_all_annotators": alpha(
                [[lift(modes, v, level) for v in coders.values()] for coders in multiple], masi
            ),
        }  # fmt: skip
    return {"pairs": pairs, "overall": overall, "headline": headline(modes, codings, annotators, seed, resamples)}


def headline(modes, codings, annotators, seed: int, resamples: int, confidence: float = 0.95) -> dict:
    """The mode-level mean pairwise pooled kappa and its percentile bootstrap CI over the runs coded at
    least twice. A resample draws n runs with replacement; runs with the same 2x2 table for every
    annotator pair are interchangeable, so it is drawn as how many runs of each such kind: one
    Multinomial(n, the kinds' shares) draw, kinds in numpy.unique's order over the rows (tables, then
    the pairs' presence), `resamples` draws 1,000 at a time from numpy.random.default_rng(seed)."""
    import numpy as np

    codes = universe(modes, "mode")
    pair_list = list(combinations(annotators, 2))
    items = sorted(item for item, coders in codings.items() if len(coders) >= 2)
    tables = np.zeros((len(items), len(pair_list), 4), dtype=np.int64)
    present = np.zeros((len(items), len(pair_list)), dtype=np.int64)
    for row, item in enumerate(items):
        for col, (a, b) in enumerate(pair_list):
            if a in codings[item] and b in codings[item]:
                sa, sb = codings[item][a], codings[item][b]
                n11 = len(sa & sb)
                tables[row, col] = (n11, len(sa) - n11, len(sb) - n11, len(codes) - len(sa | sb))
                present[row, col] = 1

    def mean_kappa(totals, seen):
        n11, n10, n01, n00 = (totals[..., k].astype(float) for k in range(4))
        n = n11 + n10 + n01 + n00
        with np.errstate(divide="ignore", invalid="ignore"):
            pa, pb = (n11 + n10) / n, (n11 + n01) / n
            p_e = pa * pb + (1 - pa) * (1 - pb)
            k = ((n11 + n00) / n - p_e) / (1 - p_e)
        a1, b1 = n11 + n10, n11 + n01
        k = np.where((n == 0) | ((a1 == b1) & ((a1 == 0) | (a1 == n))) | (seen == 0), np.nan, k)
        defined = (~np.isnan(k)).sum(axis=-1)
        return np.where(defined > 0, np.nansum(k, axis=-1) / np.maximum(defined, 1), np.nan)

    n = len(items)
    point = float(mean_kappa(tables.sum(axis=0), present.sum(axis=0))) if n else math.nan
    low = high = low_mcse = high_mcse = None
    if n and resamples:
        rng = np.random.default_rng(seed)
        rows = np.concatenate([tables.reshape(n, -1), present], axis=1)
        kinds, sizes = np.unique(rows, axis=0, return_counts=True)
        cells = len(pair_list) * 4
        estimates = []
        for start in range(0, resamples, 1000):
            weights = rng.multinomial(n, sizes / n, size=min(1000, resamples - start))
            totals = (weights @ kinds[:, :cells]).reshape(len(weights), len(pair_list), 4)
            estimates.append(mean_kappa(totals, weights @ kinds[:, cells:]))
        drawn = np.concatenate(estimates)
        low, high = limits(drawn, confidence)
        # Monte Carlo error: the limits of ten consecutive batches of the resamples, sd / sqrt(10)
        batches = [limits(batch, confidence) for batch in np.array_split(drawn, 10)]
        if resamples >= 100 and all(b[0] is not None for b in batches):
            low_mcse = float(np.std([b[0] for b in batches], ddof=1) / math.sqrt(10))
            high_mcse = float(np.std([b[1] for b in batches], ddof=1) / math.sqrt(10))
    return {"kappa": None if math.isnan(point) else point, "ci_low": low, "ci_high": high, "n_items": n,
            "ci_low_mcse": low_mcse, "ci_high_mcse": high_mcse}  # fmt: skip


def limits(estimates, confidence: float):
    """The percentile interval of the defined estimates: sorted values at tail*(B - 1) and (1 - tail)*(B - 1)."""
    import numpy as np

    values = np.sort(estimates[~np.isnan(estimates)])
    if not len(values):
        return None, None
    tail = (1 - confidence) / 2
    return float(values[int(tail * (len(values) - 1))]), float(values[int((1 - tail) * (len(values) - 1))])


def over_time(modes, codings, submitted: dict[str, dict[str, str]], points: int = 10) -> list[dict]:
    """The headline kappa over the runs compared so far, in the order their second independent coding came
    in, at `points` even steps (round half to even, as Python rounds) — the last is every run compared."""
    import numpy as np

    second = sorted(
        (sorted(datetime.fromisoformat(t) for t in when.values())[1], item)
        for item, when in submitted.items()
        if len(when) >= 2
    )
    if not second:
        return []
    steps = sorted({max(1, round(len(second) * j / points)) for j in range(1, points + 1)})
    out = []
    for n in steps:
        first_n = {item: codings[item] for _, item in second[:n]}
        annotators = sorted({a for coders in first_n.values() for a in coders})
        value = headline(modes, first_n, annotators, 0, 0)["kappa"]
        out.append({"runs": n, "kappa": None if value is None or np.isnan(value) else value})
    return out


# -- Table 3 -------------------------------------------------------------------------------------


def table3(finals: list[dict], runs_total: int, agents: list[str]) -> dict:
    # an instance: a final label row (one episode of a mode on a run) whose count was agreed or ruled
    counted = [row for row in finals if row["mode"]]
    instances = [row for row in counted if boolean(row.get("count_agreed", "True")) is not False]
    per_agent = Counter(row["agent"] for row in instances)
    rows = {}
    for level in ("category", "subcategory", "mode"):
        counts = Counter(row[level] for row in instances)
        for key, count in counts.items():
            mine = Counter(row["agent"] for row in instances if row[level] == key)
            rows[(level, key)] = {
                "count": count,
                "percent": 100.0 * count / len(instances),
                "share_by_agent": {a: (100.0 * mine[a] / per_agent[a] if per_agent[a] else None) for a in agents},
            }
    return {
        "rows": rows,
        "instances": len(instances),
        "runs_with_mode": len({row["run_id"] for row in instances}),
        "runs_total": runs_total,
        "runs_final": len({row["run_id"] for row in finals}),
        "instances_not_agreed": len(counted) - len(instances),
    }


# -- RQ1 -----------------------------------------------------------------------------------------


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar: twice the smaller binomial tail of Bin(b + c, 1/2), at most 1."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def testable(b: int, c: int) -> bool:
    """The exact test of b and c can reach p <= 0.05 at all: 2 * (1/2)^(b + c) <= 0.05 (Tarone 1990)."""
    return b + c > 0 and min(1.0, 2 * 0.5 ** (b + c)) <= 0.05


def holm(p: dict[str, float]) -> dict[str, float]:
    order = sorted(p, key=lambda name: p[name])
    adjusted, running = {}, 0.0
    for rank, name in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * p[name]))
        adjusted[name] = running
    return adjusted


Z = NormalDist().inv_cdf(0.975)


def wilson(k: int, n: int) -> tuple[float, float]:
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe(a: int, b: int, c: int, d: int):
    """Newcombe (1998) method 10 for the difference of paired proportions (a + b)/n - (a + c)/n."""
    n = a + b + c + d
    if n == 0:
        return None, None, None
    p1, p2 = (a + b) / n, (a + c) / n
    (l1, u1), (l2, u2) = wilson(a + b, n), wilson(a + c, n)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    if cross > 0:  # Newcombe's continuity correction of phi
        cross = max(cross - n / 2, 0.0)
    phi = cross / math.sqrt(margins) if margins else 0.0
    dl = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    du = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return p1 - p2, max(-1.0, p1 - p2 - dl), min(1.0, p1 - p2 + du)


def binomial_cdf(k: int, n: int, p: float) -> float:
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    lp, lq = math.log(p), math.log1p(-p)
    terms = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq
             for i in range(k + 1)]  # fmt: skip
    top = max(terms)
    return math.exp(top) * math.fsum(math.exp(t - top) for t in terms)


def increasing_root(f, target: float) -> float:
    """p in (0, 1) with f(p) = target, f increasing: bisection to the last representable bit."""
    low, high = 0.0, 1.0
    while True:
        mid = (low + high) / 2
        if mid in (low, high):
            return mid
        if f(mid) < target:
            low = mid
        else:
            high = mid


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    """Exact interval of k of n: P(X >= k | low) = 0.025 and P(X <= k | high) = 0.025."""
    low = 0.0 if k == 0 else increasing_root(lambda p: 1 - binomial_cdf(k - 1, n, p), 0.025)
    high = 1.0 if k == n else increasing_root(lambda p: -binomial_cdf(k, n, p), -0.025)
    return low, high


def mid_p(k: int, n: int) -> tuple[float, float]:
    """Mid-p interval of k of n: P(X > k | low) + P(X = k | low)/2 = 0.025, and P(X < k | high) + P(X = k | high)/2
    = 0.025."""

    def point(j: int, p: float) -> float:
        return binomial_cdf(j, n, p) - binomial_cdf(j - 1, n, p)

    low = 0.0 if k == 0 else increasing_root(lambda p: 1 - binomial_cdf(k, n, p) + point(k, p) / 2, 0.025)
    high = 1.0 if k == n else increasing_root(lambda p: -(binomial_cdf(k - 1, n, p) + point(k, p) / 2), -0.025)
    return low, high


def paired(group: list[dict]) -> dict:
    known = [(p["concurrent_task_pass"], p["sequential_task_pass"]) for p in group
             if p["concurrent_task_pass"] is not None and p["sequential_task_pass"] is not None]  # fmt: skip
    a = sum(1 for cp, sp in known if cp and sp)
    b = sum(1 for cp, sp in known if cp and not sp)
    c = sum(1 for cp, sp in known if sp and not cp)
    difference, low, high = newcombe(a, b, c, len(known) - a - b - c)
    odds = odds_low = odds_high = mid_low = mid_high = None
    if b + c:
        p_low, p_high = clopper_pearson(b, b + c)
        odds = b / c if c else None
        odds_low, odds_high = p_low / (1 - p_low), (p_high / (1 - p_high) if p_high < 1 else None)
        m_low, m_high = mid_p(b, b + c)
        mid_low, mid_high = m_low / (1 - m_low), (m_high / (1 - m_high) if m_high < 1 else None)
    return {
        "n": len(known), "b": b, "c": c, "mcnemar_p": mcnemar_exact(b, c),
        "task_pass_difference": difference, "difference_ci_low": low, "difference_ci_high": high,
        "odds_ratio": odds, "odds_ratio_ci_low": odds_low, "odds_ratio_ci_high": odds_high,
        "odds_ratio_midp_ci_low": mid_low, "odds_ratio_midp_ci_high": mid_high,
        "odds_ratio_state": "undefined" if b + c == 0 else "infinite" if c == 0 else "finite",
    }  # fmt: skip


def rq1(pairs: list[dict]) -> dict:
    cells = {}
    by_cell = defaultdict(list)
    for pair in pairs:
        by_cell[(pair["agent"], pair["benchmark"])].append(pair)
    for (agent, benchmark), group in by_cell.items():
        # paired means: over the pairs whose two outcomes are both known
        task = [p for p in group if p["concurrent_task_pass"] is not None and p["sequential_task_pass"] is not None]
        test = [p for p in group if p["concurrent_test_pass"] is not None and p["sequential_test_pass"] is not None]
        cells[(agent, benchmark)] = {
            "pairs": len(group),
            "pairs_task_known": len(task),
            "pairs_test_known": len(test),
            "concurrent_task_pass": mean(passes(task, "concurrent")),
            "sequential_task_pass": mean(passes(task, "sequential")),
            "concurrent_test_pass": mean(p["concurrent_test_pass"] for p in test),
            "sequential_test_pass": mean(p["sequential_test_pass"] for p in test),
            **paired(group),
        }  # fmt: skip
    family = {key: cell["mcnemar_p"] for key, cell in cells.items() if testable(cell["b"], cell["c"])}
    adjusted = holm(family)
    for key, cell in cells.items():
        cell["mcnemar_p_holm"], cell["holm_family"] = adjusted.get(key), len(family)
    agents = {}
    for agent in sorted({p["agent"] for p in pairs}):
        group = [p for p in pairs if p["agent"] == agent]
        known = [p for p in group if p["concurrent_task_pass"] is not None and p["sequential_task_pass"] is not None]
        b = sum(1 for p in known if p["concurrent_task_pass"] and not p["sequential_task_pass"])
        c = sum(1 for p in known if p["sequential_task_pass"] and not p["concurrent_task_pass"])
        agents[agent] = {
            "pairs": len(group),
            "concurrent_only_pass": b,
            "sequential_only_pass": c,
            **paired(group),
            "token_ratio": ratio([(p["concurrent_tokens"], p["sequential_tokens"]) for p in group]),
            "time_ratio": ratio([(p["concurrent_duration_s"], p["sequential_duration_s"]) for p in group]),
        }
    family = {a: row["mcnemar_p"] for a, row in agents.items() if testable(row["b"], row["c"])}
    adjusted = holm(family)
    for agent, row in agents.items():
        row["mcnemar_p_holm"], row["holm_family"] = adjusted.get(agent), len(family)
    return {"cells": cells, "agents": agents}


def passes(group: list[dict], side: str) -> list[float]:
    return [float(p[f"{side}_task_pass"]) for p in group if p[f"{side}_task_pass"] is not None]


def ratio(values) -> float | None:
    known = [(c, s) for c, s in values if c is not None and s is not None]
    total = sum(s for _, s in known)
    return sum(c for c, _ in known) / total if known and total else None


# -- RQ2 ------------------------------------------------------------------------------------------

METRICS = ("subagents_created", "peak_concurrency", "first_spawn_pos", "first_overlap_pos", "overlap_ratio",
           "last_subagent_end_pos", "duration_s", "tokens", "shell_calls")  # fmt: skip


def quantile(values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (Hyndman and Fan's type 7, NumPy's default)."""
    h = (len(values) - 1) * q
    low = math.floor(h)
    high = min(low + 1, len(values) - 1)
    return values[low] + (h - low) * (values[high] - values[low])


def rq2(runs: list[dict]) -> dict:
    groups = defaultdict(list)
    for run in runs:
        groups[(run["agent"], run["benchmark"], run["difficulty"])].append(run)
    out = {}
    for key, group in groups.items():
        for metric in METRICS:
            for mode in ("concurrent", "sequential"):
                known = sorted(number(r[metric]) for r in group if r["mode"] == mode and r[metric] != "")
                out[(*key, metric, mode)] = {
                    "n": len(known),
                    **{name: quantile(known, q) if known else None
                       for name, q in (("median", 0.5), ("q1", 0.25), ("q3", 0.75))},
                }  # fmt: skip
    return out


# -- RQ4 ------------------------------------------------------------------------------------------


def rq4(pairs: list[dict], rules: dict) -> dict:
    """Pairs where concurrency helped under the study's rules: concurrent run id -> reasons."""
    out = {}
    for p in pairs:
        ct, st = p["concurrent_test_pass"], p["sequential_test_pass"]
        cd, sd = p["concurrent_duration_s"], p["sequential_duration_s"]
        margin, seconds, fraction = rules["test_pass_margin"], rules["faster_min_seconds"], rules["faster_min_fraction"]
        reasons = []
        if rules["higher_test_pass"] and ct is not None and st is not None and ct - st > margin:
            reasons.append("higher test pass" if not margin else f"test pass higher by > {margin:g}")
        if rules["solved_only_concurrently"] and p["concurrent_task_pass"] and p["sequential_task_pass"] is False:
            reasons.append("solved only concurrently")
        if (rules["faster"] and ct is not None and st is not None and ct >= st and cd is not None
                and sd is not None and sd - cd >= seconds and cd <= (1 - fraction) * sd):  # fmt: skip
            reasons.append(f"no lower test pass, ≥ {seconds:g} s and ≥ {100 * fraction:g}% faster")
        if reasons:
            out[int(p["concurrent_run_id"])] = reasons
    return out


# -- the whole study, and the check ---------------------------------------------------------------


def reproduce(bundle: Bundle) -> dict:
    study = bundle.json("study.json")
    modes = taxonomy(bundle.table("codebook"))
    codings: dict[str, dict[str, frozenset]] = defaultdict(dict)
    counts: dict[str, dict[str, Counter]] = defaultdict(dict)  # run -> annotator -> mode -> episodes
    submitted: dict[str, dict[str, str]] = defaultdict(dict)  # run -> annotator -> when (ISO 8601)
    for row in bundle.table("independent_codings"):
        current = codings[row["run_id"]].get(row["annotator"], frozenset())
        codings[row["run_id"]][row["annotator"]] = current | ({row["mode"]} if row["mode"] else set())
        counts[row["run_id"]].setdefault(row["annotator"], Counter()).update([row["mode"]] if row["mode"] else [])
        submitted[row["run_id"]][row["annotator"]] = row["submitted_at"]
    if study["agreement"].get("code_universe") == "observed":
        modes = observed_only(modes, codings)
    boot = study["agreement"]["bootstrap"]
    pairs = [
        {
            **row,
            **{f"{side}_task_pass": boolean(row[f"{side}_task_pass"]) for side in ("concurrent", "sequential")},
            **{f"{side}_{name}": number(row[f"{side}_{name}"]) for side in ("concurrent", "sequential")
               for name in ("test_pass", "duration_s", "tokens")},
        }
        for row in bundle.table("pairs")
    ]  # fmt: skip
    finals = bundle.table("final_labels")
    agents = sorted({row["agent"] for row in pairs} | {row["agent"] for row in finals})
    return {
        "agreement": agreement(modes, codings, boot["seed"], boot["resamples"], study["coders_per_run"]),
        "counts": count_agreement(counts),
        "over_time": over_time(modes, codings, submitted),
        "table3": table3(finals, study["runs"], agents),
        "rq1": rq1(pairs),
        "rq2": rq2(bundle.table("run_metrics")),
        "rq4": rq4(pairs, study["rq4"]["rules"]),
        "code_universe": {level: len(universe(modes, level)) for level in LEVELS},
    }


def differences(mine: dict, shown: dict) -> list[str]:
    """Every recomputed number against the dashboard's, by name."""
    out: list[str] = []

    def same(name: str, a, b) -> None:
        if isinstance(a, str) or isinstance(b, str):
            if a != b:
                out.append(f"{name}: recomputed {a!r}, dashboard {b!r}")
        elif a is None or b is None:
            if a is not b:
                out.append(f"{name}: recomputed {a!r}, dashboard {b!r}")
        elif abs(float(a) - float(b)) > TOLERANCE * max(1.0, abs(float(b))):
            out.append(f"{name}: recomputed {a!r}, dashboard {b!r}")

    ag, shown_ag = mine["agreement"], shown["agreement"]
    shown_pairs = {tuple(p["annotators"]): p for p in shown_ag["pairs"]}
    if len(shown_pairs) != len(ag["pairs"]):
        out.append(f"annotator pairs: recomputed {len(ag['pairs'])}, dashboard {len(shown_pairs)}")
    for pair in ag["pairs"]:
        other = shown_pairs.get(tuple(pair["annotators"]))
        for level, data in pair["levels"].items():
            name = f"kappa {'/'.join(pair['annotators'])} {level}"
            if other is None:
                out.append(f"{name}: not on the dashboard")
                continue
            theirs = other["levels"][level]
            same(f"{name} shared runs", data["n_shared_items"], theirs["n_shared_items"])
            same(f"{name} pooled", data["pooled"]["kappa"], theirs["pooled"]["kappa"])
            same(f"{name} macro", data["macro"]["kappa"], theirs["macro"]["kappa"])
            same(f"{name} macro codes", data["macro"]["n_codes"], theirs["macro"].get("n_codes"))
            for key in ("n_codes_defined", "n_codes_undefined"):
                same(f"{name} {key}", data[key], theirs["macro"][key])
            same(f"{name} alpha MASI", data["alpha_masi"], theirs["alpha_masi"]["alpha"])
            for code, value in data["per_code_kappa"].items():
                same(f"{name} kappa of {code}", value, theirs["per_code_kappa"].get(code, "absent"))
    for level, data in ag["overall"].items():
        for key, value in data.items():
            same(f"overall {level} {key}", value, shown_ag["overall"][level][key])
    for key in ("kappa", "ci_low", "ci_high", "n_items", "ci_low_mcse", "ci_high_mcse"):
        same(f"headline {key}", ag["headline"][key], shown_ag["headline"][key])

    for key, value in mine["counts"].items():
        same(f"episode counts {key}", value, shown_ag.get("counts", {}).get(key, "absent"))
    shown_time = shown.get("over_time", [])
    if [p["runs"] for p in mine["over_time"]] != [p["runs"] for p in shown_time]:
        out.append(f"kappa over time steps: recomputed {[p['runs'] for p in mine['over_time']]}, "
                   f"dashboard {[p['runs'] for p in shown_time]}")  # fmt: skip
    else:
        for point, theirs in zip(mine["over_time"], shown_time, strict=True):
            same(f"kappa over time at {point['runs']} runs", point["kappa"], theirs["kappa"])

    t3, shown_t3 = mine["table3"], shown["table3"]
    for key in ("instances", "runs_with_mode", "runs_total", "runs_final", "instances_not_agreed"):
        same(f"table3 {key}", t3[key], shown_t3[key])
    shown_rows = {(row["level"], row["key"]): row for row in shown_t3["rows"]}
    if set(shown_rows) != set(t3["rows"]):
        out.append(f"table3 rows: recomputed {sorted(t3['rows'])}, dashboard {sorted(shown_rows)}")
    for key, row in t3["rows"].items():
        theirs = shown_rows.get(key)
        if theirs is None:
            continue
        same(f"table3 {key} count", row["count"], theirs["count"])
        same(f"table3 {key} percent", row["percent"], theirs["percent"])
        for agent, share in row["share_by_agent"].items():
            same(f"table3 {key} share {agent}", share, theirs["share_by_agent"].get(agent))

    q, shown_q = mine["rq1"], shown["rq1"]
    shown_cells = {(c["agent"], c["benchmark"]): c for c in shown_q["cells"]}
    if set(shown_cells) != set(q["cells"]):
        out.append(f"rq1 cells: recomputed {sorted(q['cells'])}, dashboard {sorted(shown_cells)}")
    for key, cell in q["cells"].items():
        for name, value in cell.items():
            same(f"rq1 {key} {name}", value, shown_cells.get(key, {}).get(name))
    for agent, row in q["agents"].items():
        for name, value in row.items():
            same(f"rq1 {agent} {name}", value, shown_q["agents"].get(agent, {}).get(name))

    shown_rq2 = {
        (r["agent"], r["benchmark"], r["difficulty"], r["metric"], mode): r[mode]
        for r in shown["rq2"]
        for mode in ("concurrent", "sequential")
    }
    if set(shown_rq2) != set(mine["rq2"]):
        out.append(f"rq2 rows: recomputed {len(mine['rq2'])}, dashboard {len(shown_rq2)}")
    for key, stats in mine["rq2"].items():
        for name, value in stats.items():
            same(f"rq2 {' / '.join(key)} {name}", value, shown_rq2.get(key, {}).get(name))

    shown_rq4 = {concurrent: reasons for concurrent, _, reasons in shown["rq4"]}
    if shown_rq4 != mine["rq4"]:
        out.append(f"rq4 pairs: recomputed {mine['rq4']}, dashboard {shown_rq4}")
    for level, size in mine["code_universe"].items():
        same(f"code universe {level}", size, shown["agreement"]["code_universe"]["codes"][level])
    return out


def plain(value):
    """JSON-ready: tuple keys joined with ' / '."""
    if isinstance(value, dict):
        return {(" / ".join(k) if isinstance(k, tuple) else k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path, help="the study's bundle: the zip, or the folder it was unpacked to")
    parser.add_argument("--check", action="store_true", help="compare with dashboard.json; exit 1 on a difference")
    args = parser.parse_args(argv)
    bundle = Bundle(args.bundle)
    mine = reproduce(bundle)
    if not args.check:
        print(json.dumps(plain(mine), indent=2))  # noqa: T201 - a script
        return 0
    problems = differences(mine, bundle.json("dashboard.json"))
    for problem in problems:
        print(problem)  # noqa: T201
    print(f"{'OK' if not problems else 'DIFFERENT'}: every recomputed number "  # noqa: T201
          f"{'equals' if not problems else 'does not equal'} the dashboard's (tolerance {TOLERANCE})")  # fmt: skip
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
