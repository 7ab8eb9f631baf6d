"""Any study design: N annotators, k of them per run, kept balanced as runs arrive one at a time;
reconciling k codings; annotators joining and leaving mid-study; editing and closing a study."""

from __future__ import annotations

from collections import Counter

import pytest
from django.db import IntegrityError, transaction

from accounts.roles import ANNOTATOR
from activity.models import ActivityEntry
from annotation.errors import AnnotationError, LockedError
from annotation.models import Annotation, Assignment, AuditEntry, Discussion, FinalCoding, Label
from annotation.selectors.queue import annotation_for
from annotation.selectors.studies import study_balance
from annotation.services.coding import LabelInput, annotation_save, annotation_submit
from annotation.services.review import discussion_consensus
from annotation.services.studies import (
    annotator_replace,
    study_add_annotator,
    study_add_runs,
    study_assign,
    study_close,
    study_create,
    study_update,
)
from tests.factories import mode_code, more_pairs, new_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def quad(trio):
    return [*trio, new_user("coder4", ANNOTATOR)]


@pytest.fixture
def three_of_four(study, codebook, quad, adjudicator):
    """The `study` fixture's six runs in a second study: four annotators, three per run."""
    created = study_create(name="S4", codebook=codebook, annotators=quad, adjudicator=adjudicator,
                           run_ids=list(study.runs.values_list("pk", flat=True)), coders_per_run=3, seed=4)  # fmt: skip
    study_assign(study=created)
    return created


def _code(annotation, actor, keys, codebook, *, submit=True):
    labels = [LabelInput(code_id=mode_code(codebook, key).pk, rationale="because") for key in keys]
    annotation_save(annotation=annotation, actor=actor, version=annotation.version, no_failure=not keys, notes="",
                    labels=labels)  # fmt: skip
    if submit:
        annotation_submit(annotation=annotation, actor=actor, version=annotation.version)
    return annotation


def test_three_of_four_gives_each_run_three_distinct_coders_in_slots_one_to_three(three_of_four):
    rows = Assignment.objects.filter(study=three_of_four)
    per_run: dict[int, list] = {}
    for run_id, annotator, slot in rows.values_list("run_id", "annotator_id", "slot"):
        per_run.setdefault(run_id, []).append((annotator, slot))
    assert len(per_run) == 6
    for coders in per_run.values():
        assert len({a for a, _ in coders}) == 3 and sorted(s for _, s in coders) == [1, 2, 3]
    report = study_balance(study=three_of_four)
    assert report["groups"]["spread"] <= 1 and report["annotators"]["spread"] <= 1


def test_the_database_refuses_a_slot_above_k(three_of_four, study, adjudicator):
    run = three_of_four.runs.first()
    with pytest.raises(IntegrityError), transaction.atomic():
        Assignment.objects.create(study=three_of_four, run=run, annotator=adjudicator, slot=4, position=1)
    with pytest.raises(IntegrityError), transaction.atomic():  # and in the 2-per-run study, a third
        Assignment.objects.create(study=study, run=run, annotator=adjudicator, slot=3, position=1)
    with pytest.raises(IntegrityError), transaction.atomic():  # moving a row to a slot above k as well
        Assignment.objects.filter(study=three_of_four, run=run, slot=3).update(slot=4)


def test_runs_added_one_at_a_time_keep_three_of_four_balanced(three_of_four, tmp_path):
    for run_id in more_pairs(tmp_path, 18):
        study_add_runs(study=three_of_four, run_ids=[run_id])
        report = study_balance(study=three_of_four)
        assert report["groups"]["spread"] <= 1, run_id
        assert report["worst_stratum_group_spread"] <= 1, run_id
        assert report["annotators"]["spread"] <= 1, run_id
        assert report["pairs"]["spread"] <= 2, run_id  # 2 of 4 triples always share a pair
    assert report["runs"] == 24
    assert report["pairs"]["spread"] == 0  # 24 runs = 6 per triple: every pair co-codes 12
    assert set(report["groups"]["counts"].values()) == {6}


def test_k_codings_agree_only_when_all_match(three_of_four, codebook):
    run_ids = sorted(three_of_four.runs.values_list("pk", flat=True))
    agreed, split = run_ids[0], run_ids[1]
    coders = list(Assignment.objects.filter(study=three_of_four, run_id=agreed).order_by("slot"))
    for n, assignment in enumerate(coders):
        _code(annotation_for(assignment=assignment), assignment.annotator, ["lossy-handoff"], codebook)
        reconciled = FinalCoding.objects.filter(study=three_of_four, run_id=agreed).exists()
        assert reconciled == (n == 2)  # nothing until the third coding is in
    coders = list(Assignment.objects.filter(study=three_of_four, run_id=split).order_by("slot"))
    picks = [["lossy-handoff"], ["lossy-handoff"], ["stale-handoff"]]
    for assignment, keys in zip(coders, picks, strict=True):
        _code(annotation_for(assignment=assignment), assignment.annotator, keys, codebook)
    discussion = Discussion.objects.get(study=three_of_four, run_id=split)
    # 1 − MASI over the three coder pairs: identical (1), then twice disjoint (0) → 1/3
    assert discussion.agreement == pytest.approx(1 / 3)
    with pytest.raises(AnnotationError, match="still differ"):
        discussion_consensus(discussion=discussion, actor=coders[0].annotator)


