from __future__ import annotations

from collections import Counter

import pytest
from django.db import IntegrityError, transaction

from annotation.errors import AnnotationError, ConflictError, LockedError
from annotation.models import Annotation, Assignment, AuditEntry
from annotation.selectors.queue import annotation_for
from annotation.services.coding import LabelInput, annotation_save, annotation_submit
from annotation.services.studies import annotator_replace, assignment_add, study_assign, study_create
from taxonomy.services import codebook_new_version
from tests.factories import mode_code, new_user

pytestmark = pytest.mark.django_db


def test_study_scope_is_paired_concurrent_runs(study):
    assert study.runs.count() == 6 and set(study.runs.values_list("mode", flat=True)) == {"concurrent"}


def test_each_run_has_exactly_two_annotators_and_load_is_even(study, trio):
    per_run = Counter(Assignment.objects.filter(study=study).values_list("run_id", flat=True))
    assert set(per_run.values()) == {2} and len(per_run) == 6
    per_annotator = Counter(Assignment.objects.filter(study=study).values_list("annotator_id", flat=True))
    assert set(per_annotator.values()) == {4}  # 6 runs × 2 / 3


def test_assign_is_idempotent(study):
    assert study_assign(study=study) == 0
    assert Assignment.objects.filter(study=study).count() == 12


