"""Annotator pages and API: own work only (blind), autosave, conflicts, submit."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from annotation.models import Annotation, Assignment
from annotation.selectors.queue import annotation_for
from annotation.services.coding import annotation_save
from tests.factories import HTMX, client_for, coding_form, mine, mode_code, shared_run_assignments

pytestmark = pytest.mark.django_db


def test_queue_lists_only_my_runs(study, trio):
    body = client_for(trio[0]).get("/annotate/").content.decode()
    assert body.count("/annotate/") >= 4
    for assignment in Assignment.objects.filter(study=study).exclude(annotator=trio[0]):
        if not Assignment.objects.filter(run=assignment.run, annotator=trio[0]).exists():
            assert f"/annotate/{assignment.pk}/" not in body


def test_next_resumes_a_draft_first(study, trio):
    first, second = list(mine(study, trio[0]))[:2]
    annotation_save(
        annotation=annotation_for(assignment=second), actor=trio[0], version=1, no_failure=True, notes="", labels=[]
    )
    response = client_for(trio[0]).get("/annotate/next/")
    assert response["Location"] == f"/annotate/{second.pk}/"


def test_annotate_page_shows_pair_and_picker(study, trio, django_assert_max_num_queries):
    assignment = mine(study, trio[0]).first()
    client = client_for(trio[0])
    client.get(f"/annotate/{assignment.pk}/")
    with django_assert_max_num_queries(14):
        response = client.get(f"/annotate/{assignment.pk}/")
    body = response.content.decode()
    assert response.status_code == 200
    assert "Final-Tree Overwrite" in body and body.count('name="code"') == 32
    assert "concurrent" in body and "sequential" in body and "timeline-slot" in body
    # opening a run stores nothing, and the page does not claim otherwise
    assert "Not saved yet" in body and "Saved ·" not in body and not Annotation.objects.filter(assignment=assignment)


def test_autosave_and_conflict(study, trio, codebook):
    assignment = mine(study, trio[0]).first()
    client = client_for(trio[0])
    code = mode_code(codebook, "same-file-collision")
    evidence = f"{assignment.run.source_name}:3\nc.jsonl:9"
    response = client.post(f"/annotate/{assignment.pk}/save/", coding_form(code, 1, evidence=evidence), **HTMX)
    body = response.content.decode()
    assert response.status_code == 200 and "version 2" in body
    assert 'hx-swap-oob="true"' in body
    # Saved as typed; the anchor that cites no file of the pair is said at once.
    label = Annotation.objects.get(assignment=assignment).labels.get()
    assert label.evidence == [f"{assignment.run.source_name}:3", "c.jsonl:9"]
    assert "c.jsonl:9: no file &#x27;c.jsonl&#x27; in the concurrent run" in body and "before you submit" in body
    assert f"{assignment.run.source_name}:3:" not in body
    stale = client.post(f"/annotate/{assignment.pk}/save/", coding_form(code, 1, rationale="other tab"), **HTMX)
    assert stale.status_code == 409 and "saved elsewhere" in stale.content.decode()
    assert Annotation.objects.get(assignment=assignment).labels.get().rationale == "because"


def test_a_conflict_never_hands_the_other_tab_the_new_version(study, trio, codebook):
    """Two tabs on one coding: tab 1 saves; tab 2's stale save is refused (409) without the new
    version, so its next keystroke is refused too instead of overwriting tab 1. Tab 2 sees the saved
    version and chooses: "keep mine" saves over it knowingly."""
    assignment = mine(study, trio[0]).first()
    client = client_for(trio[0])
    code = mode_code(codebook, "same-file-collision")
    page = client.get(f"/annotate/{assignment.pk}/").content.decode()
    assert page.count('name="version"') == 1  # one version field in the form
    assert (
        client.post(f"/annotate/{assignment.pk}/save/", coding_form(code, 1, rationale="tab 1"), **HTMX).status_code
        == 200
    )
    conflict = client.post(f"/annotate/{assignment.pk}/save/", coding_form(code, 1, rationale="tab 2"), **HTMX)
    body = conflict.content.decode()
    assert conflict.status_code == 409 and 'name="version"' not in body  # the client keeps its version
    assert "tab 1" in body and 'data-keep-mine="2"' in body  # the saved one is shown, and the way to override it
    again = client.post(f"/annotate/{assignment.pk}/save/", coding_form(code, 1, rationale="tab 2, more"), **HTMX)
    assert again.status_code == 409
    assert Annotation.objects.get(assignment=assignment).labels.get().rationale == "tab 1"
    kept = client.post(f"/annotate/{assignment.pk}/save/", coding_form(code, 2, rationale="tab 2, more"), **HTMX)
    assert kept.status_code == 200 and 'value="3" hx-swap-oob="true"' in kept.content.decode()
    assert Annotation.objects.get(assignment=assignment).labels.get().rationale == "tab 2, more"


def test_bad_input_is_422_and_names_the_field(study, trio, codebook):
    assignment = mine(study, trio[0]).first()
    client = client_for(trio[0])
    response = client.post(f"/annotate/{assignment.pk}/save/", {"version": "x"}, **HTMX)
    assert response.status_code == 422 and "version" in response.content.decode()
    code = mode_code(codebook, "same-file-collision")
    response = client.post(f"/annotate/{assignment.pk}/save/", coding_form(code, 1, no_failure="on"), **HTMX)
    assert response.status_code == 422 and "excludes" in response.content.decode()


def test_submit_locks_and_moves_on(study, trio, codebook):
    assignment = mine(study, trio[0]).first()
    client = client_for(trio[0])
    code = mode_code(codebook, "lossy-handoff")
    missing = client.post(f"/annotate/{assignment.pk}/submit/", coding_form(code, 1, rationale=""), **HTMX)
    assert missing.status_code == 422 and "needs a rationale" in missing.content.decode()
    annotation = Annotation.objects.get(assignment=assignment)
    response = client.post(f"/annotate/{assignment.pk}/submit/", coding_form(code, annotation.version), **HTMX)
    assert response.status_code == 200 and response["HX-Redirect"] == "/annotate/next/"
    annotation.refresh_from_db()
    assert annotation.is_submitted
    again = client.post(f"/annotate/{assignment.pk}/save/", coding_form(code, annotation.version), **HTMX)
    assert again.status_code == 409 and "locked" in again.content.decode()


def test_blind_on_every_annotation_endpoint(study, trio, codebook):
    """Until B submits (and after), A reaches nothing of B's: pages, fragments, API."""
    a, b = trio[0], trio[1]
    mine_a, theirs = shared_run_assignments(study, a, b)
    secret = "B-SECRET-RATIONALE"
    code = mode_code(codebook, "stale-handoff")
    client_for(b).post(f"/annotate/{theirs.pk}/save/", coding_form(code, 1, rationale=secret), **HTMX)
    client = client_for(a)
    api = APIClient()
    api.force_authenticate(a)
    responses = [
        client.get("/annotate/"),
        client.get(f"/annotate/{mine_a.pk}/"),
        client.get(f"/annotate/{theirs.pk}/"),
        client.post(f"/annotate/{theirs.pk}/save/", coding_form(code, 2), **HTMX),
        client.post(f"/annotate/{theirs.pk}/submit/", coding_form(code, 2), **HTMX),
        api.get("/api/assignments/"),
        api.get(f"/api/annotations/{mine_a.pk}/"),
        api.get(f"/api/annotations/{theirs.pk}/"),
        api.put(f"/api/annotations/{theirs.pk}/", {"version": 2}, format="json"),
        api.post(f"/api/annotations/{theirs.pk}/submit/", {"version": 2}, format="json"),
        client.get(f"/trajectories/runs/{theirs.run_id}/"),
    ]
    for response in responses:
        assert secret.encode() not in response.content
    assert [r.status_code for r in responses[2:5]] == [404, 404, 404]
    assert [r.status_code for r in responses[7:10]] == [404, 404, 404]
    listed = {row["id"] for row in responses[5].json()["results"]}
    assert theirs.pk not in listed and mine_a.pk in listed
    assert Annotation.objects.get(assignment=theirs).labels.get().rationale == secret  # untouched


