from __future__ import annotations

import pytest

from annotation.analysis.inputs import independent_codings
from annotation.errors import AnnotationError
from annotation.models import Assignment, AuditEntry, Discussion, FinalCoding
from annotation.selectors.queue import annotation_for
from annotation.services import review as flow
from annotation.services.coding import LabelInput, annotation_revise, annotation_save, annotation_submit
from tests.factories import HTMX, both, cite, client_for, code_run, coding_form, mode_code

pytestmark = pytest.mark.django_db


def test_agreement_becomes_final(study, codebook):
    a, b = both(study)
    lossy = mode_code(codebook, "lossy-handoff")
    code_run(a, [lossy])
    assert FinalCoding.objects.count() == 0 and Discussion.objects.count() == 0  # one coding is not enough
    code_run(b, [lossy])
    final = FinalCoding.objects.get()
    assert final.provenance == "agreed" and not final.no_failure
    label = final.labels.get()
    assert label.code == lossy and label.rationale.count("because lossy-handoff") == 2
    assert label.evidence == [cite(final.run, "lossy-handoff")]


def test_two_no_failure_codings_agree(study):
    a, b = both(study)
    code_run(a, [])
    code_run(b, [])
    assert FinalCoding.objects.get().no_failure


def test_disagreement_opens_a_discussion_with_masi_agreement(study, codebook):
    a, b = both(study)
    lossy, stale = mode_code(codebook, "lossy-handoff"), mode_code(codebook, "stale-handoff")
    code_run(a, [lossy, stale])
    code_run(b, [lossy])
    discussion = Discussion.objects.get()
    assert discussion.status == "open"
    assert discussion.agreement == pytest.approx(0.5 * 2 / 3)  # J = 1/2, subset → M = 2/3
    assert FinalCoding.objects.count() == 0


def test_revise_consensus_and_first_submission_kept_for_kappa(study, codebook):
    a, b = both(study)
    lossy, stale = mode_code(codebook, "lossy-handoff"), mode_code(codebook, "stale-handoff")
    code_run(a, [lossy, stale])
    ann_b = code_run(b, [lossy])
    discussion = Discussion.objects.get()
    with pytest.raises(AnnotationError, match="still differ"):
        flow.discussion_consensus(discussion=discussion, actor=a.annotator)
    with pytest.raises(AnnotationError, match="your own"):
        annotation_revise(
            discussion=discussion,
            annotation=ann_b,
            actor=a.annotator,
            version=ann_b.version,
            no_failure=False,
            notes="",
            labels=[],
        )
    annotation_revise(
        discussion=discussion,
        annotation=ann_b,
        actor=b.annotator,
        version=ann_b.version,
        no_failure=False,
        notes="convinced",
        labels=[LabelInput(code_id=lossy.pk, rationale="r1"), LabelInput(code_id=stale.pk, rationale="r2")],
    )
    assert AuditEntry.objects.filter(annotation=ann_b, action="revise").exists()
    final = flow.discussion_consensus(discussion=discussion, actor=b.annotator)
    assert final.provenance == "consensus" and final.labels.count() == 2
    discussion.refresh_from_db()
    assert discussion.status == "consensus"
    _, codings, _ = independent_codings(study=study)
    assert {c.annotator: c.codes for c in codings if c.item == str(a.run_id)}[b.annotator.username] == {
        "lossy-handoff"
    }  # κ uses the first submission, not the revision


def test_escalate_and_adjudicate(study, codebook, adjudicator, trio):
    a, b = both(study)
    lossy, stale = mode_code(codebook, "lossy-handoff"), mode_code(codebook, "stale-handoff")
    code_run(a, [lossy])
    code_run(b, [stale])
    discussion = Discussion.objects.get()
    with pytest.raises(AnnotationError, match="only escalated"):
        flow.adjudicate(discussion=discussion, actor=adjudicator, rulings=[flow.Ruling(lossy.pk, "x")])
    flow.discussion_escalate(discussion=discussion, actor=a.annotator)
    with pytest.raises(AnnotationError, match="adjudicator"):
        flow.adjudicate(discussion=discussion, actor=a.annotator, rulings=[flow.Ruling(lossy.pk, "x")])
    with pytest.raises(AnnotationError, match="needs a rationale"):
        flow.adjudicate(discussion=discussion, actor=adjudicator, rulings=[flow.Ruling(lossy.pk, " ")])
    final = flow.adjudicate(discussion=discussion, actor=adjudicator, rulings=[flow.Ruling(stale.pk, "the brief")])
    assert final.provenance == "adjudicated" and final.decided_by == adjudicator
    assert [fl.code for fl in final.labels.all()] == [stale]
    with pytest.raises(AnnotationError, match="is adjudicated"):
        flow.discussion_escalate(discussion=discussion, actor=a.annotator)


