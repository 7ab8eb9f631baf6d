"""Table 3, RQ1 and RQ4 by hand; the dashboard and every export re-read."""

from __future__ import annotations

import csv
import io

import pytest
from rest_framework.test import APIClient

from annotation.analysis.reports import (
    FinalInstance,
    PairOutcome,
    concurrency_helped,
    failure_mode_table,
    holm,
    mcnemar_exact,
    outcome_comparison,
)
from tests.factories import client_for

# coded_study is built once for the module (tests/annotation/conftest.py: coded_world)
pytestmark = pytest.mark.usefixtures("coded_world")


def inst(run, agent, mode, sub, cat):
    return FinalInstance(run, agent, (mode, mode.title()), (sub, sub.title()), (cat, cat.title()))


def test_table3_by_hand():
    instances = [
        inst(1, "Codex", "m1", "s1", "c1"),
        inst(1, "Codex", "m2", "s1", "c1"),
        inst(2, "Kimi", "m1", "s1", "c1"),
        inst(3, "Kimi", "m3", "s2", "c2"),
    ]
    t = failure_mode_table(instances, agents=["Codex", "Kimi"], runs_total=10)
    assert (t["instances"], t["runs_with_mode"], t["runs_total"]) == (4, 3, 10)
    rows = {(r["level"], r["key"]): r for r in t["rows"]}
    assert rows[("category", "c1")]["count"] == 3 and rows[("category", "c1")]["percent"] == pytest.approx(75.0)
    assert rows[("mode", "m1")]["count"] == 2 and rows[("mode", "m1")]["percent"] == pytest.approx(50.0)
    assert rows[("mode", "m1")]["share_by_agent"] == {"Codex": pytest.approx(50.0), "Kimi": pytest.approx(50.0)}
    assert rows[("mode", "m3")]["share_by_agent"] == {"Codex": 0.0, "Kimi": pytest.approx(50.0)}
    assert rows[("mode", "m1")]["parent"] == "S1"


def test_exact_mcnemar_and_holm_by_hand():
    # b = 5, c = 1: p = 2 · P(X ≤ 1 | n = 6, ½) = 2 · (1 + 6) / 64
    assert mcnemar_exact(5, 1) == pytest.approx(14 / 64)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 3) == pytest.approx(1.0)
    # Holm: sorted 0.01, 0.02, 0.04 → 0.03, 0.04, 0.04 (monotone)
    assert holm({"a": 0.02, "b": 0.01, "c": 0.04}) == {
        "b": pytest.approx(0.03),
        "a": pytest.approx(0.04),
        "c": pytest.approx(0.04),
    }
    assert holm({}) == {}


def test_holm_is_statsmodels_holm_on_random_families():
    """Ties, ones, tiny p-values and families of every size give statsmodels' figures."""
    import random

    from statsmodels.stats.multitest import multipletests

    rng = random.Random(28)
    for size in (1, 2, 3, 5, 8, 13, 21, 34):
        values = [rng.choice([rng.random(), rng.random() ** 6, 1.0, 0.05]) for _ in range(size)]
        family = {f"row {i}": p for i, p in enumerate(values)}
        expected = multipletests(values, method="holm")[1]
        assert list(holm(family).values()) == pytest.approx(list(expected), abs=1e-15), size


def pair(cp, sp, ct, st, cd, sd, agent="Codex", bench="B", tokens=(100, 50)):
    return PairOutcome(agent, bench, "t", cp, sp, ct, st, cd, sd, tokens[0], tokens[1], 1)


def test_rq1_by_hand():
    pairs = [
        pair(True, False, 1.0, 0.5, 100, 200),
        pair(True, False, 1.0, 0.8, 100, 100),
        pair(False, True, 0.2, 1.0, 300, 100),
        pair(True, True, 1.0, 1.0, 100, 100),
    ]
    result = outcome_comparison(pairs)
    [cell] = result["cells"]
    assert cell["concurrent_task_pass"] == pytest.approx(0.75) and cell["sequential_task_pass"] == pytest.approx(0.5)
    assert cell["concurrent_test_pass"] == pytest.approx(0.8) and cell["sequential_test_pass"] == pytest.approx(0.825)
    codex = result["agents"]["Codex"]
    assert (codex["concurrent_only_pass"], codex["sequential_only_pass"]) == (2, 1)
    assert codex["mcnemar_p"] == pytest.approx(1.0)  # 2 · P(X ≤ 1 | 3) = 2 · 4/8
    assert codex["time_ratio"] == pytest.approx(600 / 500) and codex["token_ratio"] == pytest.approx(2.0)


