"""The study's result tables from plain rows (pure; definitions in docs/agreement.md).

* Table 3 (`failure_mode_table`): failure-mode instances from final labels per category / subcategory / mode
  (count, % of all instances), runs with ≥ 1 mode, and each code's share within each
  agent system's instances.
* RQ1 (`outcome_comparison`): task pass and mean test pass per agent × benchmark, concurrent vs sequential; the exact
  McNemar test on paired task pass per agent with Holm's correction; token and time ratios.
* RQ4 (`concurrency_helped`): pairs where concurrency helped.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass


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
    """Holm–Bonferroni adjusted p-values (statsmodels' multipletests)."""
    if not p_values:
        return {}
    from statsmodels.stats.multitest import multipletests  # heavy: loaded only when a test is computed

    adjusted = multipletests(list(p_values.values()), method="holm")[1]
    return {name: float(p) for name, p in zip(p_values, adjusted, strict=True)}


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


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
            }
        )
    agents = {}
    for agent in sorted({p.agent for p in pairs}):
        group = [p for p in pairs if p.agent == agent]
        known = [p for p in group if p.concurrent_pass is not None and p.sequential_pass is not None]
        b = sum(1 for p in known if p.concurrent_pass and not p.sequential_pass)
        c = sum(1 for p in known if p.sequential_pass and not p.concurrent_pass)
        agents[agent] = {
            "pairs": len(group),
            "concurrent_only_pass": b,
            "sequential_only_pass": c,
            "mcnemar_p": mcnemar_exact(b, c),
            "token_ratio": _ratio([(p.concurrent_tokens, p.sequential_tokens) for p in group]),
            "time_ratio": _ratio([(p.concurrent_duration, p.sequential_duration) for p in group]),
        }
    adjusted = holm({agent: row["mcnemar_p"] for agent, row in agents.items()})
    for agent, row in agents.items():
        row["mcnemar_p_holm"] = adjusted[agent]
    return {"cells": cells, "agents": agents}


def _ratio(values: list[tuple[float | None, float | None]]) -> float | None:
    """Ratio of totals (concurrent / sequential) over pairs where both are known."""
    known = [(c, s) for c, s in values if c is not None and s is not None]
    total_s = sum(s for _, s in known)
    return sum(c for c, _ in known) / total_s if known and total_s else None


def concurrency_helped(pair: PairOutcome) -> list[str]:
    """Why a pair counts as 'concurrency helped' (empty if it does not)."""
    reasons = []
    ct, st = pair.concurrent_test_pass, pair.sequential_test_pass
    if ct is not None and st is not None and ct > st:
        reasons.append("higher test pass")
    if pair.concurrent_pass and pair.sequential_pass is False:
        reasons.append("solved only concurrently")
    cd, sd = pair.concurrent_duration, pair.sequential_duration
    if (
        ct is not None
        and st is not None
        and ct >= st
        and cd is not None
        and sd is not None
        and sd - cd >= 60
        and cd <= 0.8 * sd
    ):
        reasons.append("no lower test pass, ≥ 60 s and ≥ 20% faster")
    return reasons
