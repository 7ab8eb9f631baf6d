"""The reproducibility bundle: from it alone, docs/reproduce_study.py (which imports nothing of
Parallax) recomputes the dashboard's kappa table, bootstrap CI, Table 3 and RQ1 to 1e-12."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from django.core.management import call_command

from annotation.analysis.compute import BOOTSTRAP_RESAMPLES
from annotation.analysis.store import analysis_changed, stored_analysis
from annotation.models import Assignment
from annotation.selectors.queue import annotation_for
from annotation.services.coding import LabelInput, annotation_revise
from tests.factories import client_for, mode_code, reproduce

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("coded_world")]


@pytest.fixture(scope="module")
def exported(coded_world, django_db_blocker, tmp_path_factory) -> Path:
    """The coded study's bundle, exported once for the module, and checked: as exported, the script finds every
    figure equal (a test that alters a copy then knows the alteration is what the check names)."""
    out = tmp_path_factory.mktemp("exported") / "b.zip"
    with django_db_blocker.unblock():
        call_command("export_study", str(coded_world.study_id), "--out", str(out), stdout=io.StringIO())
    checked = reproduce(out, "--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return out


def test_the_bundle_alone_reproduces_every_dashboard_number(coded_study, tmp_path, codebook):
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
    assert (
        shown["agreement"]["headline"]["seed"] == 11
        and shown["agreement"]["headline"]["n_resamples"] == BOOTSTRAP_RESAMPLES
    )
    assert shown["agreement"]["headline"]["ci_low_mcse"] == printed["agreement"]["headline"]["ci_low_mcse"] > 0

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


def test_the_check_fails_when_the_data_do_not_give_the_dashboards_numbers(exported, tmp_path):
    bundle = tmp_path / "bundle"
    zipfile.ZipFile(exported).extractall(bundle)
    codings = (bundle / "independent_codings.csv").read_text()
    (bundle / "independent_codings.csv").write_text(codings.replace("stale-handoff", "lossy-handoff", 1))
    finals = (bundle / "final_labels.csv").read_text().splitlines()
    (bundle / "final_labels.csv").write_text("\n".join(finals[:-1]) + "\n")
    checked = reproduce(bundle, "--check")
    assert checked.returncode == 1
    assert "kappa" in checked.stdout and "table3" in checked.stdout and "DIFFERENT" in checked.stdout


def _altered(bundle: Path, name: str, change) -> None:
    path = bundle / name
    path.write_text(change(path.read_text()))


def _one_more_episode(text: str) -> str:
    """Repeat the first independent coding row of a mode as its next episode."""
    rows = list(csv.DictReader(io.StringIO(text)))
    first = next(r for r in rows if r["mode"])
    rows.insert(rows.index(first) + 1, {**first, "instance": str(int(first["instance"]) + 1)})
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _shown(change):
    def alter(text: str) -> str:
        shown = json.loads(text)
        change(shown)
        return json.dumps(shown)

    return alter


@pytest.mark.parametrize(
    ("name", "change", "named"),
    [
        # an episode count only: the mode sets, κ and α stay; the count agreement does not
        ("independent_codings.csv", _one_more_episode, "episode counts alpha_interval"),
        ("dashboard.json", _shown(lambda d: d["agreement"]["overall"]["mode"].update(alpha_masi_all_annotators=0.5)),
         "overall mode alpha_masi_all_annotators"),
        ("dashboard.json", _shown(lambda d: d["agreement"]["overall"]["mode"].update(alpha_nominal_pooled_binary=0.1)),
         "overall mode alpha_nominal_pooled_binary"),
        ("dashboard.json", _shown(lambda d: d["agreement"]["overall"]["category"].update(fleiss_n_runs=1)),
         "overall category fleiss_n_runs"),
        ("dashboard.json", _shown(lambda d: d["agreement"]["pairs"][0]["levels"]["mode"]["per_code_kappa"].update(
            {"lossy-handoff": 0.123})), "kappa of lossy-handoff"),
        ("dashboard.json", _shown(lambda d: d["agreement"]["pairs"][0]["levels"]["mode"]["macro"].update(
            n_codes_defined=99)), "n_codes_defined"),
        ("dashboard.json", _shown(lambda d: d["over_time"][-1].update(kappa=0.01)), "kappa over time"),
        ("dashboard.json", _shown(lambda d: d["table3"].update(instances_not_agreed=3)), "table3 instances_not_agreed"),
    ],
)  # fmt: skip
def test_the_check_names_every_figure_that_differs(exported, tmp_path, name, change, named):
    bundle = tmp_path / "bundle"
    zipfile.ZipFile(exported).extractall(bundle)
    _altered(bundle, name, change)
    checked = reproduce(bundle, "--check")
    assert checked.returncode == 1 and named in checked.stdout, checked.stdout


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def test_the_worker_builds_the_bundle_and_the_page_offers_it_when_ready(
    coded_study,
    trio,
    adjudicator,
    admin_user,
    media,
    django_capture_on_commit_callbacks,
):
    from annotation.models import StudyBundle
    from annotation.selectors.bundle import BUNDLE_STEPS
    from tests.factories import HTMX

    base = f"/annotate/studies/{coded_study.pk}"
    annotator = client_for(trio[0])
    assert annotator.get(f"{base}/bundle.zip").status_code == 403
    assert annotator.post(f"{base}/bundle/build/").status_code == 403
    assert annotator.get(f"{base}/bundle/status/").status_code == 403
    client = client_for(adjudicator)
    nothing = client.get(f"{base}/bundle.zip")
    assert nothing.status_code == 409 and "build one" in nothing.content.decode()
    assert "Build the bundle</button>" in client.get(f"{base}/").content.decode()
    with django_capture_on_commit_callbacks(execute=True):  # the worker (eager in tests) once the ask commits
        card = client.post(f"{base}/bundle/build/", **HTMX)
    assert card.status_code == 200 and 'id="bundle"' in card.content.decode()
    built = StudyBundle.objects.get(study=coded_study)
    assert (built.status, built.steps_done, built.created_by) == ("done", BUNDLE_STEPS, adjudicator)
    assert built.steps_total == BUNDLE_STEPS
    status = client.get(f"{base}/bundle/status/").content.decode()
    assert "Download the bundle (zip," in status and "hx-trigger" not in status
    download = client.get(f"{base}/bundle.zip")
    assert download.status_code == 200
    assert f'filename="study-{coded_study.pk}-bundle-v{built.version}.zip"' in download["Content-Disposition"]
    archive = zipfile.ZipFile(io.BytesIO(b"".join(download.streaming_content)))
    assert archive.testzip() is None
    assert json.loads(archive.read("dashboard.json")) == stored_analysis(coded_study).document.numbers()
    assert json.loads(archive.read("study.json"))["analysis"]["version"] == built.version
    assert client_for(admin_user).get(f"{base}/bundle.zip").status_code == 200
    assert not list(media.rglob("*.part"))  # written aside, moved into place whole


def test_the_page_follows_a_bundle_being_built_and_one_ask_is_one_build(coded_study, adjudicator, media):
    from annotation.services.bundles import bundle_build, bundle_request

    first = bundle_request(study=coded_study, actor=adjudicator, queue=False)
    assert bundle_request(study=coded_study, actor=adjudicator, queue=False) == first  # no second build meanwhile
    client = client_for(adjudicator)
    waiting = client.get(f"/annotate/studies/{coded_study.pk}/bundle/status/").content.decode()
    assert f"Bundle #{first.pk} is waiting for the worker." in waiting and 'hx-trigger="every 1s"' in waiting
    assert "Build" not in waiting
    bundle_build(bundle_id=first.pk)
    assert bundle_build(bundle_id=first.pk).status == "done"  # run twice: left as it is
    assert bundle_request(study=coded_study, actor=adjudicator, queue=False) != first  # finished: a new one


def test_a_failed_bundle_says_why_and_leaves_no_file(coded_study, adjudicator, media, monkeypatch):
    from annotation.services import bundles

    bundle = bundles.bundle_request(study=coded_study, actor=adjudicator, queue=False)

    def broken(study, out, *, progress=None):
        out.write(b"half a zip")
        raise ValueError("disk full")

    monkeypatch.setattr(bundles, "write_bundle", broken)
    with pytest.raises(ValueError, match="disk full"):
        bundles.bundle_build(bundle_id=bundle.pk)
    bundle.refresh_from_db()
    assert bundle.status == "failed" and bundle.error == "ValueError: disk full" and not list(media.rglob("*.zip*"))
    card = client_for(adjudicator).get(f"/annotate/studies/{coded_study.pk}/bundle/status/").content.decode()
    assert "failed: ValueError: disk full" in card and "Build the bundle</button>" in card
    assert client_for(adjudicator).get(f"/annotate/studies/{coded_study.pk}/bundle.zip").status_code == 409


def test_only_the_newest_bundles_keep_their_files(coded_study, adjudicator, media):
    from annotation.services.bundles import KEEP, bundle_build, bundle_request

    built = []
    for _ in range(KEEP + 1):
        bundle = bundle_request(study=coded_study, actor=adjudicator, queue=False)
        built.append(bundle_build(bundle_id=bundle.pk))
    assert len(list(media.rglob("*.zip"))) == KEEP
    oldest = built[0]
    oldest.refresh_from_db()
    assert oldest.path == "" and oldest.status == "done"
    response = client_for(adjudicator).get(f"/annotate/studies/{coded_study.pk}/bundle.zip")
    assert f"bundle-v{built[-1].version}.zip" in response["Content-Disposition"]


def test_names_a_spreadsheet_would_run_still_reproduce(coded_study, tmp_path, trio):
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
