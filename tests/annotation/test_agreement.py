"""Agreement statistics against hand computations and published examples."""

from __future__ import annotations

import numpy as np
import pytest

from annotation.analysis.agreement import (
    AgreementInputError,
    Coding,
    Taxonomy,
    agreement_report,
    alpha_masi,
    alpha_nominal_binary,
    cohen_kappa,
    count_agreement,
    fleiss_kappa_binary,
    headline_bootstrap,
    masi_distance,
)

TAX = Taxonomy({"m1": ("s1", "c1"), "m2": ("s2", "c1")})


def c(item, annotator, *codes):
    return Coding(item, annotator, frozenset(codes))


# Four items coded by A and B (worked by hand in docs/agreement.md).
EXAMPLE = [
    c("i1", "A", "m1"),
    c("i1", "B", "m1"),
    c("i2", "A", "m1", "m2"),
    c("i2", "B", "m1"),
    c("i3", "A"),
    c("i3", "B", "m2"),
    c("i4", "A", "m2"),
    c("i4", "B", "m2"),
]


def test_cohen_kappa_published_example():
    # Wikipedia's worked example: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no -> κ = 0.4
    x = [1] * 20 + [1] * 5 + [0] * 10 + [0] * 15
    y = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    assert cohen_kappa(x, y) == pytest.approx(0.4)


def test_kappa_undefined_exactly_when_pe_is_one():
    assert cohen_kappa([0, 0, 0], [0, 0, 0]) is None
    assert cohen_kappa([1, 1], [1, 1]) is None
    assert cohen_kappa([], []) is None
    assert cohen_kappa([0, 0, 0], [1, 1, 1]) == 0.0  # p_e = 0: defined
    assert cohen_kappa([1, 1, 1, 0], [1, 1, 1, 1]) == 0.0  # one rater constant, p_e < 1: defined


def test_pair_levels_by_hand():
    report = agreement_report(TAX, EXAMPLE)
    [pair] = report["pairs"]
    assert pair["annotators"] == ["A", "B"]
    mode = pair["levels"]["mode"]
    # n11=3, n10=1, n01=1, n00=3: p_o=.75, p_e=.5 -> κ=.5
    assert mode["n_shared_items"] == 4
    assert mode["pooled"]["kappa"] == pytest.approx(0.5)
    assert mode["per_code_kappa"] == {"m1": pytest.approx(1.0), "m2": pytest.approx(0.0)}
    assert mode["macro"] == {"kappa": pytest.approx(0.5), "n_codes_defined": 2, "n_codes_undefined": 0, "n_codes": 2}
    assert mode["alpha_masi"]["alpha"] == pytest.approx(5 / 12)
    # category level: A {c1,c1,-,c1}, B all c1 -> p_o = p_e = .75 -> κ = 0
    assert pair["levels"]["category"]["pooled"]["kappa"] == pytest.approx(0.0)
    assert pair["levels"]["subcategory"]["pooled"]["kappa"] == pytest.approx(0.5)


def test_overall_by_hand():
    overall = agreement_report(TAX, EXAMPLE)["overall"]["mode"]
    assert overall["mean_pairwise_pooled_kappa"] == pytest.approx(0.5)
    assert overall["item_weighted_mean_pairwise_pooled_kappa"] == pytest.approx(0.5)
    assert overall["n_pairs_defined"] == 1
    assert overall["fleiss_kappa_pooled"] == pytest.approx(0.5)  # P̄ = .75, P_e = .5
    assert overall["alpha_nominal_pooled_binary"] == pytest.approx(0.53125)  # 1 − 15·4 / (2·8·8)
    assert overall["alpha_masi_all_annotators"] == pytest.approx(5 / 12)


