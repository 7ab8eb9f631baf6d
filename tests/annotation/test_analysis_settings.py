"""A study's analysis settings on the web: κ's code universe, RQ4's rules and mechanism tags. Only
its lead may change them; a bad value names its field and stores nothing; a change of what the
statistics depend on bumps their version, and the worker's figures, the exports and the bundle say
which settings they used."""

from __future__ import annotations

import csv
import io
import json
import zipfile

import pytest
from django.core.management import call_command

from activity.models import ActivityEntry
from annotation.analysis.store import analysis_refresh
from annotation.models import AdvantageTag, Study, StudyStatistics
from tests.factories import ANALYSIS_SETTINGS_FORM as DEFAULTS
from tests.factories import client_for, reproduce
from trajectories.models import Run

# coded_study is built once for the module (tests/annotation/conftest.py: coded_world)
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("coded_world")]


def url(study) -> str:
    return f"/annotate/studies/{study.pk}/settings/"


def version(study) -> int:
    return Study.objects.get(pk=study.pk).statistics_version


def test_only_the_studys_lead_may_see_or_change_the_settings(coded_study, trio, adjudicator, admin_user):
    before = version(coded_study)
    annotator = client_for(trio[0])
    assert annotator.get(url(coded_study)).status_code == 403
    assert annotator.post(url(coded_study), {**DEFAULTS, "kappa_universe": "observed"}).status_code == 403
    assert Study.objects.get(pk=coded_study.pk).kappa_universe == "codebook" and version(coded_study) == before
    assert client_for(adjudicator).get("/annotate/studies/999999/settings/").status_code == 404
    body = client_for(admin_user).get(url(coded_study)).content.decode()
    assert "κ&#x27;s code universe" in body or "code universe" in body
    assert "complementary: complementary work" in body


def test_the_universe_and_the_rules_change_the_statistics(coded_study, adjudicator, django_capture_on_commit_callbacks):
    before = version(coded_study)
    client = client_for(adjudicator)
    data = {**DEFAULTS, "kappa_universe": "observed", "faster_min_seconds": "10"}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url(coded_study), data)
    assert response.status_code == 302 and response["Location"] == f"/annotate/studies/{coded_study.pk}/"
    study = Study.objects.get(pk=coded_study.pk)
    assert study.kappa_universe == "observed" and study.rq4_settings["rules"]["faster_min_seconds"] == 10.0
    assert version(coded_study) == before + 1
    assert ActivityEntry.objects.filter(action="study.analysis", study_id=study.pk).count() == 1
    analysis_refresh(study_id=study.pk)
    payload = StudyStatistics.objects.get(study=study).payload
    assert payload["settings"]["kappa_universe"] == "observed"
    assert payload["settings"]["rq4_rules"]["faster_min_seconds"] == 10.0
    # only lossy-handoff and stale-handoff were ever coded: two modes
    assert payload["agreement"]["code_universe"]["codes"]["mode"] == 2
    assert payload["agreement"]["pairs"][0]["levels"]["mode"]["per_code_kappa"].keys() == {
        "lossy-handoff",
        "stale-handoff",
    }
    body = client.get(f"/annotate/studies/{study.pk}/").content.decode()
    assert "codes observed in the study" in body and "≥ 10 s and ≥ 20% faster" in body
    rows = list(csv.DictReader(io.StringIO(_export(client, study, "agreement"))))
    assert {r["code_universe"] for r in rows} == {"observed"}
    # the same figures again: nothing changed, nothing recomputed
    assert client.post(url(coded_study), data).status_code == 302 and version(coded_study) == before + 1


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("faster_min_fraction", "2", "below 1"),
        ("faster_min_seconds", "-5", "0 or more"),
        ("test_pass_margin", "abc", "number"),
        ("kappa_universe", "everything", "valid choice"),
        ("mechanisms", "Not A Key: x", "lower-case"),
        ("mechanisms", "a: x\na: y", "given twice"),
    ],
)
def test_a_bad_value_names_its_field_and_stores_nothing(coded_study, adjudicator, field, value, said):
    before = version(coded_study), Study.objects.get(pk=coded_study.pk).rq4_settings
    client = client_for(adjudicator)
    response = client.post(url(coded_study), {**DEFAULTS, "kappa_universe": "observed", field: value})
    assert response.status_code == 422
    body = response.content.decode()
    assert "Not saved" in body and said in body
    label = {
        "faster_min_fraction": "fraction of the sequential time",
        "faster_min_seconds": "at least (seconds)",
        "test_pass_margin": "test pass difference",
        "kappa_universe": "code universe",
        "mechanisms": "Mechanism tags",
    }[field]
    assert label in body
    study = Study.objects.get(pk=coded_study.pk)
    assert (version(coded_study), study.rq4_settings) == before and study.kappa_universe == "codebook"
    htmx = client.post(url(coded_study), {**DEFAULTS, field: value}, headers={"HX-Request": "true"})
    assert htmx.status_code == 422 and "<html" not in htmx.content.decode() and said in htmx.content.decode()


def test_no_rule_enabled_is_refused(coded_study, adjudicator):
    data = {k: v for k, v in DEFAULTS.items() if k not in ("higher_test_pass", "solved_only_concurrently", "faster")}
    response = client_for(adjudicator).post(url(coded_study), data)
    assert response.status_code == 422 and "at least one rule" in response.content.decode()


def _helped_run(study):
    run = study.runs.order_by("pk").first()
    Run.objects.filter(pk=run.pk).update(test_pass=1.0)
    Run.objects.filter(task=run.task, agent=run.agent, mode="sequential").update(test_pass=0.5)
    from annotation.analysis.store import analysis_changed

    analysis_changed(study_id=study.pk)
    analysis_refresh(study_id=study.pk)
    return run


