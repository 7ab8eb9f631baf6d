"""Skipping a run for now (with a reason) and flagging one for discussion; the annotate page's place
in the queue. The keys that drive them are tested in tests/integration/test_browser_keys.py."""

from __future__ import annotations

import pytest

from annotation.errors import AnnotationError, LockedError
from annotation.models import Annotation, Assignment, AuditEntry, Discussion
from annotation.selectors.queue import annotation_for, next_assignment, queue_position
from annotation.services.coding import LabelInput, annotation_save, annotation_skip, annotation_submit
from tests.factories import HTMX, client_for, mine, mode_code

pytestmark = pytest.mark.django_db


def test_a_skipped_run_waits_at_the_end_of_the_queue_until_submitted(study, trio):
    me = trio[0]
    first = next_assignment(user=me)
    annotation = annotation_skip(annotation=annotation_for(assignment=first), actor=me, reason=" logs cut ")
    assert annotation.skip_reason == "logs cut" and annotation.status == "draft"
    assert AuditEntry.objects.get(annotation=annotation, action="skip").after["skip_reason"] == "logs cut"
    assert next_assignment(user=me) != first
    for assignment in mine(study, me).exclude(pk=first.pk):  # everything else done: the skipped one comes back
        done = annotation_for(assignment=assignment)
        annotation_save(annotation=done, actor=me, version=done.version, no_failure=True, notes="", labels=[])
        annotation_submit(annotation=done, actor=me, version=done.version)
    assert next_assignment(user=me) == first
    annotation_save(annotation=annotation, actor=me, version=annotation.version, no_failure=True, notes="", labels=[])
    annotation_submit(annotation=annotation, actor=me, version=annotation.version)
    assert Annotation.objects.get(pk=annotation.pk).skip_reason == ""


def test_skipping_needs_a_reason_and_an_unsubmitted_run(study, trio):
    me = trio[0]
    assignment = next_assignment(user=me)
    with pytest.raises(AnnotationError, match="say why"):
        annotation_skip(annotation=annotation_for(assignment=assignment), actor=me, reason="  ")
    assert not Annotation.objects.filter(assignment=assignment).exists()  # nothing written
    done = annotation_for(assignment=assignment)
    annotation_save(annotation=done, actor=me, version=1, no_failure=True, notes="", labels=[])
    annotation_submit(annotation=done, actor=me, version=done.version)
    with pytest.raises(LockedError):
        annotation_skip(annotation=done, actor=me, reason="later")
    stale = Annotation.objects.get(pk=done.pk)  # another tab still showing the draft, submitted meanwhile
    stale.status = Annotation.Status.DRAFT
    with pytest.raises(LockedError, match="submitted meanwhile"):
        annotation_skip(annotation=stale, actor=me, reason="later")
    assert Annotation.objects.get(pk=done.pk).skip_reason == ""


def test_the_skip_page_refuses_without_a_reason_and_hides_others_runs(study, trio):
    me, other = trio[0], trio[1]
    assignment = next_assignment(user=me)
    response = client_for(me).post(f"/annotate/{assignment.pk}/skip/", {"reason": ""}, **HTMX)
    assert response.status_code == 422 and "say why you skip this run" in response.content.decode()
    assert client_for(other).post(f"/annotate/{assignment.pk}/skip/", {"reason": "x"}, **HTMX).status_code == 404
    response = client_for(me).post(f"/annotate/{assignment.pk}/skip/", {"reason": "logs cut"}, **HTMX)
    assert response.status_code == 200 and response["HX-Redirect"] == "/annotate/next/"
    assert Annotation.objects.get(assignment=assignment).skip_reason == "logs cut"
    assert 'skipped</span> <span class="small muted">logs cut' in client_for(me).get("/annotate/").content.decode()


def test_a_flag_opens_a_discussion_even_when_the_codings_agree(study, codebook):
    run = study.runs.order_by("pk").first()
    lossy = mode_code(codebook, "lossy-handoff")
    for index, assignment in enumerate(Assignment.objects.filter(study=study, run=run).order_by("slot")):
        annotation = annotation_for(assignment=assignment)
        annotation_save(annotation=annotation, actor=assignment.annotator, version=annotation.version,
                        no_failure=False, notes="", labels=[LabelInput(code_id=lossy.pk, rationale="same")],
                        flagged=index == 0, flag_note="is this lossy or stale?" if index == 0 else "")  # fmt: skip
        annotation_submit(annotation=annotation, actor=assignment.annotator, version=annotation.version)
    discussion = Discussion.objects.get(study=study, run=run)
    assert discussion.agreement == 1.0 and discussion.status == "open"
    assert discussion.comments.get().text == "Flagged for discussion: is this lossy or stale?"


def test_the_flag_is_saved_by_the_form_and_left_alone_without_it(study, trio, codebook):
    me = trio[0]
    assignment = next_assignment(user=me)
    client = client_for(me)
    lossy = mode_code(codebook, "lossy-handoff")
    data = {"version": 1, "code": [lossy.pk], f"rationale-{lossy.pk}": "r", "notes": "",
            "flagged": "on", "flag_note": "ask the lead"}  # fmt: skip
    assert client.post(f"/annotate/{assignment.pk}/save/", data, **HTMX).status_code == 200
    annotation = Annotation.objects.get(assignment=assignment)
    assert (annotation.flagged, annotation.flag_note) == (True, "ask the lead")
    # a client that does not send the flag (the API, an older page) leaves it as it is
    del data["flagged"], data["flag_note"]
    assert client.post(f"/annotate/{assignment.pk}/save/", {**data, "version": 2}, **HTMX).status_code == 200
    assert Annotation.objects.get(assignment=assignment).flagged


def test_the_annotate_page_says_where_the_run_sits_in_the_queue(study, trio):
    me = trio[0]
    assignments = list(mine(study, me).order_by("position"))  # queue order
    position = queue_position(user=me, assignment=assignments[1])
    assert (position["place"], position["total"], position["left"], position["today"]) == (2, 4, 4, 0)
    assert (position["previous_id"], position["next_id"]) == (assignments[0].pk, assignments[2].pk)
    done = annotation_for(assignment=assignments[0])
    annotation_save(annotation=done, actor=me, version=1, no_failure=True, notes="", labels=[])
    annotation_submit(annotation=done, actor=me, version=done.version)
    body = client_for(me).get(f"/annotate/{assignments[1].pk}/").content.decode()
    assert "Run 2 of 4 · 3 to submit · 1 submitted today" in body
    assert f'id="previous-item" href="/annotate/{assignments[0].pk}/"' in body