def test_macro_kappa_averages_one_code_set_for_every_pair():
    # A-B: m1 and m2 both vary -> both defined. A-C on j1..j3: C and A never use m2 there -> m2 undefined.
    # Every pair's macro averages the codes defined for *every* pair (m1 only), so the pairs are comparable.
    codings = EXAMPLE + [
        c("j1", "A", "m1"), c("j1", "C", "m1"),
        c("j2", "A"), c("j2", "C", "m1"),
        c("j3", "A"), c("j3", "C"),
    ]  # fmt: skip
    report = agreement_report(TAX, codings)
    rows = {tuple(p["annotators"]): p["levels"]["mode"] for p in report["pairs"]}
    ab, ac = rows[("A", "B")], rows[("A", "C")]
    assert ab["per_code_kappa"]["m2"] == pytest.approx(0.0) and ac["per_code_kappa"]["m2"] is None
    assert ab["macro"]["n_codes"] == ac["macro"]["n_codes"] == 1
    assert ab["macro"]["kappa"] == pytest.approx(ab["per_code_kappa"]["m1"])  # not the mean of m1 and m2
    assert ac["macro"]["kappa"] == pytest.approx(ac["per_code_kappa"]["m1"])
    assert rows[("B", "C")]["n_shared_items"] == 0 and rows[("B", "C")]["macro"]["kappa"] is None
    assert report["overall"]["mode"]["macro_n_codes"] == 1
    assert report["overall"]["mode"]["mean_pairwise_macro_kappa"] == pytest.approx(
        (ab["per_code_kappa"]["m1"] + ac["per_code_kappa"]["m1"]) / 2
    )


def test_fleiss_takes_the_designed_coders_per_run_and_counts_the_rest():
    # Two coders per run by design; one run has a third (a reassigned slot's extra coding) and one only one.
    codings = EXAMPLE + [c("i1", "C", "m2"), c("j1", "A", "m1")]
    by_design = agreement_report(TAX, codings, raters=2)["overall"]["mode"]
    assert by_design["fleiss_raters_per_run"] == 2 and by_design["fleiss_raters_from"] == "design"
    assert by_design["fleiss_n_runs"] == 3  # i2, i3, i4: exactly two codings
    assert by_design["fleiss_runs_more"] == 1 and by_design["fleiss_runs_fewer"] == 1
    three = [x for x in EXAMPLE if x.item in {"i2", "i3", "i4"}]
    assert by_design["fleiss_kappa_pooled"] == pytest.approx(
        agreement_report(TAX, three)["overall"]["mode"]["fleiss_kappa_pooled"]
    )
    # Without the design, the most codings any run has (3) would leave Fleiss one run.
    from_data = agreement_report(TAX, codings)["overall"]["mode"]
    assert from_data["fleiss_raters_per_run"] == 3 and from_data["fleiss_raters_from"] == "data"
    assert from_data["fleiss_n_runs"] == 1 and from_data["fleiss_runs_fewer"] == 4


def test_agreement_on_episode_counts_by_hand():
    def counted(item, annotator, **episodes):
        return Coding(item, annotator, frozenset(episodes), counts=tuple(sorted(episodes.items())))

    codings = [
        counted("r1", "A", m1=2), counted("r1", "B", m1=1),  # the mode agreed, not its count
        counted("r2", "A", m1=1, m2=1), counted("r2", "B", m1=1),  # m1 agreed with its count; m2 by A alone
        counted("r3", "A"), counted("r3", "B"),  # nothing seen: no unit
        counted("r4", "A", m2=1),  # coded once: no unit
    ]  # fmt: skip
    result = count_agreement(codings)
    # units [2, 1], [1, 1], [1, 0]: n = 6 values; D_o = (2 + 0 + 2) / 6; D_e = 2 (6·8 − 6²) / (6·5) = 0.8
    assert result["alpha_interval"] == pytest.approx(1 - (4 / 6) / 0.8)
    assert (result["n_units"], result["n_runs"], result["n_values"]) == (3, 2, 6)
    assert (result["units_mode_agreed"], result["units_count_identical"]) == (2, 1)
    assert result["share_count_identical"] == pytest.approx(0.5)
    # A coding from a file of mode sets counts one episode per mode; every count equal: α undefined.
    plain = count_agreement([c("i", "A", "m1"), c("i", "B", "m1")])
    assert plain["alpha_interval"] is None and plain["share_count_identical"] == 1.0
    assert count_agreement([])["alpha_interval"] is None


def test_universe_is_the_codebook_not_the_data():
    tax = Taxonomy({"m1": ("s1", "c1"), "m2": ("s2", "c1"), "unused": ("s3", "c2")})
    mode = agreement_report(tax, EXAMPLE)["pairs"][0]["levels"]["mode"]
    # the unused code adds 4 agreeing 0/0 decisions: n00 = 7 of 12 -> p_o = 10/12, p_e = (1/3)(1/3)+(2/3)(2/3)
    p_o, p_e = 10 / 12, 1 / 9 + 4 / 9
    assert mode["pooled"]["kappa"] == pytest.approx((p_o - p_e) / (1 - p_e))
    assert mode["per_code_kappa"]["unused"] is None
    assert mode["macro"]["n_codes_undefined"] == 1 and mode["macro"]["n_codes_defined"] == 2
    assert mode["macro"]["n_codes"] == 2 and mode["macro"]["kappa"] == pytest.approx(0.5)  # the unused code not in it


