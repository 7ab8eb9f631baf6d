"""Query counts: every page each role opens runs the same number of SQL queries once the study has three
times the runs, codings and discussions (nothing on a request may grow with the study, so an N+1 cannot
come back unnoticed), and no more than its budget.

A budget is a few queries above what the page ran when it was set (rounded up to a multiple of five, at
least three more), so that a harmless extra query does not fail the suite and a page that starts to read
much more does. When a budget fails on purpose, raise it and say why in the commit; the failure lists the
queries the page ran."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.models import Exists, OuterRef
from django.test.utils import CaptureQueriesContext

from annotation.analysis.store import analysis_refresh
from annotation.models import Assignment, Discussion
from annotation.services.hints import annotation_hints_show
from annotation.services.review import discussion_escalate
from annotation.services.studies import study_assign, study_create
from tests.factories import client_for, code_run, mode_code, simple_run, write_jsonl
from trajectories.services import import_paths

pytestmark = pytest.mark.django_db

# (role, page) -> the most queries it may run. Roles: "annotator" (coder1, on their own objects), "adjudicator"
# (the study's), "admin". The comments say what a page reads.
BUDGETS: dict[tuple[str, str], int] = {
    ("annotator", "queue"): 15,
    # +1: may this annotator see the run's hints (their codings of the pair, with each study's hint policy)?
    # +1: both runs' test lists (the pair's tests, one query)
    ("annotator", "annotate"): 20,  # a run under discussion: +1, was the coding revised since?
    ("annotator", "annotate, hints shown"): 25,  # +3: the hits, their events' anchors, the modes' names
    ("annotator", "discussions"): 10,
    # +1: the hints rule (the panel says to show them on the coding page); +4: the pair (twin, files, test lists)
    ("annotator", "discussion"): 20,
    ("annotator", "runs"): 15,
    ("annotator", "pair"): 15,  # the hints rule; the hits are not read (not shown on the coding page yet); tests
    ("annotator", "pair, hints shown"): 15,  # the hints rule, both runs' hits in one query; tests
    ("adjudicator", "adjudication queue"): 10,
    # +2: the run's prediction by the current suggestions model, flagged codes' names; +4: the hints rule, the
    # hits, their events' anchors, the modes' names
    ("adjudicator", "adjudicate"): 25,  # +1: both runs' test lists
    ("adjudicator", "adjudication queue by uncertainty"): 10,
    ("adjudicator", "suggestions"): 10,  # session, user, study, the models listed, the current one, mode names, groups
    ("admin", "suggestions"): 10,
    ("adjudicator", "studies"): 10,
    ("adjudicator", "dashboard"): 15,  # the study's bundles: the newest asked for, the newest ready
    ("adjudicator", "statistics status"): 10,
    ("adjudicator", "RQ4 pairs"): 10,
    ("adjudicator", "new study"): 15,  # the choices: codebooks, annotators, adjudicators, agents, benchmarks, …
    ("adjudicator", "study design"): 25,  # the balance, the forms' choices, the study's counts
    ("adjudicator", "analysis settings"): 10,  # session, user, the study, the user's groups
    ("adjudicator", "run history"): 15,
    ("adjudicator", "runs"): 15,
    ("adjudicator", "pair"): 15,  # +1: both runs' signature hits; +1: the hints rule; +1: both runs' test lists
    ("admin", "studies"): 10,
    ("admin", "dashboard"): 15,
    ("admin", "runs"): 15,
    ("admin", "imports"): 10,
    ("admin", "study design"): 25,
}


def _code_everything(study, codebook):
    """Both codings of every run: the first two runs agree, the rest disagree (a discussion each);
    one discussion is escalated. Then the worker's statistics refresh."""
    lossy, stale = mode_code(codebook, "lossy-handoff"), mode_code(codebook, "stale-handoff")
    for index, run in enumerate(study.runs.order_by("pk")):
        first, second = Assignment.objects.filter(study=study, run=run).order_by("slot")
        code_run(first, [lossy])
        code_run(second, [lossy] if index < 2 else [stale])
    discussion = Discussion.objects.filter(study=study).order_by("pk").first()
    discussion_escalate(
        discussion=discussion, actor=Assignment.objects.filter(study=study, run=discussion.run)[0].annotator
    )
    analysis_refresh(study_id=study.pk)
    _suggestions_model(study)