def test_database_refuses_a_third_annotator_or_a_duplicate(study, adjudicator):
    a = Assignment.objects.filter(study=study).first()
    with pytest.raises(IntegrityError), transaction.atomic():
        Assignment.objects.create(study=study, run=a.run, annotator=adjudicator, slot=3, position=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        Assignment.objects.create(study=study, run=a.run, annotator=adjudicator, slot=a.slot, position=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        other_slot = 1 if a.slot == 2 else 2
        Assignment.objects.filter(study=study, run=a.run, slot=other_slot).delete()
        Assignment.objects.create(study=study, run=a.run, annotator=a.annotator, slot=other_slot, position=99)
    with pytest.raises(IntegrityError), transaction.atomic():  # two runs at one place in a queue
        other_slot = 1 if a.slot == 2 else 2
        Assignment.objects.filter(study=study, run=a.run, slot=other_slot).delete()
        Assignment.objects.create(study=study, run=a.run, annotator=adjudicator, slot=other_slot, position=1)
        b = study.runs.exclude(pk=a.run_id).first()
        Assignment.objects.filter(study=study, run=b, slot=1).delete()
        Assignment.objects.create(study=study, run=b, annotator=adjudicator, slot=1, position=1)
    with pytest.raises(AnnotationError, match="already has its 2 annotators"):
        assignment_add(study=study, run=a.run, annotator=adjudicator)


def test_study_needs_a_frozen_codebook_a_valid_design_and_a_separate_adjudicator(codebook, trio, adjudicator):
    draft = codebook_new_version(codebook=codebook)
    with pytest.raises(AnnotationError, match="freeze"):
        study_create(name="x", codebook=draft, annotators=trio, adjudicator=adjudicator)
    with pytest.raises(AnnotationError, match="at least two annotators") as refused:
        study_create(name="x", codebook=codebook, annotators=trio[:1], adjudicator=adjudicator)
    assert refused.value.errors == {"annotators": "a study needs at least two annotators (1 given)"}
    with pytest.raises(AnnotationError, match="between 2 and the 3 annotators") as refused:
        study_create(name="x", codebook=codebook, annotators=trio, adjudicator=adjudicator, coders_per_run=4)
    assert set(refused.value.errors) == {"coders_per_run"}
    with pytest.raises(AnnotationError, match="adjudicator"):
        study_create(name="x", codebook=codebook, annotators=trio, adjudicator=trio[0])
    with pytest.raises(AnnotationError, match="needs a name"):
        study_create(name="  ", codebook=codebook, annotators=trio, adjudicator=adjudicator)
    # two annotators, both on every run, is a design too
    pair = study_create(name="pair", codebook=codebook, annotators=trio[:2], adjudicator=adjudicator)
    assert pair.coders_per_run == 2


def _assignment(study, user):
    return Assignment.objects.filter(study=study, annotator=user).order_by("run_id").first()


def test_save_submit_and_history(study, trio, codebook):
    annotation = annotation_for(assignment=_assignment(study, trio[0]))
    code = mode_code(codebook, "same-file-collision")
    anchor = f"parallel/{annotation.assignment.run.source_name}:3"
    annotation_save(
        annotation=annotation,
        actor=trio[0],
        version=1,
        no_failure=False,
        notes="n",
        labels=[LabelInput(code_id=code.pk, rationale="two writers", evidence=[anchor, f" {anchor} "])],
    )
    assert annotation.version == 2
    label = annotation.labels.get()
    assert label.evidence == [anchor]
    annotation_submit(annotation=annotation, actor=trio[0], version=2)
    annotation.refresh_from_db()
    assert annotation.is_submitted and annotation.version == 3
    actions = list(AuditEntry.objects.filter(annotation=annotation).values_list("action", flat=True))
    assert actions == ["save", "submit"]
    entry = AuditEntry.objects.filter(annotation=annotation).first()
    assert entry.before["labels"] == [] and entry.after["labels"][0]["code"] == "same-file-collision"
    with pytest.raises(LockedError):
        annotation_save(annotation=annotation, actor=trio[0], version=3, no_failure=True, notes="", labels=[])


def test_stale_version_is_a_conflict_and_writes_nothing(study, trio, codebook):
    annotation = annotation_for(assignment=_assignment(study, trio[0]))
    code = mode_code(codebook, "lossy-handoff")
    annotation_save(
        annotation=annotation,
        actor=trio[0],
        version=1,
        no_failure=False,
        notes="tab A",
        labels=[LabelInput(code_id=code.pk, rationale="first")],
    )
    stale = Annotation.objects.get(pk=annotation.pk)
    stale.version = 1  # a second tab still holding version 1
    with pytest.raises(ConflictError, match="saved elsewhere"):
        annotation_save(annotation=stale, actor=trio[0], version=1, no_failure=True, notes="tab B", labels=[])
    fresh = Annotation.objects.get(pk=annotation.pk)
    assert (fresh.notes, fresh.no_failure, fresh.version) == ("tab A", False, 2)
    assert fresh.labels.get().rationale == "first"


def test_submit_requires_rationales_and_some_decision(study, trio, codebook):
    annotation = annotation_for(assignment=_assignment(study, trio[0]))
    with pytest.raises(AnnotationError, match="no failure mode"):
        annotation_submit(annotation=annotation, actor=trio[0], version=1)
    code = mode_code(codebook, "artifact-leakage")
    annotation_save(
        annotation=annotation,
        actor=trio[0],
        version=1,
        no_failure=False,
        notes="",
        labels=[LabelInput(code_id=code.pk, rationale="  ")],
    )
    with pytest.raises(AnnotationError, match="needs a rationale") as info:
        annotation_submit(annotation=annotation, actor=trio[0], version=2)
    assert f"rationale-{code.pk}" in info.value.errors
    assert not Annotation.objects.get(pk=annotation.pk).is_submitted


def test_no_failure_excludes_codes_and_codes_must_be_modes(study, trio, codebook):
    annotation = annotation_for(assignment=_assignment(study, trio[0]))
    mode = mode_code(codebook, "artifact-leakage")
    with pytest.raises(AnnotationError, match="excludes"):
        annotation_save(
            annotation=annotation,
            actor=trio[0],
            version=1,
            no_failure=True,
            notes="",
            labels=[LabelInput(code_id=mode.pk, rationale="x")],
        )
    category = codebook.codes.filter(level="category").first()
    with pytest.raises(AnnotationError, match="not a failure mode"):
        annotation_save(
            annotation=annotation,
            actor=trio[0],
            version=1,
            no_failure=False,
            notes="",
            labels=[LabelInput(code_id=category.pk, rationale="x")],
        )
    assert not Annotation.objects.filter(assignment=annotation.assignment).exists()  # nothing stored


def test_audit_entries_are_append_only(study, trio):
    annotation = annotation_for(assignment=_assignment(study, trio[0]))
    annotation_save(annotation=annotation, actor=trio[0], version=1, no_failure=True, notes="", labels=[])
    entry = AuditEntry.objects.get(annotation=annotation)
    entry.action = "tampered"
    with pytest.raises(ValueError):
        entry.save()
    with pytest.raises(ValueError):
        entry.delete()


def test_reassignment_keeps_submitted_work(study, trio):
    leaving, *_ = trio
    mine = list(Assignment.objects.filter(study=study, annotator=leaving).order_by("run_id"))
    done = annotation_for(assignment=mine[0])
    annotation_save(annotation=done, actor=leaving, version=1, no_failure=True, notes="", labels=[])
    annotation_submit(annotation=done, actor=leaving, version=2)
    draft = annotation_for(assignment=mine[1])
    annotation_save(annotation=draft, actor=leaving, version=1, no_failure=True, notes="half", labels=[])
    newcomer = new_user("newcomer")
    result = annotator_replace(study=study, leaving=leaving, replacement=newcomer)
    assert result == {"moved": len(mine) - 1, "kept": 1}
    assert Assignment.objects.get(pk=mine[0].pk).annotator == leaving  # submitted work stays
    moved = Assignment.objects.get(pk=mine[1].pk)
    assert moved.annotator == newcomer
    fresh = Annotation.objects.get(assignment=moved)  # the newcomer starts from an empty draft
    assert (fresh.notes, fresh.no_failure, fresh.labels.count(), fresh.status) == ("", False, 0, "draft")
    # … and the leaver's draft and its history stay in the audit trail.
    history = list(AuditEntry.objects.filter(annotation=fresh).order_by("pk"))
    assert [e.action for e in history] == ["save", "reassign"] and history[0].actor == leaving
    assert history[1].before["notes"] == "half" and history[1].after["to"] == "newcomer"
    assert fresh.version == history[1].after["version"]
    assert set(Counter(Assignment.objects.filter(study=study).values_list("run_id", flat=True)).values()) == {2}
    assert set(study.annotators.values_list("username", flat=True)) == {"coder2", "coder3", "newcomer"}


def test_submit_refuses_an_anchor_that_cites_no_line_of_the_pair(study, trio, codebook):
    annotation = annotation_for(assignment=_assignment(study, trio[0]))
    run = annotation.assignment.run
    code = mode_code(codebook, "same-file-collision")
    bad = [f"parallel/{run.source_name}:99", "serial/cell/model.patch:3"]
    label = LabelInput(code_id=code.pk, rationale="r", evidence=bad[:1], contrast=bad[1:])
    annotation_save(annotation=annotation, actor=trio[0], version=1, no_failure=False, notes="", labels=[label])
    assert annotation.labels.get().evidence == bad[:1]  # saved as typed: nothing is lost
    with pytest.raises(AnnotationError) as refused:
        annotation_submit(annotation=annotation, actor=trio[0], version=annotation.version)
    assert set(refused.value.errors) == {f"evidence-{code.pk}", f"contrast-{code.pk}"}
    assert f"{run.source_name} has 9 lines" in str(refused.value)
    assert "no file 'cell/model.patch' in the sequential run" in str(refused.value)
    annotation.refresh_from_db()
    assert not annotation.is_submitted