def test_pair_without_shared_items_is_undefined_and_excluded():
    codings = EXAMPLE + [c("j1", "C", "m1"), c("j2", "C")]
    report = agreement_report(TAX, codings)
    pairs = {tuple(p["annotators"]): p["levels"]["mode"] for p in report["pairs"]}
    assert pairs[("A", "C")]["n_shared_items"] == 0 and pairs[("A", "C")]["pooled"]["kappa"] is None
    assert pairs[("A", "C")]["alpha_masi"]["alpha"] is None
    assert report["overall"]["mode"]["n_pairs_defined"] == 1
    assert report["overall"]["mode"]["mean_pairwise_pooled_kappa"] == pytest.approx(0.5)


def test_everyone_codes_nothing():
    codings = [c("i1", "A"), c("i1", "B"), c("i2", "A"), c("i2", "B")]
    report = agreement_report(TAX, codings)
    mode = report["pairs"][0]["levels"]["mode"]
    assert mode["pooled"]["kappa"] is None and mode["macro"]["kappa"] is None
    assert mode["alpha_masi"]["alpha"] is None  # every value is ∅: no expected disagreement
    assert report["overall"]["mode"]["fleiss_kappa_pooled"] is None
    assert report["overall"]["mode"]["mean_pairwise_pooled_kappa"] is None


def test_masi_distance():
    a, b = frozenset({"x"}), frozenset({"x", "y"})
    assert masi_distance(frozenset(), frozenset()) == 0
    assert masi_distance(frozenset(), a) == 1
    assert masi_distance(a, b) == pytest.approx(1 - 0.5 * 2 / 3)
    assert masi_distance(frozenset({"x", "z"}), b) == pytest.approx(1 - (1 / 3) * (1 / 3))
    assert masi_distance(a, frozenset({"y"})) == 1


def test_krippendorff_published_nominal_example():
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 observers, 12 units, nominal α = 0.743.
    # With singleton sets MASI is the nominal metric. Unit 12 has one value and is not pairable.
    data = [
        [1, 1, 1],
        [2, 2, 3, 2],
        [3, 3, 3, 3],
        [3, 3, 3, 3],
        [2, 2, 2, 2],
        [1, 2, 3, 4],
        [4, 4, 4, 4],
        [1, 1, 2, 1],
        [2, 2, 2, 2],
        [5, 5, 5],
        [1, 1],
        [3],
    ]
    units = [[frozenset({str(v)}) for v in unit] for unit in data]
    assert alpha_masi(units) == pytest.approx(0.743, abs=5e-4)


def test_binary_alpha_and_fleiss_undefined_cases():
    assert alpha_nominal_binary([(0, 0), (0, 0)]) is None
    assert fleiss_kappa_binary([(1, 1)]) is None
    assert fleiss_kappa_binary([]) is None
    with pytest.raises(AgreementInputError, match="same number"):
        fleiss_kappa_binary([(1, 0), (1, 0, 1)])