def _export(client, study, kind: str) -> str:
    return b"".join(client.get(f"/annotate/studies/{study.pk}/export/{kind}.csv").streaming_content).decode()


def test_mechanism_tags_are_the_studys_and_a_used_one_stays(coded_study, adjudicator):
    run = _helped_run(coded_study)
    client = client_for(adjudicator)
    before = version(coded_study)
    tags = "split-work: the sub-agents split the work\nnone: no real advantage"
    response = client.post(url(coded_study), {**DEFAULTS, "mechanisms": tags}, headers={"HX-Request": "true"})
    assert response.status_code == 200 and response["HX-Redirect"] == f"/annotate/studies/{coded_study.pk}/"
    assert version(coded_study) == before  # tags are not statistics
    page = client.get(f"/annotate/studies/{coded_study.pk}/advantage/").content.decode()
    assert "the sub-agents split the work" in page and "complementary work" not in page
    tag_url = f"/annotate/studies/{coded_study.pk}/advantage/{run.pk}/"
    client.post(tag_url, {"mechanism": "complementary"})  # no longer a tag of the study
    assert not AdvantageTag.objects.exists()
    assert client.post(tag_url, {"mechanism": "split-work", "note": "n"}).status_code == 302
    assert AdvantageTag.objects.get().mechanism == "split-work"
    # the tag is used: removing it is refused, naming the field, and nothing changes
    response = client.post(url(coded_study), {**DEFAULTS, "mechanisms": "none: nothing", "kappa_universe": "observed"})
    assert response.status_code == 422 and "split-work" in response.content.decode()
    study = Study.objects.get(pk=coded_study.pk)
    assert study.kappa_universe == "codebook" and dict(study.rq4()[1]) == {
        "split-work": "the sub-agents split the work",
        "none": "no real advantage",
    }
    [row] = list(csv.DictReader(io.StringIO(_export(client, study, "rq4"))))
    assert row["concurrent_run_id"] == str(run.pk) and row["mechanism"] == "split-work"
    assert row["mechanism_label"] == "the sub-agents split the work" and row["reasons"] == "higher test pass"
    assert json.loads(row["rules"])["faster_min_seconds"] == 60.0


def test_stricter_rules_drop_a_candidate_and_the_export_records_them(
    coded_study, adjudicator, django_capture_on_commit_callbacks
):
    _helped_run(coded_study)
    client = client_for(adjudicator)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(url(coded_study), {**DEFAULTS, "test_pass_margin": "0.6"})
    analysis_refresh(study_id=coded_study.pk)
    assert StudyStatistics.objects.get(study=coded_study).helped == []
    assert list(csv.DictReader(io.StringIO(_export(client, coded_study, "rq4")))) == []
    page = client.get(f"/annotate/studies/{coded_study.pk}/advantage/").content.decode()
    assert "test pass higher by &gt; 0.6" in page and "No pair where concurrency helped" in page


def test_the_bundle_reproduces_under_the_studys_settings(coded_study, adjudicator, tmp_path):
    _helped_run(coded_study)
    client_for(adjudicator).post(
        url(coded_study), {**DEFAULTS, "kappa_universe": "observed", "faster_min_fraction": "0.1"}
    )
    bundle = tmp_path / "bundle.zip"
    call_command("export_study", str(coded_study.pk), "--out", str(bundle), stdout=io.StringIO())
    checked = reproduce(bundle, "--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with zipfile.ZipFile(bundle) as z:
        study = json.loads(z.read("study.json"))
        shown = json.loads(z.read("dashboard.json"))
        assert "run_metrics.csv" in z.namelist() and "run_metrics.parquet" in z.namelist()
    assert study["agreement"]["code_universe"] == "observed"
    assert study["rq4"]["rules"]["faster_min_fraction"] == 0.1
    assert shown["agreement"]["code_universe"]["codes"]["mode"] == 2 and shown["rq4"] and shown["rq2"]
    # the script's universe follows study.json: told "codebook", it no longer matches
    folder = tmp_path / "unpacked"
    zipfile.ZipFile(bundle).extractall(folder)
    study["agreement"]["code_universe"] = "codebook"
    (folder / "study.json").write_text(json.dumps(study))
    checked = reproduce(folder, "--check")
    assert checked.returncode == 1 and "code universe mode" in checked.stdout


def test_the_dashboard_shows_rq1_effect_sizes_and_rq2(coded_study, adjudicator):
    body = client_for(adjudicator).get(f"/annotate/studies/{coded_study.pk}/").content.decode()
    for text in ("Odds ratio b/c", "Task pass difference", "Per agent × benchmark", "RQ2", "median [Q1, Q3]",
                 "all codes of the codebook", "Change the analysis settings"):  # fmt: skip
        assert text in body, text


def test_annotators_get_no_study_wide_figures_and_the_admin_cannot_bypass_the_settings(
    coded_study, trio, adjudicator, admin_user
):
    from rest_framework.test import APIClient

    for kind in ("rq1", "rq2", "rq4"):
        assert client_for(trio[0]).get(f"/annotate/studies/{coded_study.pk}/export/{kind}.csv").status_code == 403
        api = APIClient()
        api.force_authenticate(trio[0])
        assert api.get(f"/api/studies/{coded_study.pk}/exports/{kind}/").status_code == 403
        api.force_authenticate(adjudicator)
        assert api.get(f"/api/studies/{coded_study.pk}/exports/{kind}/").status_code == 200
    # the Django admin shows the settings but does not edit them (no validation or recomputation there)
    page = client_for(admin_user).get(f"/admin/annotation/study/{coded_study.pk}/change/").content.decode()
    assert 'name="kappa_universe"' not in page and 'name="rq4_settings"' not in page
