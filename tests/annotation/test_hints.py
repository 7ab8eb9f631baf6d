"""Hints: a run's failure-signature hits offered to the annotator who codes it, when the study's hint
policy says so (never / after their first submission / always), with one-click "cite"; hidden
everywhere else an annotator could reach them until then (the run page, the discussion page, the
API); always shown to the study's adjudicator and admins; the first showing recorded per coding."""

from __future__ import annotations

import csv
import io
import json
import re
import zipfile

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction
from rest_framework.test import APIClient

from activity.models import ActivityEntry
from annotation.models import Annotation, Assignment, AuditEntry, Study
from annotation.selectors.queue import annotation_for
from annotation.services.analysis import study_analysis_update
from annotation.services.coding import annotation_save, annotation_submit
from annotation.services.pilot import pilot_create
from annotation.services.studies import study_assign, study_create
from annotation.study_settings import SettingsError
from tests.factories import client_for, new_user, submit_disagreement
from trajectories.models import AgentContext, Run, SignatureHit
from trajectories.signatures import DETECTOR_VERSION

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
DETECTORS = ("unisolated_workspace_writes",)  # what every `study` run's log shows (its parent only spawns)
POLICIES = ("never", "after_first_submission", "always")


def set_policy(study, policy: str) -> None:
    Study.objects.filter(pk=study.pk).update(hint_policy=policy)


def first_assignment(study, user) -> Assignment:
    return Assignment.objects.filter(study=study, annotator=user).select_related("run").order_by("run_id").first()


def submit(assignment) -> None:
    annotation = annotation_for(assignment=assignment)
    annotation_save(annotation=annotation, actor=assignment.annotator, version=annotation.version or 1,
                    no_failure=True, notes="", labels=[])  # fmt: skip
    annotation_submit(annotation=annotation, actor=assignment.annotator, version=annotation.version)


def twin(run) -> Run:
    return Run.objects.get(task_id=run.task_id, agent_id=run.agent_id, mode="sequential")


def says_nothing_about_hits(body: str) -> bool:
    """No detector, explanation or hit count: nothing tells whether there are hits."""
    return not any(
        (
            *(name in body for name in DETECTORS),
            "hint-list" in body,
            "signature-hit" in body,
            re.search(r"\d+ hits?\b", body) is not None,
            "while both are alive" in body,  # words of the explanations
        )
    )


def shows_hits(body: str) -> bool:
    return all(name in body for name in DETECTORS)


# -- the policy, for the annotator, on every endpoint that can render hits ----------------------


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("submitted", [False, True])
def test_what_an_annotator_sees_of_hits_follows_the_policy(study, trio, policy, submitted):
    set_policy(study, policy)
    coder = trio[0]
    assignment = first_assignment(study, coder)
    if submitted:
        submit(assignment)
    allowed = policy == "always" or (policy == "after_first_submission" and submitted)
    client = client_for(coder)
    run_pages = [f"/trajectories/runs/{assignment.run_id}/", f"/trajectories/runs/{twin(assignment.run).pk}/"]
    api = APIClient()
    api.force_authenticate(coder)
    api_pages = [f"/api/runs/{assignment.run_id}/", f"/api/annotations/{assignment.pk}/"]

    page = client.get(f"/annotate/{assignment.pk}/").content.decode()
    assert says_nothing_about_hits(page)  # until shown on purpose, even when allowed
    assert ("Show the hints" in page) == allowed  # the button says nothing about hits either
    if policy == "never":
        assert 'id="hints"' not in page
    elif not allowed:
        assert "Hints appear here once you have submitted your coding of this run" in page
    for url in run_pages:
        body = client.get(url).content.decode()
        assert says_nothing_about_hits(body) and "signatures-head" not in body
        assert ("hints-elsewhere" in body) == allowed  # "show them on your coding page first"
    for url in api_pages:
        assert says_nothing_about_hits(api.get(url).content.decode())

    shown = client.post(f"/annotate/{assignment.pk}/hints/", **HTMX)
    if not allowed:
        assert shown.status_code == 403 and says_nothing_about_hits(shown.content.decode())
        assert not Annotation.objects.filter(assignment=assignment, hints_seen_at__isnull=False).exists()
        return
    assert shown.status_code == 200 and b"<html" not in shown.content and shows_hits(shown.content.decode())
    assert shows_hits(client.get(f"/annotate/{assignment.pk}/").content.decode())
    for url in run_pages:  # recorded now: the run page shows them too
        assert shows_hits(client.get(url).content.decode())