def test_three_coders_per_run_against_the_libraries():
    """k = 3 of 4 annotators per run: every pair gets its κ, Fleiss' κ takes the runs with all three
    codings (a run with two so far is left out of it), α takes every run coded twice or more."""
    import krippendorff
    import numpy as np
    from statsmodels.stats.inter_rater import fleiss_kappa

    codings = [
        c("i1", "A", "m1"), c("i1", "B", "m1"), c("i1", "C", "m1", "m2"),
        c("i2", "B", "m2"), c("i2", "C"), c("i2", "D", "m2"),
        c("i3", "A"), c("i3", "C", "m2"), c("i3", "D"),
        c("i4", "A", "m1", "m2"), c("i4", "B", "m1"), c("i4", "D", "m2"),
        c("i5", "A", "m1"), c("i5", "B"),  # in progress: two of three codings so far
    ]  # fmt: skip
    report = agreement_report(TAX, codings)
    assert [p["annotators"] for p in report["pairs"]] == [
        ["A", "B"], ["A", "C"], ["A", "D"], ["B", "C"], ["B", "D"], ["C", "D"]
    ]  # fmt: skip
    overall = report["overall"]["mode"]
    # run × code units, the three ratings of i1..i4 (m1, then m2)
    units = [(1, 1, 1), (0, 0, 1), (0, 0, 0), (1, 0, 1), (0, 0, 0), (0, 1, 0), (1, 1, 0), (1, 0, 1)]
    counts = np.array([[3 - sum(u), sum(u)] for u in units])
    assert overall["fleiss_kappa_pooled"] == pytest.approx(fleiss_kappa(counts, method="fleiss"))
    assert overall["fleiss_raters_per_run"] == 3
    assert overall["fleiss_n_runs"] == 4
    with_i5 = np.full((3, len(units) + 2), np.nan)
    with_i5[:, : len(units)] = np.array(units).T
    with_i5[:2, len(units) :] = [[1, 0], [0, 0]]  # i5: m1 by A and not B; m2 by neither
    expected = krippendorff.alpha(reliability_data=with_i5, level_of_measurement="nominal")
    assert overall["alpha_nominal_pooled_binary"] == pytest.approx(expected)
    # the A–B pair: i1, i4, i5 shared -> decisions (m1, m2): i1 (1,1)(0,0), i4 (1,1)(1,0), i5 (1,0)(0,0)
    from sklearn.metrics import cohen_kappa_score

    ab = report["pairs"][0]["levels"]["mode"]
    assert ab["n_shared_items"] == 3
    assert ab["pooled"]["kappa"] == pytest.approx(cohen_kappa_score([1, 0, 1, 1, 1, 0], [1, 0, 1, 0, 0, 0]))


def test_the_report_over_arrays_equals_the_definitions_on_random_studies():
    """agreement_report computes over arrays; on random studies (4 annotators, 3 per run, runs still
    missing codings, three levels) every figure equals the scalar definitions it stands for: scikit-learn's
    κ per pair and code, the MASI α of alpha_masi, Krippendorff's nominal α and statsmodels' Fleiss' κ."""
    import itertools
    import random

    from sklearn.metrics import cohen_kappa_score

    tax = Taxonomy({f"m{i}": (f"s{i % 4}", f"c{i % 2}") for i in range(7)})
    for seed in range(3):
        rng = random.Random(seed)
        codings = []
        for i in range(80):
            coders = rng.sample("ABCD", rng.choice((1, 2, 3, 3, 3)))
            base = set(rng.sample(sorted(tax.modes), rng.choice((0, 1, 2))))
            for who in coders:
                codes = base if rng.random() < 0.6 else set(rng.sample(sorted(tax.modes), rng.choice((0, 1, 2, 3))))
                codings.append(c(f"i{i}", who, *codes))
        report = agreement_report(tax, codings, raters=3)
        index = {}
        for x in codings:
            index.setdefault(x.item, {})[x.annotator] = x.codes
        for pair in report["pairs"]:
            a, b = pair["annotators"]
            shared = sorted(item for item, coders in index.items() if a in coders and b in coders)
            for level, row in pair["levels"].items():
                sa = [tax.lift(index[item][a], level) for item in shared]
                sb = [tax.lift(index[item][b], level) for item in shared]
                for code in tax.universe(level):
                    x, y = [int(code in s) for s in sa], [int(code in s) for s in sb]
                    expected = None if (sum(x) == sum(y) and sum(x) in (0, len(x))) else cohen_kappa_score(x, y)
                    assert row["per_code_kappa"][code] == pytest.approx(expected, abs=1e-12)
                x = [int(code in s) for s in sa for code in tax.universe(level)]
                y = [int(code in s) for s in sb for code in tax.universe(level)]
                assert row["pooled"]["kappa"] == pytest.approx(cohen_kappa(x, y), abs=1e-12)
                assert row["alpha_masi"]["alpha"] == pytest.approx(
                    alpha_masi(list(zip(sa, sb, strict=True))), abs=1e-12
                )
        for level, overall in report["overall"].items():
            lifted = [[tax.lift(v, level) for v in coders.values()] for coders in index.values()]
            units = [
                [int(code in s) for s in sets] for sets in lifted if len(sets) >= 2 for code in tax.universe(level)
            ]
            complete = [
                u
                for sets in lifted
                if len(sets) == 3
                for u in [[int(code in s) for s in sets] for code in tax.universe(level)]
            ]
            assert overall["alpha_nominal_pooled_binary"] == pytest.approx(alpha_nominal_binary(units), abs=1e-12)
            assert overall["fleiss_kappa_pooled"] == pytest.approx(fleiss_kappa_binary(complete), abs=1e-12)
            assert overall["alpha_masi_all_annotators"] == pytest.approx(alpha_masi(lifted), abs=1e-12)
        assert [p["annotators"] for p in report["pairs"]] == [list(p) for p in itertools.combinations("ABCD", 2)]