def test_an_annotator_replaced_mid_study_loses_nothing_coded(three_of_four, quad, codebook, adjudicator):
    leaving, newcomer = quad[0], new_user("coder5", ANNOTATOR)
    mine = list(Assignment.objects.filter(study=three_of_four, annotator=leaving).order_by("position"))
    submitted = _code(annotation_for(assignment=mine[0]), leaving, ["lossy-handoff"], codebook)
    draft = _code(annotation_for(assignment=mine[1]), leaving, ["stale-handoff"], codebook, submit=False)
    result = annotator_replace(study=three_of_four, leaving=leaving, replacement=newcomer, actor=adjudicator)
    assert result == {"moved": len(mine) - 1, "kept": 1}
    submitted.refresh_from_db()
    assert submitted.is_submitted and submitted.assignment.annotator == leaving
    assert list(Label.objects.filter(annotation=submitted).values_list("code__key", flat=True)) == ["lossy-handoff"]
    draft.refresh_from_db()
    assert draft.assignment.annotator == newcomer and not draft.labels.exists()
    history = AuditEntry.objects.filter(annotation=draft, action="reassign").get()
    assert [label["code"] for label in history.before["labels"]] == ["stale-handoff"]  # the draft as it was
    assert set(three_of_four.annotators.all()) == {*quad[1:], newcomer}
    assert ActivityEntry.objects.filter(action="study.replace_annotator", study_id=three_of_four.pk).exists()
    for run_id, n in Counter(Assignment.objects.filter(study=three_of_four).values_list("run_id", flat=True)).items():
        assert n == 3, run_id


def test_leaving_without_a_replacement_needs_enough_annotators(study, trio, adjudicator):
    annotator_replace(study=study, leaving=trio[0], actor=adjudicator)  # 3 → 2 annotators, 2 per run: fine
    with pytest.raises(AnnotationError, match="1 annotators for 2 per run"):
        annotator_replace(study=study, leaving=trio[1], actor=adjudicator)


def test_an_annotator_joining_takes_only_unstarted_runs(three_of_four, quad, codebook, adjudicator):
    started = Assignment.objects.filter(study=three_of_four).order_by("run_id", "slot").first()
    _code(annotation_for(assignment=started), started.annotator, ["lossy-handoff"], codebook, submit=False)
    before = {
        run_id: set(Assignment.objects.filter(study=three_of_four, run_id=run_id).values_list("annotator", flat=True))
        for run_id in three_of_four.runs.values_list("pk", flat=True)
    }
    newcomer = new_user("coder5", ANNOTATOR)
    result = study_add_annotator(study=three_of_four, annotator=newcomer, actor=adjudicator)
    assert result["unstarted_runs"] == 5
    after = {
        run_id: set(Assignment.objects.filter(study=three_of_four, run_id=run_id).values_list("annotator", flat=True))
        for run_id in before
    }
    assert after[started.run_id] == before[started.run_id]  # a started run keeps its coders
    assert Annotation.objects.get(assignment=started).labels.count() == 1
    assert all(len(coders) == 3 for coders in after.values())
    assert sum(newcomer.pk in coders for coders in after.values()) >= 3  # the newcomer takes a large share
    logged = ActivityEntry.objects.get(action="study.rebalance", study_id=three_of_four.pk)
    assert logged.detail["unstarted_runs"] == 5 and logged.detail["added"]
    with pytest.raises(AnnotationError, match="already an annotator"):
        study_add_annotator(study=three_of_four, annotator=newcomer, actor=adjudicator)
    with pytest.raises(AnnotationError, match="adjudicates"):
        study_add_annotator(study=three_of_four, annotator=adjudicator, actor=adjudicator)


def test_editing_a_study(study, adjudicator, trio):
    other = new_user("senior2")
    study_update(study=study, actor=adjudicator, name="Renamed", adjudicator=other)
    study.refresh_from_db()
    assert (study.name, study.adjudicator) == ("Renamed", other)
    with pytest.raises(AnnotationError, match="cannot change once runs are assigned") as refused:
        study_update(study=study, actor=adjudicator, seed=99, coders_per_run=3)
    assert set(refused.value.errors) == {"seed", "coders_per_run"}
    with pytest.raises(AnnotationError, match="cannot also be an annotator"):
        study_update(study=study, actor=adjudicator, adjudicator=trio[0])
    study.refresh_from_db()
    assert (study.seed, study.coders_per_run, study.adjudicator) == (0, 2, other)  # nothing half-written


def test_a_closed_study_takes_no_coding_runs_or_assignments(study, trio, codebook, adjudicator, tmp_path):
    assignment = Assignment.objects.filter(study=study, annotator=trio[0]).first()
    study_close(study=study, actor=adjudicator)
    study.refresh_from_db()
    annotation = annotation_for(assignment=Assignment.objects.select_related("study").get(pk=assignment.pk))
    with pytest.raises(LockedError, match="closed"):
        _code(annotation, trio[0], ["lossy-handoff"], codebook, submit=False)
    assert not Annotation.objects.filter(assignment=assignment).exists() or not annotation.labels.exists()
    with pytest.raises(AnnotationError, match="closed"):
        study_add_runs(study=study, run_ids=more_pairs(tmp_path, 1))
    with pytest.raises(AnnotationError, match="already closed"):
        study_close(study=study, actor=adjudicator)
    study_close(study=study, actor=adjudicator, reopen=True)
    annotation = annotation_for(assignment=Assignment.objects.select_related("study").get(pk=assignment.pk))
    _code(annotation, trio[0], ["lossy-handoff"], codebook, submit=False)
    assert annotation.labels.count() == 1