def test_the_discussion_page_hides_hits_from_annotators_under_never_and_shows_them_to_the_adjudicator(
    study, trio, codebook, adjudicator, admin_user
):
    set_policy(study, "never")
    run = first_assignment(study, trio[0]).run
    discussion = submit_disagreement(study, run.pk, codebook)
    coders = [a.annotator for a in Assignment.objects.filter(study=study, run=run)]
    for coder in coders:
        body = client_for(coder).get(f"/annotate/discussions/{discussion.pk}/").content.decode()
        assert says_nothing_about_hits(body)
    for lead in (adjudicator, admin_user):
        for url in (f"/annotate/discussions/{discussion.pk}/", f"/trajectories/runs/{run.pk}/"):
            assert shows_hits(client_for(lead).get(url).content.decode()), (lead, url)
    page = client_for(adjudicator).get(f"/annotate/adjudication/{discussion.pk}/").content.decode()
    assert shows_hits(page)
    assert "Unisolated Workspace Writes" in page and "Cross-File Scope Collision" in page  # the codebook's names
    assert 'class="cite"' not in page.split('id="hints"')[1].split("</section>")[0]  # nothing is coded there


def test_after_their_first_submission_annotators_see_hits_in_discussion_once_shown(study, trio, codebook):
    run = first_assignment(study, trio[0]).run
    discussion = submit_disagreement(study, run.pk, codebook)
    coder = Assignment.objects.filter(study=study, run=run).order_by("slot").first()
    client = client_for(coder.annotator)
    before = client.get(f"/annotate/discussions/{discussion.pk}/").content.decode()
    assert says_nothing_about_hits(before) and "show its hints there first" in before
    # revising during the discussion: the panel is on the coding page, the hints one click away
    assert "Show the hints" in client.get(f"/annotate/{coder.pk}/").content.decode()
    client.post(f"/annotate/{coder.pk}/hints/")
    assert shows_hits(client.get(f"/annotate/discussions/{discussion.pk}/").content.decode())


def test_every_study_in_which_an_annotator_codes_the_pair_must_allow_hints(study, trio, codebook, adjudicator):
    coder, other = trio[0], trio[1]
    run = first_assignment(study, coder).run
    blind = study_create(name="Blind", codebook=codebook, annotators=[coder, other], adjudicator=adjudicator,
                         run_ids=[run.pk], hint_policy="never")  # fmt: skip
    study_assign(study=blind)
    set_policy(study, "always")
    assignment = Assignment.objects.get(study=study, annotator=coder, run=run)
    client = client_for(coder)
    page = client.get(f"/annotate/{assignment.pk}/").content.decode()
    assert says_nothing_about_hits(page) and "in a study that does not show them yet" in page
    assert client.post(f"/annotate/{assignment.pk}/hints/").status_code == 403
    assert says_nothing_about_hits(client.get(f"/trajectories/runs/{run.pk}/").content.decode())
    # the other study's adjudicator role does not matter: the adjudicator still sees them
    assert shows_hits(client_for(adjudicator).get(f"/trajectories/runs/{run.pk}/").content.decode())


def test_a_pilot_coder_and_a_stranger_see_no_hits(study, trio, codebook, admin_user):
    run = first_assignment(study, trio[0]).run
    piloter = new_user("piloter", "annotator")
    pilot_create(name="p", annotators=[piloter, trio[0]], base_codebook=codebook, run_ids=[run.pk])
    body = client_for(piloter).get(f"/trajectories/runs/{run.pk}/")
    assert body.status_code == 200 and says_nothing_about_hits(body.content.decode())
    assert shows_hits(client_for(admin_user).get(f"/trajectories/runs/{run.pk}/").content.decode())


def test_only_the_coder_may_show_the_hints_of_their_coding(study, trio, adjudicator, admin_user):
    set_policy(study, "always")
    assignment = first_assignment(study, trio[0])
    stranger = next(u for u in trio if not Assignment.objects.filter(run=assignment.run, annotator=u).exists())
    for user in (stranger, adjudicator, admin_user):
        assert client_for(user).post(f"/annotate/{assignment.pk}/hints/").status_code == 404
    response = APIClient().post(f"/annotate/{assignment.pk}/hints/")
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert client_for(trio[0]).get(f"/annotate/{assignment.pk}/hints/").status_code == 405
    assert not Annotation.objects.filter(hints_seen_at__isnull=False).exists()


# -- the panel: its hits, their modes, "cite" -------------------------------------------------


