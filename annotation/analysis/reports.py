"""The study's result tables from plain rows (pure; definitions in docs/agreement.md).

* Table 3 (`failure_mode_table`): failure-mode instances from final labels per category / subcategory / mode
  (count, % of all instances), runs with ≥ 1 mode, and each code's share within each
  agent system's instances.
* RQ1 (`outcome_comparison`): task pass and mean test pass per agent × benchmark, concurrent vs sequential; per
  agent and per agent × benchmark the exact McNemar test on paired task pass (n, discordant b and c, p, Holm's
  correction within each table over the rows that can reach significance), the paired difference in task pass
  with Newcombe's method-10 interval (continuity-corrected φ) and the conditional odds ratio b/c with its exact
  (Clopper–Pearson) and mid-p intervals; token and time ratios.
* RQ2 (`process_summary`): median and quartiles of each process metric per agent × benchmark × difficulty,
  concurrent beside sequential.
* RQ4 (`concurrency_helped`): pairs where concurrency helped, by the study's rules (`Rq4Rules`).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist

CONFIDENCE = 0.95
Z = NormalDist().inv_cdf(1 - (1 - CONFIDENCE) / 2)  # 1.959963984540054


@dataclass(frozen=True)
class FinalInstance:
    run_id: int
    agent: str
    mode: tuple[str, str]  # (key, name)
    subcategory: tuple[str, str]
    category: tuple[str, str]


def failure_mode_table(instances: Sequence[FinalInstance], *, agents: Sequence[str], runs_total: int) -> dict:
    total = len(instances)
    per_agent_total = Counter(i.agent for i in instances)
    rows = []
    for level in ("category", "subcategory", "mode"):
        counts: Counter = Counter()
        by_agent: dict[tuple[str, str], Counter] = defaultdict(Counter)
        parents: dict[tuple[str, str], str] = {}
        for inst in instances:
            code = getattr(inst, level)
            counts[code] += 1
            by_agent[code][inst.agent] += 1
            parents[code] = {"category": "", "subcategory": inst.category[1], "mode": inst.subcategory[1]}[level]
        for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0][1])):
            rows.append(
                {
                    "level": level,
                    "key": code[0],
                    "name": code[1],
                    "parent": parents[code],
                    "count": count,
                    "percent": 100.0 * count / total if total else 0.0,
                    "share_by_agent": {
                        agent: (
                            100.0 * by_agent[code][agent] / per_agent_total[agent] if per_agent_total[agent] else None
                        )
                        for agent in agents
                    },
                }
            )
    return {
        "rows": rows,
        "instances": total,
        "runs_with_mode": len({i.run_id for i in instances}),
        "runs_total": runs_total,
        "instances_by_agent": dict(per_agent_total),
    }


@dataclass(frozen=True)
class PairOutcome:
    agent: str
    benchmark: str
    task: str
    concurrent_pass: bool | None
    sequential_pass: bool | None
    concurrent_test_pass: float | None
    sequential_test_pass: float | None
    concurrent_duration: float | None
    sequential_duration: float | None
    concurrent_tokens: int | None
    sequential_tokens: int | None
    concurrent_run_id: int = 0
    sequential_run_id: int = 0


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p: binomial test of b discordant 'concurrent only' of b + c."""
    if b + c == 0:
        return 1.0
    from scipy.stats import binomtest  # heavy: loaded only when a test is computed

    return float(binomtest(b, b + c, 0.5, alternative="two-sided").pvalue)


def holm(p_values: dict[str, float]) -> dict[str, float]:
    """Holm–Bonferroni adjusted p-values (Holm 1979, step-down): the k-th smallest of m is multiplied by
    m − k + 1, capped at 1 and never below the one before it. (statsmodels' `multipletests(method="holm")` gives
    the same figures — the tests hold it to them — but runs a full garbage collection on every call: 0.3 s of a
    10× study's refresh.)"""
    adjusted: dict[str, float] = {}
    running = 0.0
    ordered = sorted(p_values.items(), key=lambda item: item[1])
    for k, (name, p) in enumerate(ordered):
        running = max(running, min(1.0, (len(ordered) - k) * p))
        adjusted[name] = running
    return {name: adjusted[name] for name in p_values}


ALPHA = 1 - CONFIDENCE