def test_concurrency_helped_rules():
    assert concurrency_helped(pair(False, False, 0.6, 0.5, 100, 100)) == ["higher test pass"]
    assert "solved only concurrently" in concurrency_helped(pair(True, False, 1.0, 1.0, 100, 100))
    assert concurrency_helped(pair(True, True, 1.0, 1.0, 100, 200)) == ["no lower test pass, ≥ 60 s and ≥ 20% faster"]
    assert concurrency_helped(pair(True, True, 1.0, 1.0, 150, 200)) == []  # 50 s faster: not enough
    assert concurrency_helped(pair(True, True, 1.0, 1.0, 900, 1000)) == []  # 100 s but only 10% faster
    assert concurrency_helped(pair(True, True, 0.9, 1.0, 10, 1000)) == []  # faster but lower test pass


@pytest.mark.django_db
def test_dashboard_access_and_content(coded_study, adjudicator, trio, admin_user):
    url = f"/annotate/studies/{coded_study.pk}/"
    assert client_for(trio[0]).get(url).status_code == 403
    assert client_for(admin_user).get(url).status_code == 200
    body = client_for(adjudicator).get(url).content.decode()
    assert "Mode-level mean pairwise pooled Cohen" in body and "95% bootstrap CI" in body
    assert "Lossy Handoff" in body and "5 instances" in body and "Exact McNemar" in body
    assert "<svg" in body and "polyline" in body
    # agreement on what Table 3 counts: 3 runs agree on lossy-handoff (2, 1 and 1 episodes each); on the
    # other 3 the coders picked different modes (units 1 / 0 and 0 / 1)
    assert "Episode counts (what Table 3 adds up)" in body
    assert "where every coder picked the mode (3), the counts were identical in 3 (100%)" in body
    assert client_for(trio[0]).get("/annotate/studies/").content.decode().count("dashboard") == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    "kind", ["labels", "finals", "table3", "agreement", "per-code-kappa", "outcomes", "rq1", "rq2"]
)
def test_every_export_streams_and_rereads(coded_study, adjudicator, trio, kind):
    url = f"/annotate/studies/{coded_study.pk}/export/{kind}.csv"
    assert client_for(trio[0]).get(url).status_code == 403
    response = client_for(adjudicator).get(url)
    assert response.streaming and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows
    api = APIClient()
    api.force_authenticate(adjudicator)
    json_rows = api.get(f"/api/studies/{coded_study.pk}/exports/{kind}/").json()
    assert len(json_rows) == len(rows)
    if kind == "labels":
        assert len(rows) == 14 and {r["mode"] for r in rows} == {"lossy-handoff", "stale-handoff"}
        assert sorted(r["instance"] for r in rows).count("2") == 2  # run 1's second episode, in both codings
        assert all(r["path"].startswith("Context and Global Information Problems > Overloaded Handoff >") for r in rows)
        assert {r["evidence"].rsplit(":", 1)[1] for r in rows} == {"3", "4"}
    if kind == "finals":
        assert sorted(r["provenance"] for r in rows) == ["adjudicated", "agreed", "agreed", "agreed", "agreed"]
        assert [r["instance"] for r in rows if r["run_id"] == rows[0]["run_id"]] == ["1", "2"]
    if kind == "table3":
        modes = {r["key"]: r for r in rows if r["level"] == "mode"}
        # instances: run 1's two episodes of lossy-handoff count twice (docs/agreement.md)
        assert modes["lossy-handoff"]["count"] == "4" and float(modes["lossy-handoff"]["percent"]) == 80.0
    if kind == "agreement":
        assert {r["level"] for r in rows} == {"mode", "subcategory", "category"} and len(rows) == 9
    if kind == "outcomes":
        assert len(rows) == 12 and {r["mode"] for r in rows} == {"concurrent", "sequential"}
    if kind == "agreement" or kind == "per-code-kappa":
        assert {r["code_universe"] for r in rows} == {"codebook"}
    if kind == "rq1":
        assert {r["table"] for r in rows} == {"agent", "agent x benchmark"} and all(r["n"] != "" for r in rows)
        assert "Newcombe" in rows[0]["methods"]
    if kind == "rq2":
        assert {r["metric"] for r in rows} >= {"peak_concurrency", "overlap_ratio", "duration_s"}


