"""RQ1's effect sizes and RQ2's quartiles (pure), against the libraries that own them: statsmodels'
McNemar and proportion intervals, NumPy's percentiles; and the analysis settings' validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from annotation.analysis.reports import (
    DEFAULT_RQ4_RULES,
    PairOutcome,
    Rq4Rules,
    RunMetrics,
    concurrency_helped,
    newcombe_paired_difference,
    outcome_comparison,
    paired_odds_ratio,
    paired_task_pass,
    process_summary,
    quantile,
    wilson_interval,
)
from annotation.study_settings import SettingsError, mechanisms, parse_mechanisms, rq4_rules, rq4_settings

TABLES = [(10, 5, 1, 4), (3, 0, 4, 9), (0, 7, 0, 0), (20, 12, 9, 30), (1, 1, 1, 1), (50, 0, 0, 2), (2, 13, 2, 1)]


def pairs_from(a: int, b: int, c: int, d: int) -> list[tuple[bool, bool]]:
    return [(True, True)] * a + [(True, False)] * b + [(False, True)] * c + [(False, False)] * d


@pytest.mark.parametrize("table", TABLES)
def test_mcnemar_n_b_c_and_exact_p_are_statsmodels(table):
    a, b, c, d = table
    row = paired_task_pass(pairs_from(*table))
    assert (row["n"], row["b"], row["c"]) == (a + b + c + d, b, c)
    assert row["mcnemar_p"] == pytest.approx(mcnemar([[a, b], [c, d]], exact=True).pvalue, abs=1e-12)


@pytest.mark.parametrize(("k", "n"), [(0, 5), (5, 5), (3, 10), (17, 40), (1, 1), (120, 354)])
def test_wilson_and_clopper_pearson_are_statsmodels(k, n):
    assert wilson_interval(k, n) == pytest.approx(proportion_confint(k, n, alpha=0.05, method="wilson"), abs=1e-12)
    b, c = k, n - k
    _, low, high = paired_odds_ratio(b, c)
    p_low, p_high = proportion_confint(b, b + c, alpha=0.05, method="beta")
    assert low == pytest.approx(p_low / (1 - p_low), rel=1e-12)
    assert (high is None) == (c == 0)
    if high is not None:
        assert high == pytest.approx(p_high / (1 - p_high), rel=1e-12)


@pytest.mark.parametrize("table", [(6, 3, 2, 1), (4, 2, 2, 1), (0, 0, 5, 5), (8, 2, 4, 1)])
def test_newcombe_with_no_correlation_is_statsmodels_independent_newcombe(table):
    """With φ = 0 (ad = bc, or a margin empty) method 10 is the independent-samples Newcombe interval
    of the two marginal proportions: statsmodels' confint_proportions_2indep(method="newcomb")."""
    a, b, c, d = table
    assert a * d == b * c or 0 in (a + b, c + d, a + c, b + d)
    n = a + b + c + d
    theta, low, high = newcombe_paired_difference(a, b, c, d)
    assert theta == pytest.approx((b - c) / n)
    expected = confint_proportions_2indep(a + b, n, a + c, n, method="newcomb", compare="diff")
    assert (low, high) == pytest.approx(expected, abs=1e-12)


