"""A study's statistics are computed by the worker once per change and read back: the dashboard
never computes them, says when they are not current, and reloads itself when newer ones land; a
burst of changes queues one computation; a stored result never goes backwards."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation.analysis import compute
from annotation.analysis.inputs import read_inputs
from annotation.analysis.store import analysis_changed, analysis_refresh, analysis_request, stored_analysis
from annotation.models import Study, StudyStatistics
from tests.factories import both, client_for, code_run, mode_code

pytestmark = pytest.mark.django_db


def _adjudicate_another(study, codebook, adjudicator, key="same-file-collision"):
    """Change the final labels: the next open discussion is escalated and ruled with another mode."""
    from annotation.models import Discussion
    from annotation.services import review as flow

    discussion = Discussion.objects.filter(study=study, status=Discussion.Status.OPEN).order_by("pk").first()
    flow.discussion_escalate(discussion=discussion, actor=both(study, discussion.run)[0].annotator)
    flow.adjudicate(discussion=discussion, actor=adjudicator, rulings=[flow.Ruling(mode_code(codebook, key).pk, "r")])


def test_the_dashboard_shows_the_stored_statistics_and_says_they_are_current(coded_study, adjudicator):
    stored = StudyStatistics.objects.get(study=coded_study)
    assert stored.version == Study.objects.get(pk=coded_study.pk).statistics_version
    body = client_for(adjudicator).get(f"/annotate/studies/{coded_study.pk}/").content.decode()
    assert "Statistics computed" in body and "Not current" not in body and "hx-trigger" not in body
    headline = compute.agreement(read_inputs(coded_study, parts=("agreement",)), resamples=1000)["headline"]
    assert f"{headline['kappa']:.3f}" in body  # the same figure as computed from the rows now


def test_after_a_change_the_old_figures_are_marked_not_current_until_the_worker_lands(
    coded_study,
    adjudicator,
    codebook,
):
    before = StudyStatistics.objects.get(study=coded_study)
    analysis_changed(study_id=coded_study.pk)  # inside the test's transaction: the refresh waits for commit
    client = client_for(adjudicator)
    body = client.get(f"/annotate/studies/{coded_study.pk}/").content.decode()
    assert "Not current:" in body and f"?shown={before.version}" in body and 'hx-trigger="every 3s"' in body
    status = client.get(
        f"/annotate/studies/{coded_study.pk}/statistics/", {"shown": before.version}, HTTP_HX_REQUEST="true"
    )
    assert status.status_code == 200 and "Not current:" in status.content.decode()  # still waiting
    analysis_refresh(study_id=coded_study.pk)  # what the worker does
    landed = client.get(
        f"/annotate/studies/{coded_study.pk}/statistics/", {"shown": before.version}, HTTP_HX_REQUEST="true"
    )
    assert landed.status_code == 200 and landed["HX-Refresh"] == "true"
    assert StudyStatistics.objects.get(study=coded_study).version == before.version + 1
    assert "Statistics computed" in client.get(f"/annotate/studies/{coded_study.pk}/").content.decode()


def test_a_burst_of_changes_queues_one_computation(coded_study):
    Study.objects.filter(pk=coded_study.pk).update(statistics_queued_at=timezone.now())  # one is waiting
    assert analysis_request(study_id=coded_study.pk) is False
    assert analysis_request(study_id=coded_study.pk) is False
    Study.objects.filter(pk=coded_study.pk).update(statistics_queued_at=timezone.now() - timedelta(hours=1))
    assert analysis_request(study_id=coded_study.pk) is True  # a message lost an hour ago is queued again


def test_a_stored_result_never_goes_backwards(coded_study):
    stored = StudyStatistics.objects.get(study=coded_study)
    StudyStatistics.objects.filter(pk=stored.pk).update(version=stored.version + 5, payload={"marker": 1})
    analysis_refresh(study_id=coded_study.pk)  # the study is at an older version than what is stored
    assert StudyStatistics.objects.get(pk=stored.pk).payload == {"marker": 1}


def test_the_dashboard_without_statistics_says_so_and_offers_to_compute(study, adjudicator, trio):
    client = client_for(adjudicator)
    body = client.get(f"/annotate/studies/{study.pk}/").content.decode()
    assert "Not computed yet." in body and "Compute now" in body and "Agreement</h2>" not in body
    assert client_for(trio[0]).post(f"/annotate/studies/{study.pk}/statistics/refresh/").status_code == 403
    assert client_for(trio[0]).get(f"/annotate/studies/{study.pk}/statistics/").status_code == 403
    response = client.post(f"/annotate/studies/{study.pk}/statistics/refresh/")
    assert response.status_code == 302  # queued (and, with Celery eager in tests, already computed)
    body = client.get(f"/annotate/studies/{study.pk}/").content.decode()
    assert "Statistics computed" in body and "Agreement</h2>" in body


def test_a_bad_version_is_a_400(study, adjudicator):
    response = client_for(adjudicator).get(f"/annotate/studies/{study.pk}/statistics/", {"shown": "x"})
    assert response.status_code == 400 and "must be a version number" in response.content.decode()


def test_the_dashboard_costs_the_same_queries_however_much_is_coded(study, codebook, adjudicator):
    """Nothing on the dashboard grows with the study: the same queries before anything is coded and
    once every run is, and a page view computes nothing (the stored version does not move)."""
    client = client_for(adjudicator)
    url = f"/annotate/studies/{study.pk}/"
    analysis_refresh(study_id=study.pk)
    client.get(url)
    with CaptureQueriesContext(connection) as empty:
        assert client.get(url).status_code == 200
    lossy = mode_code(codebook, "lossy-handoff")
    for run in study.runs.all():
        for assignment in both(study, run):
            code_run(assignment, [lossy])
    analysis_refresh(study_id=study.pk)
    stored = StudyStatistics.objects.get(study=study)
    with CaptureQueriesContext(connection) as coded:
        body = client.get(url).content.decode()
    assert "Statistics computed" in body and StudyStatistics.objects.get(study=study).computed_at == stored.computed_at
    assert len(coded) == len(empty), [q["sql"][:100] for q in coded]


def test_the_table3_export_streams_the_stored_figures_and_says_whether_they_are_current(
    coded_study,
    adjudicator,
    codebook,
):
    """An export never computes in the request: it streams what the worker stored, current or not, and
    says which (headers, file name); figures that are not current ask the worker for new ones."""
    client = client_for(adjudicator)

    def table3():
        response = client.get(f"/annotate/studies/{coded_study.pk}/export/table3.csv")
        rows = csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode()))
        return response, {(r["level"], r["key"]): int(r["count"]) for r in rows}

    stored = stored_analysis(coded_study)
    version = stored.statistics.version
    response, counts = table3()
    assert counts == {(r["level"], r["key"]): r["count"] for r in stored.document.table3["rows"]}
    assert response["X-Parallax-Statistics-Current"] == "true" and response["X-Parallax-Statistics-Version"] == str(
        version
    )
    assert f'filename="study-{coded_study.pk}-table3-v{version}.csv"' in response["Content-Disposition"]
    _adjudicate_another(coded_study, codebook, adjudicator)  # the worker has not recomputed yet
    assert not stored_analysis(coded_study).current
    response, old = table3()  # the stored figures, said to be old; the worker is asked (here: at once)
    assert old == counts and response["X-Parallax-Statistics-Current"] == "false"
    assert f"table3-v{version}-not-current.csv" in response["Content-Disposition"]
    now = compute.table3(read_inputs(coded_study, parts=("table3",)))
    response, new = table3()
    assert response["X-Parallax-Statistics-Current"] == "true"
    assert new == {(r["level"], r["key"]): r["count"] for r in now["rows"]} != counts


def test_the_command_computes_them_in_the_foreground_and_names_a_missing_study(study):
    from django.core.management import CommandError, call_command

    out = io.StringIO()
    call_command("refresh_statistics", study.name, stdout=out)
    stored = StudyStatistics.objects.get(study=study)
    assert (
        f"version {stored.version}" in out.getvalue()
        and stored.version == Study.objects.get(pk=study.pk).statistics_version
    )
    with pytest.raises(CommandError, match="no study 'nope'"):
        call_command("refresh_statistics", "nope")


def test_a_refresh_that_cannot_be_queued_does_not_fail_the_change(study, trio, codebook, monkeypatch):
    """A broker that is down (or, run eagerly, a failing computation) must not undo or fail a submission:
    it is committed; the figures stay not current, and the next change asks again."""
    from annotation import tasks
    from annotation.models import Annotation

    def down(*args, **kwargs):
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(tasks.refresh_study_statistics, "apply_async", down)
    assignment = study.assignments.filter(annotator=trio[0]).first()
    code_run(assignment, [mode_code(codebook, "lossy-handoff")])  # save + submit, then on commit: the refresh
    assert analysis_request(study_id=study.pk) is False
    assert Annotation.objects.get(assignment=assignment).is_submitted
    assert Study.objects.get(pk=study.pk).statistics_queued_at is None  # asked again at the next change


def test_kappa_over_time_follows_the_runs_compared_and_ends_at_the_headline(study, codebook, trio, adjudicator):
    # Three coders per run by design; only part of the third codings are in. κ over time counts a run once
    # two annotators have coded it independently, so its last point is every run the headline compares.
    from annotation.services.studies import study_assign, study_create

    triple = study_create(name="T", codebook=codebook, annotators=trio, adjudicator=adjudicator, coders_per_run=3)
    study_assign(study=triple)
    lossy, stale = mode_code(codebook, "lossy-handoff"), mode_code(codebook, "stale-handoff")
    for index, run in enumerate(triple.runs.order_by("pk")):
        slots = both(triple, run)
        code_run(slots[0], [lossy])
        code_run(slots[1], [lossy] if index % 2 else [stale])
        if index < 2:
            code_run(slots[2], [lossy])
    document = compute.compute(read_inputs(triple), resamples=0)
    headline = document.agreement["headline"]
    assert headline["n_items"] == triple.runs.count() == 6
    last = document.over_time[-1]
    assert last["runs"] == headline["n_items"] and last["kappa"] == pytest.approx(headline["kappa"], abs=1e-12)
    assert [p["runs"] for p in document.over_time] == sorted({p["runs"] for p in document.over_time})
    overall = document.agreement["overall"]["mode"]
    assert overall["fleiss_raters_per_run"] == 3 and overall["fleiss_raters_from"] == "design"
    assert (overall["fleiss_n_runs"], overall["fleiss_runs_fewer"]) == (2, 4)


def test_a_refresh_the_database_dropped_is_tried_again(study, monkeypatch):
    """A database restart mid-refresh is retried (with backoff), not lost: the figures land."""
    from celery.exceptions import Retry
    from django.db import OperationalError

    from annotation import tasks

    calls = []

    def flaky(*, study_id):
        calls.append(study_id)
        if len(calls) == 1:
            raise OperationalError("terminating connection due to administrator command")
        return analysis_refresh(study_id=study_id)

    monkeypatch.setattr(tasks, "analysis_refresh", flaky)
    # Run eagerly (as in tests), the task asks Celery for a retry (a worker redelivers it after the backoff)...
    with pytest.raises(Retry, match="terminating connection") as retried:
        tasks.refresh_study_statistics.apply(args=[study.pk])
    assert retried.value.when == 2 and calls == [study.pk]  # the first backoff; nothing stored yet
    assert not StudyStatistics.objects.filter(study=study).exists()
    # ... and the retry lands the figures.
    assert tasks.refresh_study_statistics.apply(args=[study.pk], retries=1).successful()
    # Any other failure is a bug: raised, not retried.
    monkeypatch.setattr(tasks, "analysis_refresh", lambda *, study_id: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        tasks.refresh_study_statistics.apply(args=[study.pk])
    assert StudyStatistics.objects.get(study=study).version == Study.objects.get(pk=study.pk).statistics_version


def test_a_refresh_that_dies_mid_computation_is_queued_again_by_the_worker_sweep(coded_study, monkeypatch):
    """A worker killed during a refresh: the study keeps waiting for it (its figures not current) and, once that is
    PARALLAX_STATISTICS_STALE_S old, the worker's minutely sweep queues it again — no person clicks *Compute now*."""
    from annotation.analysis import store
    from annotation.tasks import sweep_statistics

    Study.objects.filter(pk=coded_study.pk).update(statistics_version=F("statistics_version") + 1)
    version = Study.objects.get(pk=coded_study.pk).statistics_version
    Study.objects.filter(pk=coded_study.pk).update(statistics_queued_at=timezone.now())

    def killed(inputs):
        raise SystemExit("worker killed")

    monkeypatch.setattr(store, "compute", killed)
    with pytest.raises(SystemExit):
        analysis_refresh(study_id=coded_study.pk)
    monkeypatch.undo()
    assert Study.objects.get(pk=coded_study.pk).statistics_queued_at is not None  # still waiting for it
    assert not stored_analysis(coded_study).current

    assert sweep_statistics() == []  # a refresh started a moment ago may still be running: left alone
    started = timezone.now() - store.stale_queue() - timedelta(seconds=1)
    Study.objects.filter(pk=coded_study.pk).update(statistics_queued_at=started)
    assert sweep_statistics() == [coded_study.pk]  # lost: queued again, and (eagerly here) computed
    assert StudyStatistics.objects.get(study=coded_study).version == version
    assert Study.objects.get(pk=coded_study.pk).statistics_queued_at is None
    assert sweep_statistics() == []  # current: nothing to do