def test_input_errors():
    with pytest.raises(AgreementInputError, match="unknown mode"):
        agreement_report(TAX, [c("i1", "A", "nope")])
    with pytest.raises(AgreementInputError, match="coded twice"):
        agreement_report(TAX, [c("i1", "A"), c("i1", "A", "m1")])


def test_bootstrap_ci_contains_the_point_and_is_reproducible():
    codings = []
    for i in range(60):
        codes_a = ("m1",) if i % 3 else ("m2",)
        codes_b = codes_a if i % 5 else ("m1", "m2")
        codings += [c(f"i{i}", "A", *codes_a), c(f"i{i}", "B", *codes_b)]
    point = agreement_report(TAX, codings)["overall"]["mode"]["mean_pairwise_pooled_kappa"]
    ci = headline_bootstrap(TAX, codings, n_resamples=300, seed=1)
    assert ci["kappa"] == pytest.approx(point)
    assert ci["ci_low"] <= point <= ci["ci_high"] and ci["ci_low"] < ci["ci_high"]
    assert ci == headline_bootstrap(TAX, codings, n_resamples=300, seed=1)


def test_bootstrap_limits_carry_their_monte_carlo_error():
    # 300 runs, 12 modes, two coders who mostly agree: κ's bootstrap distribution is close to continuous.
    rng = np.random.default_rng(5)
    tax = Taxonomy({f"m{i}": (f"s{i % 5}", f"c{i % 3}") for i in range(12)})
    codings = []
    for i in range(300):
        first = set(rng.choice(sorted(tax.modes), size=rng.integers(0, 3), replace=False))
        second = set(first)
        if rng.random() < 0.3:
            second.add(str(rng.choice(sorted(tax.modes))))
        if rng.random() < 0.2 and second:
            second.remove(min(second))  # not set.pop(): its choice moves with the process's hash seed
        codings += [c(f"i{i}", "A", *first), c(f"i{i}", "B", *second)]
    # The stated error is what the limit really varies by from one seed to the next (within a factor 1.5) ...
    runs = [headline_bootstrap(tax, codings, n_resamples=1000, seed=seed) for seed in range(20)]
    for limit in ("ci_low", "ci_high"):
        spread = np.std([r[limit] for r in runs], ddof=1)
        stated = np.mean([r[f"{limit}_mcse"] for r in runs])
        assert spread / 1.5 < stated < spread * 1.5, (limit, spread, stated)
    # ... it shrinks as the resamples grow; too few resamples to batch leave it unstated.
    assert headline_bootstrap(tax, codings, n_resamples=10_000, seed=0)["ci_low_mcse"] < stated / 2
    assert headline_bootstrap(tax, codings, n_resamples=50, seed=0)["ci_low_mcse"] is None


def test_command_on_a_file(tmp_path):
    import json
    from io import StringIO

    from django.core.management import call_command

    data = {
        "taxonomy": {
            "modes": {"m1": {"subcategory": "s1", "category": "c1"}, "m2": {"subcategory": "s2", "category": "c1"}}
        },
        "annotations": [
            {"item": x.item, "annotator": x.annotator, "codes": sorted(x.codes), "extra": 1} for x in EXAMPLE
        ],
    }
    path = tmp_path / "in.json"
    path.write_text(json.dumps(data))
    out = StringIO()
    call_command("agreement", "--input", str(path), "--format", "json", stdout=out)
    report = json.loads(out.getvalue())
    level = report["pairs"][0]["levels"]["mode"]
    assert set(level) == {"n_shared_items", "pooled", "macro", "per_code_kappa", "alpha_masi"}
    assert level["pooled"]["kappa"] == pytest.approx(0.5)
    assert set(report["overall"]["category"]) == {
        "mean_pairwise_pooled_kappa",
        "item_weighted_mean_pairwise_pooled_kappa",
        "mean_pairwise_macro_kappa",
        "n_pairs_defined",
        "fleiss_kappa_pooled",
        "macro_n_codes",
        "fleiss_raters_per_run",
        "fleiss_raters_from",
        "fleiss_n_runs",
        "fleiss_runs_fewer",
        "fleiss_runs_more",
        "alpha_nominal_pooled_binary",
        "alpha_masi_all_annotators",
    }
    assert "headline" not in report