def test_newcombe_with_correlation_by_hand():
    """(a, b, c, d) = (10, 5, 1, 4): ad − bc = 35 > n/2, so φ = (35 − 10)/√(15·5·11·9) — Newcombe's continuity
    correction; the Wilson limits from statsmodels."""
    a, b, c, d = 10, 5, 1, 4
    n = 20
    p1, p2 = 15 / n, 11 / n
    l1, u1 = proportion_confint(15, n, method="wilson")
    l2, u2 = proportion_confint(11, n, method="wilson")
    phi = (35 - n / 2) / math.sqrt(15 * 5 * 11 * 9)
    low = p1 - p2 - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    high = p1 - p2 + math.sqrt((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2)
    assert newcombe_paired_difference(a, b, c, d) == pytest.approx((0.2, low, high), abs=1e-12)
    # swapping the two sides mirrors the interval
    theta, lo, hi = newcombe_paired_difference(a, c, b, d)
    assert (theta, lo, hi) == pytest.approx((-0.2, -high, -low), abs=1e-12)
    assert newcombe_paired_difference(0, 0, 0, 0) is None


@pytest.mark.parametrize(
    ("table", "published"),
    [
        # Newcombe & Altman (Statistics with Confidence, 2000), the worked example of method 10: (a, b, c, d)
        ((7, 25, 2, 68), (0.133, 0.318)),
        # ad − bc = 2 ≤ n/2: the corrected φ is 0 (Fagerland, Lydersen & Laake 2014; ratesci)
        ((1, 0, 0, 2), (-0.471, 0.471)),
    ],
)
def test_newcombe_gives_the_published_intervals(table, published):
    _, low, high = newcombe_paired_difference(*table)
    assert (round(low, 3), round(high, 3)) == published


def test_the_mid_p_interval_solves_its_definition_and_lies_inside_the_exact_one():
    from scipy.stats import binom

    from annotation.analysis.reports import clopper_pearson, mid_p_interval

    for k, n in ((3, 10), (1, 7), (9, 9), (0, 5), (12, 30)):
        low, high = mid_p_interval(k, n)
        if k:
            assert binom.sf(k, n, low) + binom.pmf(k, n, low) / 2 == pytest.approx(0.025, abs=1e-10)
        if k < n:
            assert binom.cdf(k - 1, n, high) + binom.pmf(k, n, high) / 2 == pytest.approx(0.025, abs=1e-10)
        exact_low, exact_high = clopper_pearson(k, n)
        assert exact_low <= low <= high <= exact_high


def test_holm_counts_only_the_rows_that_can_reach_significance():
    """Tarone (1990): 13 rows with b + c = 0 (p = 1) do not join the family — p = (0.004, 0.03) stay (0.008, 0.03),
    not (0.06, 0.42)."""
    from annotation.analysis.reports import holm_testable

    rows = {f"empty{i}": {"mcnemar_p": 1.0, "b": 0, "c": 0} for i in range(13)}
    rows["x"] = {"mcnemar_p": 0.004, "b": 8, "c": 0}
    rows["y"] = {"mcnemar_p": 0.03, "b": 9, "c": 2}
    rows["five"] = {"mcnemar_p": 0.0625, "b": 5, "c": 0}  # b + c = 5: its smallest p is 0.0625 > 0.05
    adjusted, family = holm_testable(rows)
    assert family == 2 and (adjusted["x"], adjusted["y"]) == pytest.approx((0.008, 0.03))
    assert adjusted["five"] is None and all(adjusted[f"empty{i}"] is None for i in range(13))


def test_odds_ratio_edges():
    assert paired_odds_ratio(0, 0) == (None, None, None)
    odds, low, high = paired_odds_ratio(4, 0)  # unbounded above
    assert odds is None and high is None and low > 0
    odds, low, high = paired_odds_ratio(0, 4)
    assert odds == 0.0 and low == 0.0 and high is not None


def pair(cp, sp, agent="Codex", bench="B", ct=None, st=None, cd=None, sd=None):
    return PairOutcome(agent, bench, "t", cp, sp, ct, st, cd, sd, None, None)


def test_rq1_per_agent_and_per_cell_with_holm_within_each_table():
    pairs = (
        [pair(True, False, "A", "X")] * 6 + [pair(True, True, "A", "X")] * 2 + [pair(False, True, "A", "Y")]
        + [pair(True, None, "A", "Y")]  # one outcome unknown: counts in neither n nor the means
        + [pair(False, True, "B", "X")] * 4 + [pair(False, False, "B", "X")] * 3
    )  # fmt: skip
    result = outcome_comparison(pairs)
    cells = {(c["agent"], c["benchmark"]): c for c in result["cells"]}
    ax = cells[("A", "X")]
    assert (ax["n"], ax["b"], ax["c"]) == (8, 6, 0)
    assert ax["mcnemar_p"] == pytest.approx(mcnemar([[2, 6], [0, 0]], exact=True).pvalue)
    assert ax["task_pass_difference"] == pytest.approx(6 / 8) and ax["odds_ratio"] is None
    ay = cells[("A", "Y")]
    assert (ay["pairs"], ay["n"], ay["b"], ay["c"]) == (2, 1, 0, 1)
    assert ay["concurrent_task_pass"] == 0.0 and ay["sequential_task_pass"] == 1.0  # paired: 1 pair only
    # Holm within each table, over the rows whose test can reach p ≤ 0.05 (b + c ≥ 6): A×X alone per cell
    assert [c["mcnemar_p_holm"] for c in result["cells"]] == [ax["mcnemar_p"], None, None]
    assert result["family"]["cells"] == 1 and {c["holm_family"] for c in result["cells"]} == {1}
    agents = result["agents"]
    assert (agents["A"]["n"], agents["A"]["b"], agents["A"]["c"], agents["A"]["pairs"]) == (9, 6, 1, 10)
    assert (agents["B"]["b"], agents["B"]["c"], agents["B"]["odds_ratio"]) == (0, 4, 0.0)
    # per agent: A (b + c = 7) is in the family, B (4) is not
    assert (agents["A"]["mcnemar_p_holm"], agents["B"]["mcnemar_p_holm"]) == (agents["A"]["mcnemar_p"], None)
    assert ax["odds_ratio_state"] == "infinite" and agents["B"]["odds_ratio_state"] == "finite"


@pytest.mark.parametrize("values", [[3.0], [1.0, 2.0], [5, 1, 4, 2, 3], [0.1, 0.9, 0.35, 0.35, 0.2, 0.8, 0.11]])
def test_quartiles_are_numpys_linear_percentiles(values):
    ordered = sorted(float(v) for v in values)
    for q in (0.25, 0.5, 0.75):
        assert quantile(ordered, q) == pytest.approx(float(np.percentile(values, 100 * q, method="linear")), rel=1e-12)


def test_rq2_summary_side_by_side_per_agent_benchmark_difficulty():
    rng = np.random.default_rng(3)
    runs = []
    for mode, scale in (("concurrent", 2.0), ("sequential", 1.0)):
        for _ in range(9):
            runs.append(RunMetrics("Codex", "B", "hard", mode, {"duration_s": float(rng.gamma(2.0, scale)),
                                                                "tokens": None, "peak_concurrency": 2}))  # fmt: skip
    runs.append(RunMetrics("Codex", "B", "easy", "concurrent", {"duration_s": 7.0}))
    rows = {(r["difficulty"], r["metric"]): r for r in process_summary(runs)}
    hard = rows[("hard", "duration_s")]
    for mode in ("concurrent", "sequential"):
        values = [r.values["duration_s"] for r in runs if r.mode == mode and r.difficulty == "hard"]
        q1, median, q3 = np.percentile(values, [25, 50, 75])
        assert hard[mode] == pytest.approx({"n": 9, "median": median, "q1": q1, "q3": q3}, rel=1e-12)
    assert rows[("hard", "tokens")]["concurrent"] == {"n": 0, "median": None, "q1": None, "q3": None}
    assert rows[("easy", "duration_s")]["sequential"]["n"] == 0
    assert rows[("easy", "duration_s")]["concurrent"]["median"] == 7.0


def test_rq4_rules_default_to_the_studys_and_their_thresholds_apply():
    p = pair(True, True, ct=1.0, st=1.0, cd=100, sd=200)
    assert (
        concurrency_helped(p)
        == concurrency_helped(p, DEFAULT_RQ4_RULES)
        == ["no lower test pass, ≥ 60 s and ≥ 20% faster"]
    )
    assert concurrency_helped(p, Rq4Rules(faster_min_seconds=120)) == []
    assert concurrency_helped(p, Rq4Rules(faster_min_fraction=0.6)) == []
    assert concurrency_helped(p, Rq4Rules(faster=False)) == []
    q = pair(False, False, ct=0.6, st=0.5)
    assert concurrency_helped(q, Rq4Rules(test_pass_margin=0.2)) == []
    assert concurrency_helped(q, Rq4Rules(test_pass_margin=0.05)) == ["test pass higher by > 0.05"]
    assert concurrency_helped(pair(True, False), Rq4Rules(solved_only_concurrently=False)) == []


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"test_pass_margin": -0.1}, "test_pass_margin"),
        ({"test_pass_margin": 1.0}, "test_pass_margin"),
        ({"faster_min_seconds": -1}, "faster_min_seconds"),
        ({"faster_min_fraction": 1.5}, "faster_min_fraction"),
        ({"faster_min_fraction": "0.2"}, "faster_min_fraction"),
        ({"faster_min_seconds": float("nan")}, "faster_min_seconds"),
        ({"faster": "yes"}, "faster"),
        ({"higher_test_pass": False, "solved_only_concurrently": False, "faster": False}, "higher_test_pass"),
        ({"slower": True}, "slower"),
    ],
)
def test_a_bad_rule_names_its_field(data, field):
    with pytest.raises(SettingsError) as caught:
        rq4_rules(data)
    assert caught.value.field == field


@pytest.mark.parametrize(
    "text", ["", "Bad Key: x", "a: x\na: y", "a: " + "x" * 101, "\n".join(f"t{i}: x" for i in range(21))]
)
def test_bad_mechanism_tags_are_refused(text):
    with pytest.raises(SettingsError) as caught:
        parse_mechanisms(text)
    assert caught.value.field == "mechanisms"


def test_settings_defaults_and_round_trip():
    rules, tags = rq4_settings({})
    assert rules == DEFAULT_RQ4_RULES and tags[0] == ("complementary", "complementary work") and len(tags) == 5
    assert parse_mechanisms("split-work: split the work\nsolo") == [("split-work", "split the work"), ("solo", "solo")]
    with pytest.raises(SettingsError):
        mechanisms([["ok", "fine"], ["ok2"]])
    with pytest.raises(SettingsError) as caught:
        rq4_settings({"rules": {}, "extra": 1})
    assert caught.value.field == "extra"