def test_the_panel_cites_an_event_exactly_as_the_events_list_does(study, trio):
    set_policy(study, "always")
    assignment = first_assignment(study, trio[0])
    client = client_for(trio[0])
    panel = client.post(f"/annotate/{assignment.pk}/hints/", **HTMX).content.decode()
    cited = dict(re.findall(r'data-anchor="([^"]+)" data-mode="(\w+)"', panel))
    sub = AgentContext.objects.get(run=assignment.run, external_id="sub-0")
    events = client.get(f"/trajectories/runs/{assignment.run_id}/contexts/{sub.pk}/events/").content.decode()
    listed = re.search(r'data-seq="0">\s*<div class="event-head">.*?data-anchor="([^"]+)"', events, re.S).group(1)
    assert listed in cited and cited[listed] == "concurrent"  # annotate.js puts it in the evidence field
    # the event the idle-wait hit names without a sequence number (the wait's start) has no "cite"
    assert panel.count('class="cite"') == sum(
        1 for hit in SignatureHit.objects.filter(run=assignment.run) for e in hit.evidence if e["seq"] is not None
    )


def test_a_mode_outside_the_codebook_is_shown_by_its_key(study, trio):
    set_policy(study, "always")
    assignment = first_assignment(study, trio[0])
    SignatureHit.objects.create(run=assignment.run, detector="made_up", modes=["same-file-collision", "no-such-mode"],
                                evidence=[], explanation="a hit of another codebook", detector_version=1,
                                position=99)  # fmt: skip
    client = client_for(trio[0])
    client.post(f"/annotate/{assignment.pk}/hints/")
    page = client.get(f"/annotate/{assignment.pk}/").content.decode()
    assert 'title="same-file-collision">Same-File Collision<' in page
    assert 'title="no-such-mode">no-such-mode<' in page


def test_hints_are_shown_once_and_recorded_with_the_coding(study, trio):
    set_policy(study, "always")
    assignment = first_assignment(study, trio[0])
    client = client_for(trio[0])
    assert client.post(f"/annotate/{assignment.pk}/hints/").status_code == 302  # a form without htmx: the page
    annotation = Annotation.objects.get(assignment=assignment)  # showing stored the untouched draft
    assert annotation.status == "draft" and annotation.version == 1 and annotation.hints_seen_at is not None
    assert [h["detector"] for h in annotation.hints_seen] == list(DETECTORS)
    entries = AuditEntry.objects.filter(annotation=annotation, action="hints")
    assert [e.after["hints"][0]["detector"] for e in entries] == ["unisolated_workspace_writes"]
    first_seen = annotation.hints_seen_at
    client.post(f"/annotate/{assignment.pk}/hints/", **HTMX)
    annotation.refresh_from_db()
    assert annotation.hints_seen_at == first_seen and entries.count() == 1
    # the version was not taken: the open form still saves with the one it has
    saved = client.post(f"/annotate/{assignment.pk}/save/", {"version": 1, "no_failure": "on", "notes": ""}, **HTMX)
    assert saved.status_code == 200 and Annotation.objects.get(pk=annotation.pk).version == 2