def test_pages_and_access(study, codebook, adjudicator, trio):
    a, b = both(study)
    outsider = next(u for u in trio if u.pk not in (a.annotator_id, b.annotator_id))
    code_run(a, [mode_code(codebook, "lossy-handoff")], rationale="A-SAYS")
    code_run(b, [mode_code(codebook, "stale-handoff")], rationale="B-SAYS")
    discussion = Discussion.objects.get()
    url = f"/annotate/discussions/{discussion.pk}/"
    page = client_for(a.annotator).get(url).content.decode()
    assert "A-SAYS" in page and "B-SAYS" in page and 'class="differs"' in page
    assert client_for(outsider).get(url).status_code == 404  # not on this run: blind
    assert client_for(adjudicator).get(url).status_code == 200
    fragment = client_for(b.annotator).post(f"{url}comment/", {"text": "I read line 9 differently"}, **HTMX)
    assert "<html" not in fragment.content.decode() and "line 9" in fragment.content.decode()
    assert client_for(outsider).post(f"{url}comment/", {"text": "x"}).status_code == 404
    client_for(a.annotator).post(f"{url}resolve/", {"action": "escalate"})
    queue = client_for(adjudicator).get("/annotate/adjudication/").content.decode()
    assert f"/annotate/adjudication/{discussion.pk}/" in queue
    assert client_for(a.annotator).get(f"/annotate/adjudication/{discussion.pk}/").status_code == 404
    stale = mode_code(codebook, "stale-handoff")
    missing = client_for(adjudicator).post(f"/annotate/adjudication/{discussion.pk}/", {"code": [stale.pk]})
    assert missing.status_code == 422 and "needs a rationale" in missing.content.decode()
    done = client_for(adjudicator).post(
        f"/annotate/adjudication/{discussion.pk}/", {"code": [stale.pk], f"rationale-{stale.pk}": "brief was stale"}
    )
    assert done.status_code == 302 and FinalCoding.objects.get().provenance == "adjudicated"


def test_revising_through_the_annotate_page(study, codebook):
    a, b = both(study)
    lossy = mode_code(codebook, "lossy-handoff")
    code_run(a, [lossy])
    ann_b = code_run(b, [])
    page = client_for(b.annotator).get(f"/annotate/{b.pk}/").content.decode()
    assert f"/annotate/{b.pk}/revise/" in page and "saved as a revision" in page
    response = client_for(b.annotator).post(f"/annotate/{b.pk}/revise/", coding_form(lossy, ann_b.version), **HTMX)
    assert response.status_code == 200
    assert client_for(b.annotator).post(f"/annotate/{b.pk}/save/", coding_form(lossy, 99), **HTMX).status_code == 409


def test_simulate_codings_demo_command(study):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("simulate_codings", str(study.pk), "--fraction", "1", "--agree", "0.5", "--seed", "3", stdout=out)
    assert "[demo] submitted 12 synthetic codings on 6 runs" in out.getvalue()
    assert FinalCoding.objects.count() + Discussion.objects.count() == 6


def test_a_discussion_stays_blind_to_a_coder_of_the_same_run_in_another_study(study, codebook, trio, adjudicator):
    """Study S discusses run R between two of its coders; the third coder of S is assigned R in study T
    and has yet to code it there: no list, page, fragment or count of theirs shows S's discussion."""
    from annotation.services.studies import assignment_add, study_create
    from tests.factories import submit_disagreement

    run = study.runs.order_by("pk").first()
    outsider = next(u for u in trio if not Assignment.objects.filter(study=study, run=run, annotator=u).exists())
    discussion = submit_disagreement(study, run.pk, codebook)
    other = study_create(name="T", codebook=codebook, annotators=trio, adjudicator=adjudicator, run_ids=[run.pk])
    assignment_add(study=other, run=run, annotator=outsider)
    client = client_for(outsider)
    listing = client.get("/annotate/discussions/").content.decode()
    assert f"/annotate/discussions/{discussion.pk}/" not in listing and run.task.external_id not in listing
    assert client.get(f"/annotate/discussions/{discussion.pk}/").status_code == 404
    queue = client.get("/annotate/").content.decode()
    assert f"/annotate/discussions/{discussion.pk}/" not in queue


def test_final_labels_keep_every_field_and_who_decided(study, codebook, adjudicator):
    """Agreed, adjudicated and imported final labels keep what was recorded for each mode, not
    only code and rationale, and say per label how they were reached."""
    from annotation.models import FinalLabel

    lossy, stale = mode_code(codebook, "lossy-handoff"), mode_code(codebook, "stale-handoff")

    def coded(assignment, code, consequence, rejected):
        annotation = annotation_for(assignment=assignment)
        run = assignment.run
        label = LabelInput(code_id=code.pk, rationale=f"why {assignment.slot}", realized_consequence=consequence,
                           evidence=[cite(run, code.key)], contrast=[], nearest_rejected_id=rejected.pk,
                           rejection_reason=f"not {rejected.key}", episode_id="ep-1",
                           comparative_role="parallel_adverse")  # fmt: skip
        annotation_save(annotation=annotation, actor=assignment.annotator, version=annotation.version,
                        no_failure=False, notes="", labels=[label])  # fmt: skip
        annotation_submit(annotation=annotation, actor=assignment.annotator, version=annotation.version)

    runs = list(study.runs.order_by("pk")[:2])
    a, b = both(study, runs[0])
    coded(a, lossy, "the test name was lost", stale)
    coded(b, lossy, "the parent guessed", stale)
    agreed = FinalLabel.objects.get(final__run=runs[0])
    assert agreed.provenance == "agreed" and agreed.decided_by is None
    assert (
        "the test name was lost" in agreed.realized_consequence and "the parent guessed" in agreed.realized_consequence
    )
    assert (
        agreed.nearest_rejected == stale
        and agreed.episode_id == "ep-1"
        and agreed.comparative_role == "parallel_adverse"
    )

    a, b = both(study, runs[1])
    coded(a, lossy, "first view", stale)
    coded(b, stale, "second view", lossy)
    discussion = Discussion.objects.get(run=runs[1])
    flow.discussion_escalate(discussion=discussion, actor=a.annotator)
    flow.adjudicate(discussion=discussion, actor=adjudicator, rulings=[flow.Ruling(stale.pk, "the ruling")])
    ruled = FinalLabel.objects.get(final__run=runs[1])
    assert (ruled.provenance, ruled.decided_by, ruled.rationale) == ("adjudicated", adjudicator, "the ruling")
    assert "second view" in ruled.realized_consequence and ruled.nearest_rejected == lossy