def test_command_reports_bad_files(tmp_path):
    from django.core.management import CommandError, call_command

    bad = tmp_path / "bad.json"
    bad.write_text('{"taxonomy": ')
    with pytest.raises(CommandError, match=r"bad.json:1:\d+: not valid JSON"):
        call_command("agreement", "--input", str(bad))
    bad.write_text('{"taxonomy": {"modes": {"m1": {"subcategory": "s"}}}, "annotations": []}')
    with pytest.raises(CommandError, match="needs 'subcategory' and 'category'"):
        call_command("agreement", "--input", str(bad))


@pytest.mark.django_db
def test_command_on_a_study_uses_first_submissions(study, trio, codebook):
    import json
    from io import StringIO

    from django.core.management import call_command

    from annotation.models import Assignment
    from annotation.selectors.queue import annotation_for
    from annotation.services.coding import LabelInput, annotation_save, annotation_submit

    code = codebook.codes.get(key="lossy-handoff")
    for assignment in Assignment.objects.filter(study=study):
        annotation = annotation_for(assignment=assignment)
        labels = [LabelInput(code_id=code.pk, rationale="r")] if assignment.slot == 1 else []
        annotation_save(
            annotation=annotation, actor=assignment.annotator, version=1, no_failure=not labels, notes="", labels=labels
        )
        annotation_submit(annotation=annotation, actor=assignment.annotator, version=2)
    out = StringIO()
    call_command("agreement", "--study", str(study.pk), "--ci", "--resamples", "50", stdout=out)
    report = json.loads(out.getvalue())
    assert len(report["pairs"]) == 3
    assert sum(p["levels"]["mode"]["n_shared_items"] for p in report["pairs"]) == 6
    # slot 1 always says lossy-handoff, slot 2 never: p_o < 1 and κ ≤ 0 at every level
    assert report["overall"]["mode"]["mean_pairwise_pooled_kappa"] <= 0
    assert report["headline"]["n_items"] == 6
    # The command prints what the dashboard shows: the study's own seed and the same function.
    from django.core.management import CommandError

    from annotation.analysis import compute
    from annotation.analysis.inputs import read_inputs

    study.seed = 7
    study.save(update_fields=["seed"])
    out = StringIO()
    call_command("agreement", "--study", str(study.pk), "--ci", "--resamples", "50", stdout=out)
    printed = json.loads(out.getvalue())["headline"]
    shown = compute.agreement(read_inputs(study, parts=("agreement",)), resamples=50)["headline"]
    assert printed == json.loads(json.dumps(shown)) and printed["seed"] == 7
    with pytest.raises(CommandError, match="its own seed"):
        call_command("agreement", "--study", str(study.pk), "--ci", "--seed", "0", stdout=StringIO())


def test_headline_series_equals_full_reports_on_prefixes():
    from annotation.analysis.agreement import headline_series

    codings = []
    for i in range(30):
        pair = [("A", "B"), ("A", "C"), ("B", "C")][i % 3]
        codes_a = ("m1",) if i % 4 else ("m1", "m2")
        codes_b = codes_a if i % 7 else ("m2",)
        codings += [c(f"i{i:02d}", pair[0], *codes_a), c(f"i{i:02d}", pair[1], *codes_b)]
    order = [f"i{i:02d}" for i in reversed(range(30))]
    series = headline_series(TAX, codings, item_order=order, checkpoints=[5, 17, 30])
    for k, value in zip([5, 17, 30], series, strict=True):
        subset = [x for x in codings if x.item in set(order[:k])]
        expected = agreement_report(TAX, subset)["overall"]["mode"]["mean_pairwise_pooled_kappa"]
        assert value == pytest.approx(expected)