def test_the_run_history_and_the_exports_say_which_codings_saw_hints(study, trio, adjudicator, tmp_path):
    set_policy(study, "always")
    seen = first_assignment(study, trio[0])
    unseen = first_assignment(study, trio[1])
    submit(unseen)
    client_for(trio[0]).post(f"/annotate/{seen.pk}/hints/")
    submit(seen)
    lead = client_for(adjudicator)
    history = lead.get(f"/annotate/studies/{study.pk}/runs/{seen.run_id}/history/").content.decode()
    assert "hints shown: unisolated_workspace_writes" in history
    export = lead.get(f"/annotate/studies/{study.pk}/export/labels.csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    by_run = {(r["run_id"], r["annotator"]): r["hints_seen"] for r in rows}
    first_seen = Annotation.objects.get(assignment=seen).hints_seen_at
    assert by_run[str(seen.run_id), "coder1"].startswith(first_seen.strftime("%Y-%m-%d"))
    assert by_run[str(unseen.run_id), "coder2"] == ""
    bundle = tmp_path / "bundle.zip"
    call_command("export_study", str(study.pk), "--out", str(bundle), stdout=io.StringIO())
    with zipfile.ZipFile(bundle) as z:
        assert json.loads(z.read("study.json"))["hint_policy"] == "always"
        current = list(csv.DictReader(io.StringIO(z.read("current_codings.csv").decode())))
        assert "hints_seen" in current[0]
        independent = list(csv.DictReader(io.StringIO(z.read("independent_codings.csv").decode())))
        seen_first = {r["annotator"]: r["hints_seen"] < r["submitted_at"] for r in independent if r["hints_seen"]}
        assert seen_first == {"coder1": True}  # shown, then submitted: the independent coding may have used them
        package = json.loads(z.read("datapackage.json"))
        columns = next(r for r in package["resources"] if r["name"] == "current-codings-csv")["schema"]["fields"]
        assert "hints_seen" in {c["name"] for c in columns}


# -- setting the policy -----------------------------------------------------------------------


def test_a_new_study_defaults_to_hints_after_the_first_submission(study):
    assert study.hint_policy == "after_first_submission"


def test_the_lead_changes_the_policy_and_the_activity_log_records_it(study, adjudicator):
    url = f"/annotate/studies/{study.pk}/settings/"
    client = client_for(adjudicator)
    assert "Annotators see hints" in client.get(url).content.decode()
    from tests.factories import ANALYSIS_SETTINGS_FORM

    response = client.post(url, {**ANALYSIS_SETTINGS_FORM, "hint_policy": "always"})
    assert response.status_code == 302 and Study.objects.get(pk=study.pk).hint_policy == "always"
    entry = ActivityEntry.objects.filter(study_id=study.pk, action="study.analysis").latest("pk")
    assert "hint_policy" in entry.summary and entry.detail["hint_policy"] == {"from": "after_first_submission",
                                                                             "to": "always"}  # fmt: skip
    bad = client.post(url, {**ANALYSIS_SETTINGS_FORM, "hint_policy": "sometimes"})
    assert bad.status_code == 422 and "Annotators see hints" in bad.content.decode()
    assert Study.objects.get(pk=study.pk).hint_policy == "always"


def test_a_bad_policy_is_refused_by_the_service_naming_the_field(study, adjudicator):
    rules, tags = study.rq4()
    with pytest.raises(SettingsError) as refused:
        study_analysis_update(study=study, kappa_universe="codebook", rules=rules, tags=tags, actor=adjudicator,
                              hint_policy="sometimes")  # fmt: skip
    assert refused.value.field == "hint_policy"
    assert Study.objects.get(pk=study.pk).hint_policy == "after_first_submission"
    with pytest.raises(IntegrityError, match="hint_policy_known"), transaction.atomic():
        Study.objects.filter(pk=study.pk).update(hint_policy="sometimes")  # the database refuses it too


def test_the_new_study_form_and_the_command_set_the_policy(study, codebook, trio, adjudicator):
    data = {"name": "Open", "codebook": codebook.pk, "adjudicator": adjudicator.pk, "coders_per_run": 2, "seed": 1,
            "annotators": [a.pk for a in trio], "hint_policy": "always"}  # fmt: skip
    client = client_for(adjudicator)
    assert "Annotators see hints" in client.get("/annotate/studies/new/").content.decode()
    assert client.post("/annotate/studies/new/", data).status_code == 302
    assert Study.objects.get(name="Open").hint_policy == "always"
    bad = client.post("/annotate/studies/new/", {**data, "name": "Bad", "hint_policy": "sometimes"})
    assert bad.status_code == 422 and not Study.objects.filter(name="Bad").exists()
    names = ",".join(u.username for u in trio)
    call_command("create_study", "Blind", "--annotators", names, "--adjudicator", adjudicator.username,
                 "--hint-policy", "never", stdout=io.StringIO())  # fmt: skip
    assert Study.objects.get(name="Blind").hint_policy == "never"
    with pytest.raises(CommandError, match="hint-policy"):
        call_command("create_study", "Worse", "--annotators", names, "--adjudicator", adjudicator.username,
                     "--hint-policy", "sometimes", stdout=io.StringIO())  # fmt: skip
    assert not Study.objects.filter(name="Worse").exists()


def test_a_locked_coding_shows_hints_without_cite(study, trio):
    """Submitted and not under discussion: nothing can be cited into the coding, so the events' anchors are text."""
    set_policy(study, "after_first_submission")
    assignment = first_assignment(study, trio[0])
    submit(assignment)
    panel = client_for(trio[0]).post(f"/annotate/{assignment.pk}/hints/", **HTMX).content.decode()
    assert shows_hits(panel) and 'class="cite"' not in panel and 'class="anchor"' in panel


def test_hits_of_older_rules_say_so_on_the_panel_only_to_whoever_sees_the_hits(study, trio):
    set_policy(study, "after_first_submission")
    assignment = first_assignment(study, trio[0])
    Run.objects.filter(pk=assignment.run_id).update(signatures_version=DETECTOR_VERSION - 1)
    client = client_for(trio[0])
    assert "older rules" not in client.get(f"/annotate/{assignment.pk}/").content.decode()  # not submitted yet
    submit(assignment)
    panel = client.post(f"/annotate/{assignment.pk}/hints/", **HTMX).content.decode()
    assert shows_hits(panel) and f"Found by older rules (detectors version {DETECTOR_VERSION - 1}" in panel
    Run.objects.filter(pk=assignment.run_id).update(signatures_version=DETECTOR_VERSION)
    assert "older rules" not in client.get(f"/annotate/{assignment.pk}/").content.decode()