def test_api_save_submit_and_conflict(study, trio):
    assignment = mine(study, trio[0]).first()
    api = APIClient()
    api.force_authenticate(trio[0])
    assert api.get(f"/api/annotations/{assignment.pk}/").json()["version"] == 1
    body = {
        "version": 1,
        "labels": [
            {
                "code": "same-file-collision",
                "rationale": "r",
                "evidence": ["x:1"],
                "nearest_rejected": "source-overwrite",
            }
        ],
    }
    saved = api.put(f"/api/annotations/{assignment.pk}/", body, format="json")
    assert saved.status_code == 200 and saved.json()["labels"][0]["nearest_rejected"] == "source-overwrite"
    assert api.put(f"/api/annotations/{assignment.pk}/", body, format="json").status_code == 409
    bad = api.put(f"/api/annotations/{assignment.pk}/", {"version": 2, "labels": [{"code": "nope"}]}, format="json")
    assert bad.status_code == 422 and "nope" in bad.json()["detail"]
    # owner/status cannot be set: extra fields are ignored, the annotation stays a draft of its owner
    sneaky = api.put(
        f"/api/annotations/{assignment.pk}/",
        {"version": 2, "status": "submitted", "assignment": 999, "no_failure": True},
        format="json",
    )
    assert sneaky.status_code == 200 and sneaky.json()["status"] == "draft"
    done = api.post(f"/api/annotations/{assignment.pk}/submit/", {"version": 3}, format="json")
    assert done.status_code == 200 and done.json()["status"] == "submitted"