def test_the_sweep_waits_for_a_refresh_as_long_as_parallax_statistics_stale_s(coded_study, settings):
    """A deployment sets how long a refresh may take before the sweep counts it lost (docs/deploy.md)."""
    from annotation.tasks import sweep_statistics

    settings.PARALLAX_STATISTICS_STALE_S = 30
    Study.objects.filter(pk=coded_study.pk).update(statistics_version=F("statistics_version") + 1)
    waiting = Study.objects.filter(pk=coded_study.pk)
    waiting.update(statistics_queued_at=timezone.now() - timedelta(seconds=25))
    assert sweep_statistics() == []  # 25 s: still under way
    waiting.update(statistics_queued_at=timezone.now() - timedelta(seconds=35))
    assert sweep_statistics() == [coded_study.pk]  # 35 s: lost, queued again (and, eagerly here, computed)
    assert stored_analysis(coded_study).current


def test_a_change_during_a_refresh_is_computed_after_it(coded_study, monkeypatch):
    """The study waits for a refresh until it finishes, so a change meanwhile queues nothing — the refresh asks
    again when it ends and finds the study moved on."""
    from annotation.analysis import store

    real = store.compute
    asked = []
    monkeypatch.setattr(store, "analysis_request", lambda *, study_id: asked.append(study_id) or True)

    def changed_meanwhile(inputs):
        Study.objects.filter(pk=coded_study.pk).update(statistics_version=F("statistics_version") + 1)
        return real(inputs)

    Study.objects.filter(pk=coded_study.pk).update(statistics_version=F("statistics_version") + 1)
    monkeypatch.setattr(store, "compute", changed_meanwhile)
    analysis_refresh(study_id=coded_study.pk)
    assert asked == [coded_study.pk]