def _suggestions_model(study):
    """A finished suggestions model of the study, as training stores it, predicting every run: the
    adjudication pages then show its likely-missed codes and order by its uncertainty."""
    from annotation.classifier import Params
    from annotation.models import RunSuggestion, SuggestionModel

    model = SuggestionModel.objects.create(
        study=study, seed=0, parameters=Params().as_dict(), status="done", modes=["same-file-collision"],
        scores=[{"key": "same-file-collision", "precision": 0.5, "recall": 0.5, "f1": 0.5, "support": 3,
                 "predicted": 3}],
        summary={"micro_f1": 0.5, "macro_f1": 0.5, "runs": 6, "tasks": 6}, label_counts={"same-file-collision": 3},
        calibration=[{"low": 0.5, "high": 0.6, "predicted": 0.55, "observed": 0.5, "count": 4}], folds=[[1], [2]],
    )  # fmt: skip
    RunSuggestion.objects.bulk_create(
        RunSuggestion(
            model=model, run=run, probabilities={"same-file-collision": 0.8}, uncertainty=0.4, in_training=False
        )  # fmt: skip
        for run in study.runs.all()
    )


def _grow(tmp_path, codebook, trio, adjudicator, pairs: int = 12):
    """A second study, twice the first one's size, for the same annotators and adjudicator, all coded."""
    for i in range(pairs):
        for mode in ("concurrent", "sequential"):
            lines = simple_run(
                f"more-{i}", mode, "Codex" if i % 2 else "Kimi Code", n_sub=2 if mode == "concurrent" else 0
            )
            write_jsonl(tmp_path / "more" / f"{i}-{mode}.jsonl", lines)
    import_paths(paths=[tmp_path / "more"])
    from trajectories.models import Run

    run_ids = list(
        Run.objects.filter(task__external_id__startswith="more-", mode="concurrent").values_list("pk", flat=True)
    )
    bigger = study_create(name="Bigger", codebook=codebook, annotators=trio, adjudicator=adjudicator, run_ids=run_ids)
    study_assign(study=bigger)
    _code_everything(bigger, codebook)