def test_anonymous_is_redirected(study):
    from django.test import Client

    assert Client().get("/annotate/").status_code == 302
    assert APIClient().get("/api/assignments/").status_code == 401


def test_an_htmx_request_of_a_lapsed_session_gets_401_not_the_login_page(study, trio):
    """Every htmx endpoint (the draft's save, the submit, the skip, the log's fragments) answers a
    visitor without a session 401, naming the login page; the page keeps the text and says so."""
    from django.test import Client

    assignment = mine(study, trio[0]).first()
    anonymous = Client(HTTP_HX_REQUEST="true")
    for response in (
        anonymous.post(f"/annotate/{assignment.pk}/save/", {"rationale-1": "kept"}),
        anonymous.post(f"/annotate/{assignment.pk}/submit/"),
        anonymous.get(f"/annotate/{assignment.pk}/"),
    ):
        assert response.status_code == 401
        assert response["X-Login-Url"] == "/accounts/login/"
        assert b"<html" not in response.content and b"log in again" in response.content
    # a plain request still goes to the login page, and nothing was saved
    assert Client().post(f"/annotate/{assignment.pk}/save/").status_code == 302
    assert not Annotation.objects.filter(assignment=assignment).exists()


def test_a_refused_save_never_hands_the_page_a_newer_version(study, trio, codebook):
    """Tab 1 saves; tab 2 (still on version 1) sends an invalid form: the 422 must not move tab 2
    to the new version, or its next save would overwrite tab 1 without a conflict."""
    assignment = mine(study, trio[0]).first()
    client = client_for(trio[0])
    code = mode_code(codebook, "same-file-collision")
    assert (
        client.post(f"/annotate/{assignment.pk}/save/", coding_form(code, 1, rationale="tab 1"), **HTMX).status_code
        == 200
    )
    bad = client.post(f"/annotate/{assignment.pk}/save/", {"version": 1, "code": ["999999"]}, **HTMX)
    assert bad.status_code in (409, 422) and 'name="version"' not in bad.content.decode()
    # A refused submit after a good save does move the page on: what is on the page was saved.
    refused = client.post(f"/annotate/{assignment.pk}/submit/", coding_form(code, 2, rationale=""), **HTMX)
    assert refused.status_code == 422 and 'value="3" hx-swap-oob="true"' in refused.content.decode()


def test_the_annotate_page_keeps_episode_and_comparative_role(study, trio, codebook):
    assignment = mine(study, trio[0]).first()
    client = client_for(trio[0])
    code = mode_code(codebook, "same-file-collision")
    extra = {f"episode-{code.pk}": "ep-3", f"role-{code.pk}": "parallel_adverse"}
    assert client.post(f"/annotate/{assignment.pk}/save/", coding_form(code, 1, **extra), **HTMX).status_code == 200
    page = client.get(f"/annotate/{assignment.pk}/").content.decode()
    assert 'value="ep-3"' in page and 'value="parallel_adverse"' in page
    # the page posts them back, so a later web save keeps them
    assert (
        client.post(
            f"/annotate/{assignment.pk}/save/", coding_form(code, 2, rationale="more", **extra), **HTMX
        ).status_code
        == 200
    )
    label = Annotation.objects.get(assignment=assignment).labels.get()
    assert (label.episode_id, label.comparative_role) == ("ep-3", "parallel_adverse")
