"""Adjudication and discussion that guide (issue 16, part 3): the proposed modes with who proposed them,
the ruling's consequence and anchors (checked like the annotators'), finished cases read-only, the outcome
on the annotators' discussion page and what changed since the first submissions (the annotate page's
status line is tests/annotation/test_status_line.py)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.errors import AnnotationError
from annotation.models import Annotation, Assignment, Discussion, FinalCoding, FinalLabel
from annotation.selectors.queue import annotation_for
from annotation.services import review as flow
from annotation.services.coding import LabelInput, annotation_revise, annotation_save, annotation_submit
from tests.factories import cite, client_for, mode_code
from trajectories.selectors import run_twin

pytestmark = pytest.mark.django_db
LITERAL = ("{#", "#}", "{%", "%}", "{{", "}}")


def submit(assignment, labels, *, notes=""):
    annotation = annotation_for(assignment=assignment)
    annotation_save(annotation=annotation, actor=assignment.annotator, version=annotation.version,
                    no_failure=not labels, notes=notes, labels=labels)  # fmt: skip
    annotation_submit(annotation=annotation, actor=assignment.annotator, version=annotation.version)
    return annotation


def disagree(study, codebook, *, run=None, lossy_episodes=1, comments=0):
    """Slot 1 codes lossy-handoff (with `lossy_episodes` episodes), slot 2 stale-handoff; the discussion."""
    run = run or study.runs.order_by("pk").first()
    a, b = Assignment.objects.filter(study=study, run=run).order_by("slot").select_related("annotator", "run")
    lossy, stale = mode_code(codebook, "lossy-handoff"), mode_code(codebook, "stale-handoff")
    submit(a, [LabelInput(code_id=lossy.pk, rationale=f"A-LOSSY-{k}", realized_consequence=f"A-CONSEQUENCE-{k}",
                          evidence=[cite(run, "lossy-handoff")]) for k in range(1, lossy_episodes + 1)])  # fmt: skip
    submit(b, [LabelInput(code_id=stale.pk, rationale="B-STALE", evidence=[cite(run, "stale-handoff")])])
    discussion = Discussion.objects.get(study=study, run=run)
    for k in range(comments):
        flow.discussion_comment(discussion=discussion, author=a.annotator if k % 2 else b.annotator, text=f"c{k}")
    return discussion, a, b


def escalated(study, codebook, **kwargs):
    discussion, a, b = disagree(study, codebook, **kwargs)
    flow.discussion_escalate(discussion=discussion, actor=a.annotator)
    return discussion, a, b


def third(trio, *assignments):
    return next(u for u in trio if u.pk not in {x.annotator_id for x in assignments})


def no_template_text(body: str) -> None:
    assert not [mark for mark in LITERAL if mark in body], "literal template syntax on the page"


# -- the ruling (service) -------------------------------------------------------------------------


def test_the_adjudicators_consequence_and_anchors_go_to_the_first_episode(study, codebook, adjudicator):
    discussion, a, _ = escalated(study, codebook, lossy_episodes=2)
    run = discussion.run
    lossy, stale = mode_code(codebook, "lossy-handoff"), mode_code(codebook, "stale-handoff")
    twin = run_twin(run=run)
    ruling = flow.Ruling(code_id=lossy.pk, rationale=" RULED ", realized_consequence=" the parent guessed ",
                         evidence=[cite(run, "stale-handoff"), cite(run, "stale-handoff")],
                         contrast=[f"serial/{twin.source_name}:1"])  # fmt: skip
    flow.adjudicate(discussion=discussion, actor=adjudicator, rulings=[ruling, flow.Ruling(stale.pk, "also stale")])
    first, second = FinalLabel.objects.filter(code=lossy).order_by("instance")
    assert (first.rationale, second.rationale) == ("RULED", "RULED")  # the ruling's rationale on every episode
    assert first.realized_consequence == "the parent guessed"
    assert first.evidence == [cite(run, "stale-handoff")] and first.contrast == [f"serial/{twin.source_name}:1"]
    # the second episode is another occurrence: it keeps what the annotator recorded for it
    assert "A-CONSEQUENCE-2" in second.realized_consequence and second.evidence == [cite(run, "lossy-handoff")]
    # a field the adjudicator left empty keeps the annotators' record
    kept = FinalLabel.objects.get(code=stale)
    assert kept.rationale == "also stale" and kept.evidence == [cite(run, "stale-handoff")]


def test_a_ruled_mode_no_annotator_picked_gets_one_episode_with_the_ruling(study, codebook, adjudicator):
    discussion, _, _ = escalated(study, codebook)
    merge = mode_code(codebook, "merge-after-verification")
    flow.adjudicate(discussion=discussion, actor=adjudicator, rulings=[
        flow.Ruling(merge.pk, "neither saw it", realized_consequence="late merge", evidence=[cite(discussion.run)])
    ])  # fmt: skip
    label = FinalLabel.objects.get()
    assert (label.code, label.instance, label.realized_consequence, label.evidence) == (
        merge,
        1,
        "late merge",
        [cite(discussion.run)],
    )


def test_anchors_that_do_not_resolve_are_refused_naming_the_field(study, codebook, adjudicator):
    discussion, _, _ = escalated(study, codebook)
    lossy = mode_code(codebook, "lossy-handoff")
    bad = flow.Ruling(lossy.pk, "r", evidence=[f"parallel/{discussion.run.source_name}:99999"], contrast=["nope.txt:1"])
    with pytest.raises(AnnotationError) as refused:
        flow.adjudicate(discussion=discussion, actor=adjudicator, rulings=[bad])
    errors = refused.value.errors
    assert set(errors) == {f"evidence-{lossy.pk}", f"contrast-{lossy.pk}"}
    assert (
        errors[f"evidence-{lossy.pk}"].startswith("'Lossy Handoff' evidence: ")
        and "lines" in errors[f"evidence-{lossy.pk}"]
    )
    assert (
        errors[f"contrast-{lossy.pk}"].startswith("'Lossy Handoff' contrast: ")
        and "no file 'nope.txt'" in errors[f"contrast-{lossy.pk}"]
    )
    with pytest.raises(AnnotationError, match="is not an anchor"):
        flow.adjudicate(discussion=discussion, actor=adjudicator, rulings=[flow.Ruling(lossy.pk, "r", evidence=["x"])])
    discussion.refresh_from_db()
    assert discussion.status == "escalated" and not FinalCoding.objects.exists()  # nothing was written


def test_the_ruling_is_logged_with_what_the_adjudicator_gave(study, codebook, adjudicator):
    from activity.models import ActivityEntry

    discussion, _, _ = escalated(study, codebook)
    lossy = mode_code(codebook, "lossy-handoff")
    flow.adjudicate(discussion=discussion, actor=adjudicator, rulings=[
        flow.Ruling(lossy.pk, "r", realized_consequence="c", evidence=[cite(discussion.run)])
    ], note=" n ")  # fmt: skip
    entry = ActivityEntry.objects.get(action="final.adjudicated")
    assert entry.detail["rulings"] == [
        {
            "mode": "lossy-handoff",
            "rationale": "r",
            "episodes": 1,
            "realized_consequence": "c",
            "evidence": [cite(discussion.run)],
        }
    ]
    assert entry.detail["note"] == "n" and FinalCoding.objects.get().note == "n"


# -- the adjudication page ---------------------------------------------------------------------------


def test_the_proposed_modes_come_first_with_who_proposed_them_and_their_evidence(study, codebook, adjudicator):
    discussion, a, b = escalated(study, codebook)
    body = client_for(adjudicator).get(f"/annotate/adjudication/{discussion.pk}/").content.decode()
    no_template_text(body)
    proposed = body[body.index('class="ruling-list proposed-list"') : body.index('class="ruling-list others-list"')]
    others = body[body.index('class="ruling-list others-list"') :]
    assert proposed.count('class="ruling-mode proposed"') == 2 and others.count('class="ruling-mode"') == 30
    lossy = proposed[proposed.index('data-key="lossy-handoff"') : proposed.index('data-key="stale-handoff"')]
    assert f"proposed by {a.annotator.username}" in lossy and b.annotator.username not in lossy
    assert cite(discussion.run, "lossy-handoff") in lossy  # the proposer's evidence, as a link into the pair
    assert f"proposed by {b.annotator.username}" in proposed[proposed.index('data-key="stale-handoff"') :]
    assert 'id="mode-search"' in body and "js/adjudicate.js" in body
    for name in ("rationale", "consequence", "evidence", "contrast"):
        assert body.count(f'name="{name}-') == 32  # every mode can be ruled with every field


def queries(client, url: str) -> int:
    """The queries a GET of `url` runs (a page of status 200)."""
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


def test_the_page_keeps_a_fixed_number_of_queries(study, codebook, adjudicator):
    """However many episodes, comments and proposals: the same count for a small and a larger case, within a
    budget (tests/test_query_counts.py says how budgets are set)."""
    runs = list(study.runs.order_by("pk")[:2])
    small, _, _ = escalated(study, codebook, run=runs[0])
    large, _, _ = escalated(study, codebook, run=runs[1], lossy_episodes=4, comments=6)
    client = client_for(adjudicator)
    client.get(f"/annotate/adjudication/{small.pk}/")
    # 21: +1 the run's prediction (none here); +4 the hints rule, hits, anchors, names; +1 the pair's test lists
    counts = [queries(client, f"/annotate/adjudication/{discussion.pk}/") for discussion in (small, large)]
    assert counts[0] == counts[1] <= 25, counts
    lossy = mode_code(codebook, "lossy-handoff")
    for discussion in (small, large):  # read-only once final: the final labels, no ruling form
        flow.adjudicate(discussion=discussion, actor=adjudicator, rulings=[flow.Ruling(lossy.pk, "r")])
    counts = [queries(client, f"/annotate/adjudication/{discussion.pk}/") for discussion in (small, large)]
    assert counts[0] == counts[1] <= 25, counts  # 23


def test_a_refused_ruling_is_422_keeps_what_was_typed_and_names_the_field(study, codebook, adjudicator):
    discussion, _, _ = escalated(study, codebook)
    lossy, stale = mode_code(codebook, "lossy-handoff"), mode_code(codebook, "stale-handoff")
    url = f"/annotate/adjudication/{discussion.pk}/"
    response = client_for(adjudicator).post(url, {
        "code": [lossy.pk, stale.pk], f"rationale-{lossy.pk}": "TYPED-RATIONALE",
        f"consequence-{lossy.pk}": "TYPED-CONSEQUENCE", f"evidence-{lossy.pk}": "nope.txt:1",
        f"rationale-{stale.pk}": "", "note": "TYPED-NOTE",
    })  # fmt: skip
    body = response.content.decode()
    assert response.status_code == 422
    assert "&#x27;Lossy Handoff&#x27; evidence: nope.txt:1: no file" in body
    assert "&#x27;Stale Handoff&#x27; needs a rationale" in body
    assert "TYPED-RATIONALE" in body and "TYPED-CONSEQUENCE" in body and "TYPED-NOTE" in body
    assert body.count("checked") >= 2 and not FinalCoding.objects.exists()
    assert client_for(adjudicator).post(url, {"code": ["seven"]}).status_code == 422  # not a number: said, not 500
    nothing = client_for(adjudicator).post(url, {})
    assert nothing.status_code == 422 and "pick the final modes" in nothing.content.decode()


def test_after_the_ruling_the_case_is_read_only(study, codebook, adjudicator):
    discussion, _, _ = escalated(study, codebook)
    other, _, _ = escalated(study, codebook, run=study.runs.order_by("pk")[1])
    stale = mode_code(codebook, "stale-handoff")
    url = f"/annotate/adjudication/{discussion.pk}/"
    client = client_for(adjudicator)
    done = client.post(url, {"code": [stale.pk], f"rationale-{stale.pk}": "THE-RULING",
                             f"consequence-{stale.pk}": "THE-CONSEQUENCE", "note": "THE-NOTE"})  # fmt: skip
    assert done.status_code == 302 and done["Location"] == url
    page = client.get(url)
    body = page.content.decode()
    no_template_text(body)
    assert 'id="adjudication-form"' not in body and 'name="code"' not in body  # no form any more
    final = FinalCoding.objects.get(run=discussion.run)
    assert "THE-RULING" in body and "THE-CONSEQUENCE" in body and "THE-NOTE" in body
    assert f"Adjudicated by\n    <strong>{adjudicator.username}</strong>" in body
    assert final.decided_at.strftime("%Y-%m-%d") in body and "adjudicated: the final labels are below" in body
    assert f"/annotate/adjudication/{other.pk}/" in body  # the next escalated case
    again = client.post(url, {"code": [stale.pk], f"rationale-{stale.pk}": "second thoughts"})
    assert again.status_code == 409 and "is adjudicated" in again.content.decode()
    assert FinalCoding.objects.filter(run=discussion.run).count() == 1 and "second thoughts" not in str(
        list(FinalLabel.objects.values_list("rationale", flat=True))
    )


def test_a_case_resolved_by_consensus_shows_read_only_and_an_open_one_cannot_be_ruled(study, codebook, adjudicator):
    discussion, a, b = disagree(study, codebook)
    url = f"/annotate/adjudication/{discussion.pk}/"
    client = client_for(adjudicator)
    open_page = client.get(url).content.decode()
    assert "still discussing" in open_page and 'id="adjudication-form"' not in open_page
    stale = mode_code(codebook, "stale-handoff")
    refused = client.post(url, {"code": [stale.pk], f"rationale-{stale.pk}": "too early"})
    assert refused.status_code == 409 and "only escalated discussions are adjudicated" in refused.content.decode()
    annotation = Annotation.objects.get(assignment=a)
    agrees = [LabelInput(code_id=stale.pk, rationale="A-AGREES")]
    annotation_revise(discussion=discussion, annotation=annotation, actor=a.annotator, version=annotation.version,
                      no_failure=False, notes="", labels=agrees)  # fmt: skip
    flow.discussion_consensus(discussion=discussion, actor=b.annotator)
    body = client.get(url).content.decode()
    no_template_text(body)
    assert 'id="adjudication-form"' not in body and "Resolved by consensus" in body
    assert f"<strong>{b.annotator.username}</strong>" in body and "A-AGREES" in body


@pytest.mark.parametrize("who", ["coder of the run", "other coder", "third annotator", "admin"])
def test_only_the_studys_adjudicator_reaches_the_page(study, codebook, adjudicator, trio, admin_user, who):
    discussion, a, b = escalated(study, codebook)
    user = {"coder of the run": a.annotator, "other coder": b.annotator, "third annotator": third(trio, a, b),
            "admin": admin_user}[who]  # fmt: skip
    client = client_for(user)
    url = f"/annotate/adjudication/{discussion.pk}/"
    assert client.get(url).status_code == 404
    stale = mode_code(codebook, "stale-handoff")
    assert client.post(url, {"code": [stale.pk], f"rationale-{stale.pk}": "mine"}).status_code == 404
    assert not FinalCoding.objects.exists()


# -- the annotators' discussion page ------------------------------------------------------------------


def test_annotators_see_the_outcome_once_the_run_is_final(study, codebook, adjudicator, trio):
    discussion, a, b = escalated(study, codebook)
    url = f"/annotate/discussions/{discussion.pk}/"
    waiting = client_for(a.annotator).get(url).content.decode()
    assert "waiting for the senior adjudicator" in waiting and 'id="final-coding"' not in waiting
    lossy = mode_code(codebook, "lossy-handoff")
    ruling = flow.Ruling(lossy.pk, "SENIOR-RATIONALE", realized_consequence="SENIOR-CONSEQUENCE")
    flow.adjudicate(discussion=discussion, actor=adjudicator, rulings=[ruling])
    for annotator in (a.annotator, b.annotator):
        body = client_for(annotator).get(url).content.decode()
        no_template_text(body)
        assert 'id="final-coding"' in body and "This run is final." in body
        assert "SENIOR-RATIONALE" in body and "SENIOR-CONSEQUENCE" in body and "Lossy Handoff" in body
        assert "Adjudicated by" in body and f"<strong>{adjudicator.username}</strong>" in body
    assert client_for(third(trio, a, b)).get(url).status_code == 404  # not on this run: blind, final or not


def test_the_discussion_page_shows_what_changed_since_each_first_submission(study, codebook):
    discussion, a, b = disagree(study, codebook)
    lossy = mode_code(codebook, "lossy-handoff")
    annotation = Annotation.objects.get(assignment=b)
    annotation_revise(discussion=discussion, annotation=annotation, actor=b.annotator, version=annotation.version,
                      no_failure=False, notes="convinced", labels=[
                          LabelInput(code_id=lossy.pk, rationale="B-NOW-LOSSY"),
                      ])  # fmt: skip
    annotation.refresh_from_db()
    annotation_revise(discussion=discussion, annotation=annotation, actor=b.annotator, version=annotation.version,
                      no_failure=False, notes="convinced", labels=[
                          LabelInput(code_id=lossy.pk, rationale="B-NOW-LOSSY, reworded"),
                      ])  # fmt: skip
    body = client_for(a.annotator).get(f"/annotate/discussions/{discussion.pk}/").content.decode()
    no_template_text(body)
    changes = body[body.index('id="coding-changes"') :]
    mine, theirs = changes.split('<div class="coding-change">')[1:3]
    assert a.annotator.username in mine and "Unchanged since the first submission." in mine
    assert b.annotator.username in theirs
    added = re.search(r'<li class="added">.*?</li>', theirs, re.S).group(0)
    assert "Lossy Handoff" in added and "B-NOW-LOSSY, reworded" in added  # against the first submission
    removed = re.search(r'<li class="removed">.*?</li>', theirs, re.S).group(0)
    assert "Stale Handoff" in removed and "B-STALE" in removed  # what the first submission said
    assert "<del>—</del> → <ins>convinced</ins>" in theirs


def test_a_changed_field_of_an_episode_shows_before_and_after(study, codebook, adjudicator):
    discussion, a, _ = disagree(study, codebook, lossy_episodes=2)
    lossy = mode_code(codebook, "lossy-handoff")
    annotation = Annotation.objects.get(assignment=a)
    annotation_revise(discussion=discussion, annotation=annotation, actor=a.annotator, version=annotation.version,
                      no_failure=False, notes="", labels=[
                          LabelInput(code_id=lossy.pk, rationale="A-LOSSY-1", realized_consequence="A-CONSEQUENCE-1",
                                     evidence=[cite(discussion.run, "lossy-handoff")]),
                          LabelInput(code_id=lossy.pk, rationale="A-LOSSY-2 sharpened",
                                     realized_consequence="A-CONSEQUENCE-2",
                                     evidence=[cite(discussion.run, "lossy-handoff")]),
                      ])  # fmt: skip
    body = client_for(adjudicator).get(f"/annotate/discussions/{discussion.pk}/").content.decode()
    changed = body[body.index('<li class="changed">') :]
    assert "Lossy Handoff" in changed and "episode 2" in changed and "episode 1" not in changed.split("</ul>")[0]
    assert "<dt>rationale</dt><dd><del>A-LOSSY-2</del> → <ins>A-LOSSY-2 sharpened</ins></dd>" in changed


def test_the_discussion_page_keeps_a_fixed_number_of_queries(study, codebook, adjudicator):
    """A final case with its outcome and changes: the same count for a small and a larger one, within a budget."""
    runs = list(study.runs.order_by("pk")[:2])
    small, _, _ = escalated(study, codebook, run=runs[0])
    large, a, _ = escalated(study, codebook, run=runs[1], lossy_episodes=4, comments=6)
    lossy = mode_code(codebook, "lossy-handoff")
    for discussion in (small, large):
        flow.adjudicate(discussion=discussion, actor=adjudicator, rulings=[flow.Ruling(lossy.pk, "r")])
    client = client_for(a.annotator)
    client.get(f"/annotate/discussions/{large.pk}/")
    # 17: +1 the hints rule (not shown on the coding page yet: no hits read); +4 the pair under the log's keys (the
    # twin, each run's files, both runs' test lists)
    assert queries(client, f"/annotate/discussions/{large.pk}/") <= 21
    client = client_for(adjudicator)
    client.get(f"/annotate/discussions/{small.pk}/")
    # 24: +4 the hints rule, the hits, their events' anchors, the modes' names; +4 the pair
    counts = [queries(client, f"/annotate/discussions/{discussion.pk}/") for discussion in (small, large)]
    assert counts[0] == counts[1] <= 25, counts