def can_reach_significance(b: int, c: int, alpha: float = ALPHA) -> bool:
    """Whether the exact McNemar test of b and c discordant pairs can reach p ≤ alpha at all: its
    smallest possible p is 2·(1/2)^(b + c) (every discordant pair on one side). A test that cannot only
    inflates a multiple-testing family (Tarone 1990): b + c ≥ 6 at alpha = 0.05."""
    return b + c > 0 and min(1.0, 2 * 0.5 ** (b + c)) <= alpha


def holm_testable(rows: Mapping[str, dict]) -> tuple[dict[str, float | None], int]:
    """Holm's correction within one table over its testable rows only (can_reach_significance):
    adjusted p per row (None: not in the family) and the family's size."""
    family = {name: row["mcnemar_p"] for name, row in rows.items() if can_reach_significance(row["b"], row["c"])}
    adjusted = holm(family)
    return {name: adjusted.get(name) for name in rows}, len(family)


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def wilson_interval(k: int, n: int, z: float = Z) -> tuple[float, float]:
    """Wilson's score interval for k successes of n (no continuity correction); (0, 1) when n = 0."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe_paired_difference(a: int, b: int, c: int, d: int, z: float = Z) -> tuple[float, float, float] | None:
    """The difference p1 − p2 of two paired proportions (p1 = (a + b)/n, p2 = (a + c)/n) with
    Newcombe's (1998) method 10 interval: the Wilson intervals of p1 and p2 combined with the
    correlation φ of the 2×2 table, continuity-corrected as Newcombe defines it — when ad > bc, ad − bc
    is replaced by max(ad − bc − n/2, 0) (Newcombe 1998; Newcombe & Altman, *Statistics with Confidence*,
    2000; R `contingencytables`, `ratesci`) — and φ = 0 when a margin is 0. None when n = 0."""
    n = a + b + c + d
    if n == 0:
        return None
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson_interval(a + b, n, z)
    l2, u2 = wilson_interval(a + c, n, z)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    if cross > 0:
        cross = max(cross - n / 2, 0.0)
    phi = cross / math.sqrt(margins) if margins else 0.0
    dl = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    du = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    theta = p1 - p2
    return theta, max(-1.0, theta - dl), min(1.0, theta + du)


def clopper_pearson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact (Clopper–Pearson) interval of k successes of n: beta quantiles."""
    from scipy.stats import beta  # heavy: loaded only when a test is computed

    tail = (1 - confidence) / 2
    low = 0.0 if k == 0 else float(beta.ppf(tail, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - tail, k + 1, n - k))
    return low, high