def _pages(study, coder, adjudicator) -> dict[tuple[str, str], str]:
    # a run of coder1's that is under discussion (the annotate page then asks whether it was revised)
    discussed = Discussion.objects.filter(study=study, run=OuterRef("run"))
    mine = Assignment.objects.filter(Exists(discussed), study=study, annotator=coder).order_by("position").first()
    discussion = Discussion.objects.filter(study=study, run__assignments__annotator=coder).order_by("pk").first()
    escalated = Discussion.objects.get(study=study, status=Discussion.Status.ESCALATED)
    run = mine.run
    # another discussed run of coder1's whose hints they have shown on the coding page
    shown = (
        Assignment.objects.filter(Exists(discussed), study=study, annotator=coder)
        .exclude(pk=mine.pk)
        .order_by("position")
        .first()
    )
    annotation_hints_show(annotation=shown.annotation, actor=coder)
    return {
        ("annotator", "queue"): "/annotate/",
        ("annotator", "annotate"): f"/annotate/{mine.pk}/",
        ("annotator", "discussions"): "/annotate/discussions/",
        ("annotator", "discussion"): f"/annotate/discussions/{discussion.pk}/",
        ("annotator", "runs"): "/trajectories/",
        ("annotator", "pair"): f"/trajectories/runs/{run.pk}/",
        ("annotator", "annotate, hints shown"): f"/annotate/{shown.pk}/",
        ("annotator", "pair, hints shown"): f"/trajectories/runs/{shown.run_id}/",
        ("adjudicator", "adjudication queue"): "/annotate/adjudication/",
        ("adjudicator", "adjudicate"): f"/annotate/adjudication/{escalated.pk}/",
        ("adjudicator", "adjudication queue by uncertainty"): "/annotate/adjudication/?order=uncertainty",
        ("adjudicator", "suggestions"): f"/annotate/studies/{study.pk}/suggestions/",
        ("admin", "suggestions"): f"/annotate/studies/{study.pk}/suggestions/",
        ("adjudicator", "studies"): "/annotate/studies/",
        ("adjudicator", "dashboard"): f"/annotate/studies/{study.pk}/",
        ("adjudicator", "statistics status"): f"/annotate/studies/{study.pk}/statistics/",
        ("adjudicator", "RQ4 pairs"): f"/annotate/studies/{study.pk}/advantage/",
        ("adjudicator", "new study"): "/annotate/studies/new/",
        ("adjudicator", "study design"): f"/annotate/studies/{study.pk}/manage/",
        ("adjudicator", "analysis settings"): f"/annotate/studies/{study.pk}/settings/",
        ("adjudicator", "run history"): f"/annotate/studies/{study.pk}/runs/{run.pk}/history/",
        ("adjudicator", "runs"): "/trajectories/",
        ("adjudicator", "pair"): f"/trajectories/runs/{run.pk}/",
        ("admin", "studies"): "/annotate/studies/",
        ("admin", "dashboard"): f"/annotate/studies/{study.pk}/",
        ("admin", "runs"): "/trajectories/",
        ("admin", "imports"): "/trajectories/imports/",
        ("admin", "study design"): f"/annotate/studies/{study.pk}/manage/",
    }


def _count(clients, pages) -> dict[tuple[str, str], tuple[int, list[str]]]:
    counts = {}
    for key, url in pages.items():
        client = clients[key[0]]
        client.get(url)  # warm: session, caches
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        assert response.status_code == 200, (key, url, response.status_code)
        counts[key] = (len(queries), [q["sql"][:160] for q in queries])
    return counts


def test_every_page_runs_the_same_queries_when_the_study_grows_and_stays_within_its_budget(
    study, codebook, trio, adjudicator, admin_user, tmp_path
):
    _code_everything(study, codebook)
    coder = trio[0]
    clients = {"annotator": client_for(coder), "adjudicator": client_for(adjudicator), "admin": client_for(admin_user)}
    pages = _pages(study, coder, adjudicator)
    small = _count(clients, pages)
    over = [
        f"{key}: ran {n}, budget {BUDGETS.get(key)}: {queries}"
        for key, (n, queries) in small.items()
        if n > BUDGETS.get(key, 0)
    ]
    assert not over, "\n".join(over)
    _grow(tmp_path, codebook, trio, adjudicator)
    large = _count(clients, pages)
    grew = [f"{key}: {small[key][0]} → {n}: {queries}" for key, (n, queries) in large.items() if n != small[key][0]]
    assert not grew, "\n".join(grew)


AUTOSAVE_BUDGET = 15  # an autosave of a draft with one mode (13 queries): the hot path when a team codes at once


def test_an_autosave_stays_within_its_query_budget(study, codebook, trio):
    coder = trio[0]
    assignment = Assignment.objects.filter(study=study, annotator=coder).order_by("position").first()
    client = client_for(coder)
    code = mode_code(codebook, "lossy-handoff").pk
    url = f"/annotate/{assignment.pk}/save/"
    first = {"version": 1, "code": code, f"rationale-{code}": "first", "notes": ""}
    assert client.post(url, first, HTTP_HX_REQUEST="true").status_code == 200
    with CaptureQueriesContext(connection) as queries:
        again = {**first, "version": 2, f"rationale-{code}": "second"}
        assert client.post(url, again, HTTP_HX_REQUEST="true").status_code == 200
    assert len(queries) <= AUTOSAVE_BUDGET, "\n".join(q["sql"][:200] for q in queries)
