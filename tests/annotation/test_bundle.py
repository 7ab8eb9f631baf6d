"""The reproducibility bundle: from it alone, docs/reproduce_study.py (which imports nothing of
Parallax) recomputes the dashboard's kappa table, bootstrap CI, Table 3 and RQ1 to 1e-12."""

from __future__ import annotations

import csv
import io
import json
import zipfile

import pandas as pd
import pytest
from django.core.management import call_command

from annotation.analysis.store import analysis_changed
from annotation.models import Assignment
from annotation.selectors.queue import annotation_for
from annotation.services.coding import LabelInput, annotation_revise
from tests.factories import client_for, mode_code, reproduce

pytestmark = pytest.mark.django_db


def test_the_bundle_alone_reproduces_every_dashboard_number(coded_study, tmp_path, codebook):  # noqa: F811
    study = coded_study
    study.seed = 11
    study.save(update_fields=["seed"])  # the pages allow it only before assignment: here the figures are told
    analysis_changed(study_id=study.pk)
    # A revision during discussion: the current coding changes, the independent one (kappa's input) does not.
    from annotation.models import Discussion

    discussion = Discussion.objects.filter(status="open").order_by("pk").first()
    assignment = Assignment.objects.filter(study=study, run=discussion.run).order_by("slot").first()
    annotation = annotation_for(assignment=assignment)
    stale = mode_code(codebook, "stale-handoff")
    annotation_revise(discussion=discussion, annotation=annotation, actor=assignment.annotator,
                      version=annotation.version, no_failure=False, notes="",
                      labels=[LabelInput(code_id=stale.pk, rationale="=HYPERLINK(\"http://x\")")])  # fmt: skip
    bundle = tmp_path / "bundle.zip"
    call_command("export_study", str(study.pk), "--out", str(bundle), stdout=io.StringIO())

    checked = reproduce(bundle, "--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.strip().endswith("equals the dashboard's (tolerance 1e-12)")
    printed = json.loads(reproduce(bundle).stdout)
    shown = json.loads(zipfile.ZipFile(bundle).read("dashboard.json"))
    assert printed["agreement"]["headline"]["ci_low"] == shown["agreement"]["headline"]["ci_low"]
    assert shown["agreement"]["headline"]["seed"] == 11 and shown["agreement"]["headline"]["n_resamples"] == 1000

    with zipfile.ZipFile(bundle) as z:
        names = set(z.namelist())
        package = json.loads(z.read("datapackage.json"))
        current = list(csv.DictReader(io.StringIO(z.read("current_codings.csv").decode())))
        independent = list(csv.DictReader(io.StringIO(z.read("independent_codings.csv").decode())))
        for resource in package["resources"]:
            assert resource["path"] in names
            if resource["format"] == "parquet":
                frame = pd.read_parquet(io.BytesIO(z.read(resource["path"])))
                rows = list(csv.DictReader(io.StringIO(z.read(resource["path"].replace(".parquet", ".csv")).decode())))
                assert list(frame.columns) == [f["name"] for f in resource["schema"]["fields"]]
                assert len(frame) == len(rows)
    assert {"study.json", "dashboard.json", "run_code_matrix.csv", "codebook.csv", "pairs.csv"} <= names
    mine = [
        r for r in current if r["annotator"] == assignment.annotator.username and r["run_id"] == str(discussion.run_id)
    ]
    assert [r["revised"] for r in mine] == ["True"] and mine[0]["mode"] == "stale-handoff"
    first = [
        r
        for r in independent
        if r["annotator"] == assignment.annotator.username and r["run_id"] == str(discussion.run_id)
    ]
    assert [r["mode"] for r in first] == ["lossy-handoff"]  # the first submission, unchanged
    assert mine[0]["rationale"].startswith("'=HYPERLINK")  # a spreadsheet will not run it
    params = json.loads(zipfile.ZipFile(bundle).read("study.json"))
    assert params["seed"] == 11 and params["codebook"]["version"] == study.codebook.version
    assert params["coders_per_run"] == 2 and params["closed_at"] is None


def test_the_check_fails_when_the_data_do_not_give_the_dashboards_numbers(coded_study, tmp_path):  # noqa: F811
    bundle = tmp_path / "bundle"
    call_command("export_study", str(coded_study.pk), "--out", str(tmp_path / "b.zip"), stdout=io.StringIO())
    zipfile.ZipFile(tmp_path / "b.zip").extractall(bundle)
    codings = (bundle / "independent_codings.csv").read_text()
    (bundle / "independent_codings.csv").write_text(codings.replace("stale-handoff", "lossy-handoff", 1))
    finals = (bundle / "final_labels.csv").read_text().splitlines()
    (bundle / "final_labels.csv").write_text("\n".join(finals[:-1]) + "\n")
    checked = reproduce(bundle, "--check")
    assert checked.returncode == 1
    assert "kappa" in checked.stdout and "table3" in checked.stdout and "DIFFERENT" in checked.stdout


def test_the_bundle_is_for_the_studys_lead_only(coded_study, trio, adjudicator, admin_user):  # noqa: F811
    url = f"/annotate/studies/{coded_study.pk}/bundle.zip"
    assert client_for(trio[0]).get(url).status_code == 403
    response = client_for(adjudicator).get(url)
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    assert zipfile.ZipFile(io.BytesIO(response.content)).testzip() is None
    assert client_for(admin_user).get(url).status_code == 200


def test_names_a_spreadsheet_would_run_still_reproduce(coded_study, tmp_path, trio):  # noqa: F811
    trio[0].username = "-coder1"  # Django allows it; the CSV writes '-coder1
    trio[0].save()
    analysis_changed(study_id=coded_study.pk)  # the stored figures name the annotators as they were then
    call_command("export_study", str(coded_study.pk), "--out", str(tmp_path / "b.zip"), stdout=io.StringIO())
    assert "'-coder1" in zipfile.ZipFile(tmp_path / "b.zip").read("independent_codings.csv").decode()
    checked = reproduce(tmp_path / "b.zip", "--check")
    assert checked.returncode == 0, checked.stdout


def test_a_three_of_four_study_reproduces_from_its_bundle(study, codebook, adjudicator, tmp_path):
    """k = 3 of N = 4: six annotator pairs, Fleiss' κ over three ratings per unit, α with runs still
    missing a coding — the script recomputes them from the bundle exactly as the dashboard does."""
    from accounts.roles import ANNOTATOR
    from annotation.analysis.store import analysis_refresh
    from annotation.services.studies import study_assign, study_create
    from tests.factories import new_user

    annotators = [*study.annotators.order_by("username"), new_user("coder4", ANNOTATOR)]
    second = study_create(name="S4", codebook=codebook, annotators=annotators, adjudicator=adjudicator,
                          run_ids=list(study.runs.values_list("pk", flat=True)), coders_per_run=3, seed=5)  # fmt: skip
    study_assign(study=second)
    call_command("simulate_codings", str(second.pk), "--fraction", "0.84", "--agree", "0.6", "--seed", "2",
                 stdout=io.StringIO())  # fmt: skip
    # one more coding of a run not chosen above: two of its three codings in (α counts it, Fleiss not)
    open_run = Assignment.objects.filter(study=second, annotation__isnull=True).order_by("run_id", "slot").first()
    for assignment in Assignment.objects.filter(study=second, run_id=open_run.run_id).order_by("slot")[:2]:
        annotation = annotation_for(assignment=assignment)
        from annotation.services.coding import annotation_save, annotation_submit

        label = LabelInput(code_id=mode_code(codebook, "lossy-handoff").pk, rationale="r")
        annotation_save(annotation=annotation, actor=assignment.annotator, version=1, no_failure=False, notes="",
                        labels=[label])  # fmt: skip
        annotation_submit(annotation=annotation, actor=assignment.annotator, version=2)
    analysis_refresh(study_id=second.pk)
    bundle = tmp_path / "bundle.zip"
    call_command("export_study", str(second.pk), "--out", str(bundle), stdout=io.StringIO())
    shown = json.loads(zipfile.ZipFile(bundle).read("dashboard.json"))
    overall = shown["agreement"]["overall"]["mode"]
    assert len(shown["agreement"]["pairs"]) == 6
    assert overall["fleiss_raters_per_run"] == 3 and overall["fleiss_n_runs"] == 5
    checked = reproduce(bundle, "--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
