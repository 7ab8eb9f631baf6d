"""The annotate page's status line says exactly what state the coding is in: a draft, submitted and
locked (and why, once its run was discussed), or under discussion and saved as a revision."""

from __future__ import annotations

import re

import pytest

from annotation.models import Annotation, Assignment
from annotation.selectors.queue import annotation_for
from annotation.services import review as flow
from annotation.services.coding import LabelInput, annotation_revise, annotation_save, annotation_submit
from tests.factories import HTMX, client_for, coding_form, mode_code, submit_disagreement

pytestmark = pytest.mark.django_db


def status_line(page: str) -> str:
    """The text of the #save-status element, whitespace collapsed."""
    start = page.index(">", page.index('id="save-status"')) + 1
    return " ".join(re.sub(r"<[^>]+>", " ", page[start : page.index("</div>", start)]).split())


def discussed(study, codebook):
    run = study.runs.order_by("pk").first()
    discussion = submit_disagreement(study, run.pk, codebook)
    a, b = Assignment.objects.filter(study=study, run=run).order_by("slot").select_related("annotator")
    return discussion, a, b


def test_revising_escalated_adjudicated(study, codebook, adjudicator):
    discussion, a, b = discussed(study, codebook)
    client = client_for(b.annotator)
    annotation = Annotation.objects.get(assignment=b)
    status = status_line(client.get(f"/annotate/{b.pk}/").content.decode())
    assert status == (
        f"Submitted {annotation.submitted_at:%Y-%m-%d %H:%M} · under discussion: your changes are saved as a revision"
    )
    stale = mode_code(codebook, "stale-handoff")
    revised = client.post(f"/annotate/{b.pk}/revise/", coding_form(stale, annotation.version, rationale="B2"), **HTMX)
    annotation.refresh_from_db()
    assert revised.status_code == 200
    assert status_line(revised.content.decode()) == (
        f"Saved as a revision · version {annotation.version} · {annotation.updated_at:%H:%M:%S} · "
        f"submitted {annotation.submitted_at:%Y-%m-%d %H:%M}, under discussion"
    )
    assert status_line(client.get(f"/annotate/{b.pk}/").content.decode()).startswith("Saved as a revision ·")
    flow.discussion_escalate(discussion=discussion, actor=a.annotator)
    assert status_line(client.get(f"/annotate/{b.pk}/").content.decode()).endswith(
        "· locked: escalated to the adjudicator"
    )
    late = client.post(f"/annotate/{b.pk}/revise/", coding_form(stale, annotation.version, rationale="B3"), **HTMX)
    assert late.status_code == 422 and "this discussion is escalated to the adjudicator" in late.content.decode()
    flow.adjudicate(discussion=discussion, actor=adjudicator, rulings=[flow.Ruling(stale.pk, "r")])
    for assignment in (a, b):
        page = client_for(assignment.annotator).get(f"/annotate/{assignment.pk}/").content.decode()
        assert status_line(page).endswith("· locked: adjudicated, the final labels are recorded")


def test_resolved_by_consensus(study, codebook):
    discussion, a, b = discussed(study, codebook)
    annotation = Annotation.objects.get(assignment=a)
    stale = mode_code(codebook, "stale-handoff")
    agreed = [LabelInput(code_id=stale.pk, rationale="agreed")]
    annotation_revise(discussion=discussion, annotation=annotation, actor=a.annotator, version=annotation.version,
                      no_failure=False, notes="", labels=agreed)  # fmt: skip
    assert status_line(client_for(a.annotator).get(f"/annotate/{a.pk}/").content.decode()).startswith(
        "Saved as a revision ·"
    )  # a revision made outside this page (another tab) is said too
    flow.discussion_consensus(discussion=discussion, actor=b.annotator)
    page = client_for(a.annotator).get(f"/annotate/{a.pk}/").content.decode()
    assert status_line(page).endswith("· locked: resolved by consensus, the final labels are recorded")


def test_a_submitted_coding_of_a_run_not_discussed_is_plainly_locked(study, codebook):
    run = study.runs.order_by("pk").first()
    a = Assignment.objects.filter(study=study, run=run).order_by("slot").first()
    annotation = annotation_for(assignment=a)
    label = LabelInput(code_id=mode_code(codebook, "lossy-handoff").pk, rationale="r")
    annotation_save(annotation=annotation, actor=a.annotator, version=1, no_failure=False, notes="", labels=[label])
    annotation_submit(annotation=annotation, actor=a.annotator, version=annotation.version)
    page = client_for(a.annotator).get(f"/annotate/{a.pk}/").content.decode()
    assert status_line(page) == f"Submitted {annotation.submitted_at:%Y-%m-%d %H:%M} · locked"


def test_a_draft_save_says_the_time_of_that_save(study, codebook, trio):
    """The status line's time is the save's, not the time the page loaded the draft."""
    assignment = Assignment.objects.filter(study=study, annotator=trio[0]).order_by("run_id").first()
    client = client_for(trio[0])
    code = mode_code(codebook, "lossy-handoff")
    client.post(f"/annotate/{assignment.pk}/save/", coding_form(code, 1), **HTMX)
    Annotation.objects.filter(assignment=assignment).update(updated_at="2020-01-01T03:04:05Z")
    saved = client.post(f"/annotate/{assignment.pk}/save/", coding_form(code, 2, rationale="later"), **HTMX)
    annotation = Annotation.objects.get(assignment=assignment)
    assert status_line(saved.content.decode()) == f"Saved · version 3 · {annotation.updated_at:%H:%M:%S}"
    assert annotation.updated_at.year > 2020