def mid_p_interval(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The mid-p exact interval of k successes of n (Lancaster 1961; Agresti & Gottard 2007): each limit
    solves P(X more extreme than k) + ½·P(X = k) = (1 − confidence)/2; 0 and 1 at the edges."""
    from scipy.optimize import brentq
    from scipy.stats import binom

    tail = (1 - confidence) / 2
    low = 0.0 if k == 0 else brentq(lambda p: binom.sf(k, n, p) + 0.5 * binom.pmf(k, n, p) - tail, 0.0, 1.0)
    high = 1.0 if k == n else brentq(lambda p: binom.cdf(k - 1, n, p) + 0.5 * binom.pmf(k, n, p) - tail, 0.0, 1.0)
    return float(low), float(high)


def paired_odds_ratio(b: int, c: int, *, mid_p: bool = False) -> tuple[float | None, float | None, float | None]:
    """The conditional (McNemar) odds ratio b/c with its exact interval: the Clopper–Pearson interval
    (pL, pU) of b of the b + c discordant pairs — or, `mid_p`, the mid-p interval — mapped by p/(1 − p).
    None where undefined or unbounded (c = 0: the ratio and its upper limit are infinite; b + c = 0:
    nothing to estimate; `odds_ratio_state` says which)."""
    if b + c == 0:
        return None, None, None
    low, high = mid_p_interval(b, b + c) if mid_p else clopper_pearson(b, b + c)
    return (b / c if c else None), low / (1 - low), (high / (1 - high) if high < 1 else None)


def odds_ratio_state(b: int, c: int) -> str:
    """What an empty odds ratio means: `undefined` (no discordant pair), `infinite` (c = 0), else `finite`."""
    return "undefined" if b + c == 0 else "infinite" if c == 0 else "finite"


def paired_task_pass(known: Sequence[tuple[bool, bool]]) -> dict:
    """Paired task pass (concurrent, sequential) over the pairs with both outcomes known: McNemar's
    n, discordant counts b (only concurrent passed) and c (only sequential), the exact p, the paired
    difference in pass rate with Newcombe's interval, and the conditional odds ratio with its
    exact interval."""
    a = sum(1 for cp, sp in known if cp and sp)
    b = sum(1 for cp, sp in known if cp and not sp)
    c = sum(1 for cp, sp in known if sp and not cp)
    d = len(known) - a - b - c
    difference = newcombe_paired_difference(a, b, c, d)
    odds, odds_low, odds_high = paired_odds_ratio(b, c)
    _, mid_low, mid_high = paired_odds_ratio(b, c, mid_p=True)
    return {
        "n": len(known),
        "b": b,
        "c": c,
        "mcnemar_p": mcnemar_exact(b, c),
        "task_pass_difference": difference[0] if difference else None,
        "difference_ci_low": difference[1] if difference else None,
        "difference_ci_high": difference[2] if difference else None,
        "odds_ratio": odds,
        "odds_ratio_ci_low": odds_low,
        "odds_ratio_ci_high": odds_high,
        "odds_ratio_midp_ci_low": mid_low,
        "odds_ratio_midp_ci_high": mid_high,
        "odds_ratio_state": odds_ratio_state(b, c),
    }


def _known_task(group: Sequence[PairOutcome]) -> list[tuple[bool, bool]]:
    return [
        (bool(p.concurrent_pass), bool(p.sequential_pass))
        for p in group
        if p.concurrent_pass is not None and p.sequential_pass is not None
    ]


def outcome_comparison(pairs: Sequence[PairOutcome]) -> dict:
    cells = []
    by_cell: dict[tuple[str, str], list[PairOutcome]] = defaultdict(list)
    for pair in pairs:
        by_cell[(pair.agent, pair.benchmark)].append(pair)
    for (agent, benchmark), group in sorted(by_cell.items()):
        # Paired means: over the pairs whose two outcomes are both known, so that both sides average
        # the same tasks (a pair with one unknown outcome would otherwise count on one side only).
        task = [p for p in group if p.concurrent_pass is not None and p.sequential_pass is not None]
        test = [p for p in group if p.concurrent_test_pass is not None and p.sequential_test_pass is not None]
        cells.append(
            {
                "agent": agent,
                "benchmark": benchmark,
                "pairs": len(group),
                "pairs_task_known": len(task),
                "pairs_test_known": len(test),
                "concurrent_task_pass": _mean(float(p.concurrent_pass) for p in task),
                "sequential_task_pass": _mean(float(p.sequential_pass) for p in task),
                "concurrent_test_pass": _mean(p.concurrent_test_pass for p in test),
                "sequential_test_pass": _mean(p.sequential_test_pass for p in test),
                **paired_task_pass(_known_task(group)),
            }
        )
    adjusted, cells_family = holm_testable({str(i): cell for i, cell in enumerate(cells)})
    for i, cell in enumerate(cells):
        cell["mcnemar_p_holm"] = adjusted[str(i)]
        cell["holm_family"] = cells_family
    agents = {}
    for agent in sorted({p.agent for p in pairs}):
        group = [p for p in pairs if p.agent == agent]
        paired = paired_task_pass(_known_task(group))
        agents[agent] = {
            "pairs": len(group),
            "concurrent_only_pass": paired["b"],
            "sequential_only_pass": paired["c"],
            **paired,
            "token_ratio": _ratio([(p.concurrent_tokens, p.sequential_tokens) for p in group]),
            "time_ratio": _ratio([(p.concurrent_duration, p.sequential_duration) for p in group]),
        }
    adjusted, agents_family = holm_testable(agents)
    for agent, row in agents.items():
        row["mcnemar_p_holm"] = adjusted[agent]
        row["holm_family"] = agents_family
    # Each table is its own family (the per-agent rows pool the per-cell ones: the two overlap).
    rule = "Holm within each table, over the rows whose exact test can reach p ≤ 0.05 (b + c ≥ 6)"
    family = {"alpha": ALPHA, "agents": agents_family, "cells": cells_family, "rule": rule}
    return {"cells": cells, "agents": agents, "family": family}


def _ratio(values: list[tuple[float | None, float | None]]) -> float | None:
    """Ratio of totals (concurrent / sequential) over pairs where both are known."""
    known = [(c, s) for c, s in values if c is not None and s is not None]
    total_s = sum(s for _, s in known)
    return sum(c for c, _ in known) / total_s if known and total_s else None


@dataclass(frozen=True)
class Rq4Rules:
    """When a pair counts as 'concurrency helped' (RQ4): any enabled rule that holds. The defaults
    are the study's rules."""

    higher_test_pass: bool = True  # concurrent test pass above sequential by more than the margin
    test_pass_margin: float = 0.0
    solved_only_concurrently: bool = True  # concurrent solved the task, sequential did not
    faster: bool = True  # no lower test pass, and faster by both the seconds and the fraction below
    faster_min_seconds: float = 60.0
    faster_min_fraction: float = 0.2

    def as_dict(self) -> dict:
        return asdict(self)

    def descriptions(self) -> list[str]:
        """The enabled rules in words, as the RQ4 page and the exports state them."""
        out = []
        if self.higher_test_pass:
            out.append(self.reason_higher())
        if self.solved_only_concurrently:
            out.append("solved only concurrently")
        if self.faster:
            out.append(self.reason_faster())
        return out

    def reason_higher(self) -> str:
        return "higher test pass" if not self.test_pass_margin else f"test pass higher by > {self.test_pass_margin:g}"

    def reason_faster(self) -> str:
        return f"no lower test pass, ≥ {self.faster_min_seconds:g} s and ≥ {100 * self.faster_min_fraction:g}% faster"


DEFAULT_RQ4_RULES = Rq4Rules()


def concurrency_helped(pair: PairOutcome, rules: Rq4Rules = DEFAULT_RQ4_RULES) -> list[str]:
    """Why a pair counts as 'concurrency helped' under `rules` (empty if it does not)."""
    reasons = []
    ct, st = pair.concurrent_test_pass, pair.sequential_test_pass
    if rules.higher_test_pass and ct is not None and st is not None and ct - st > rules.test_pass_margin:
        reasons.append(rules.reason_higher())
    if rules.solved_only_concurrently and pair.concurrent_pass and pair.sequential_pass is False:
        reasons.append("solved only concurrently")
    cd, sd = pair.concurrent_duration, pair.sequential_duration
    if (
        rules.faster
        and ct is not None
        and st is not None
        and ct >= st
        and cd is not None
        and sd is not None
        and sd - cd >= rules.faster_min_seconds
        and cd <= (1 - rules.faster_min_fraction) * sd
    ):
        reasons.append(rules.reason_faster())
    return reasons


# -- RQ2 -------------------------------------------------------------------------------------------

PROCESS_METRICS = (
    "subagents_created",
    "peak_concurrency",
    "first_spawn_pos",
    "first_overlap_pos",
    "overlap_ratio",
    "last_subagent_end_pos",
    "duration_s",
    "tokens",
    "shell_calls",
)


@dataclass(frozen=True)
class RunMetrics:
    agent: str
    benchmark: str
    difficulty: str
    mode: str  # concurrent | sequential
    values: Mapping[str, float | None]  # PROCESS_METRICS -> value (None: not known / not applicable)
    task: str = ""


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile by linear interpolation between order statistics (Hyndman & Fan type 7, NumPy's
    default `method="linear"`): h = (n − 1)·q, x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋ + 1] − x[⌊h⌋])."""
    h = (len(sorted_values) - 1) * q
    low = math.floor(h)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (h - low) * (sorted_values[high] - sorted_values[low])


def summary(values: Sequence[float | None]) -> dict:
    """n, median, first and third quartile of the known values (None for each when there are none)."""
    known = sorted(float(v) for v in values if v is not None)
    if not known:
        return {"n": 0, "median": None, "q1": None, "q3": None}
    return {"n": len(known), "median": quantile(known, 0.5), "q1": quantile(known, 0.25), "q3": quantile(known, 0.75)}


def process_summary(runs: Sequence[RunMetrics]) -> list[dict]:
    """RQ2: per agent × benchmark × difficulty and process metric, the concurrent runs' and the
    sequential runs' n, median, Q1 and Q3 side by side."""
    groups: dict[tuple[str, str, str], dict[str, list[RunMetrics]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        groups[(run.agent, run.benchmark, run.difficulty)][run.mode].append(run)
    rows = []
    for (agent, benchmark, difficulty), by_mode in sorted(groups.items()):
        for metric in PROCESS_METRICS:
            row = {"agent": agent, "benchmark": benchmark, "difficulty": difficulty, "metric": metric}
            for mode in ("concurrent", "sequential"):
                row[mode] = summary([r.values.get(metric) for r in by_mode.get(mode, [])])
            rows.append(row)
    return rows