@pytest.mark.django_db
def test_unknown_export_is_404(coded_study, adjudicator):
    assert client_for(adjudicator).get(f"/annotate/studies/{coded_study.pk}/export/secrets.csv").status_code == 404


@pytest.mark.django_db
def test_rq4_page_and_tagging(coded_study, adjudicator, trio):
    from annotation.analysis.store import analysis_changed, analysis_refresh
    from annotation.models import AdvantageTag
    from trajectories.models import Run

    run = coded_study.runs.order_by("pk").first()
    Run.objects.filter(pk=run.pk).update(test_pass=1.0)
    Run.objects.filter(task=run.task, agent=run.agent, mode="sequential").update(test_pass=0.5)
    analysis_changed(study_id=coded_study.pk)  # as a re-import would: the RQ4 candidates are recomputed
    analysis_refresh(study_id=coded_study.pk)
    url = f"/annotate/studies/{coded_study.pk}/advantage/"
    assert client_for(trio[0]).get(url).status_code == 403
    body = client_for(adjudicator).get(url).content.decode()
    assert "higher test pass" in body
    response = client_for(adjudicator).post(f"{url}{run.pk}/", {"mechanism": "verification", "note": "n"})
    assert response.status_code == 302 and AdvantageTag.objects.get().mechanism == "verification"
    other = coded_study.runs.order_by("pk").last()
    assert client_for(adjudicator).post(f"{url}{other.pk}/", {"mechanism": "other"}).status_code == 404


@pytest.mark.django_db
def test_rq4_pairs_come_a_page_at_a_time(coded_study, adjudicator, monkeypatch):
    from annotation.models import StudyStatistics
    from annotation.views import dashboard as views

    monkeypatch.setattr(views, "HELPED_PAGE_SIZE", 1)
    runs = list(coded_study.runs.order_by("pk")[:2])
    StudyStatistics.objects.filter(study=coded_study).update(
        helped=[[runs[0].pk, 0, ["reason one"]], [runs[1].pk, 0, ["reason two"]]]
    )
    url = f"/annotate/studies/{coded_study.pk}/advantage/"
    client = client_for(adjudicator)
    first = client.get(url).content.decode()
    assert "2 pairs, page 1" in first and "reason one" in first and "reason two" not in first and "?page=2" in first
    second = client.get(url, {"page": 2}).content.decode()
    assert "reason two" in second and "reason one" not in second and "?page=1" in second
    assert client.get(url, {"page": "0"}).status_code == 400


def test_rq1_means_are_paired_over_pairs_with_both_outcomes_known():
    """A pair whose sequential outcome is unknown counts on neither side (before, it counted on the
    concurrent side only, so the two means averaged different tasks)."""
    pairs = [
        pair(True, False, 1.0, 0.5, 100, 200),
        pair(False, True, 0.0, 1.0, 100, 200),
        pair(True, None, 1.0, None, 100, None),  # the sequential run's outcome is unknown
    ]
    [cell] = outcome_comparison(pairs)["cells"]
    assert (cell["pairs"], cell["pairs_task_known"], cell["pairs_test_known"]) == (3, 2, 2)
    assert cell["concurrent_task_pass"] == pytest.approx(0.5) and cell["sequential_task_pass"] == pytest.approx(0.5)
    assert cell["concurrent_test_pass"] == pytest.approx(0.5) and cell["sequential_test_pass"] == pytest.approx(0.75)
