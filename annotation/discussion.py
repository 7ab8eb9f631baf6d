"""Discussion of a disagreement, consensus, escalation, and the senior author's adjudication."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from accounts.roles import can_import
from taxonomy.models import Code

from .models import Annotation, Comment, Discussion, Final, FinalLabel
from .reconcile import final_from_annotations, mode_keys, run_annotations
from .services import AnnotationError, LabelInput, annotation_save


def participants(discussion: Discussion) -> set[int]:
    return set(discussion.study.assignments.filter(run_id=discussion.run_id).values_list("annotator_id", flat=True))


def can_view(discussion: Discussion, user: AbstractBaseUser) -> bool:
    return user.pk in participants(discussion) or user.pk == discussion.study.adjudicator_id or can_import(user)


def _require_open(discussion: Discussion) -> None:
    if discussion.status != Discussion.Status.OPEN:
        raise AnnotationError(f"this discussion is {discussion.get_status_display().lower()}")


def discussion_comment(*, discussion: Discussion, author: AbstractBaseUser, text: str) -> Comment:
    if author.pk not in participants(discussion) and author.pk != discussion.study.adjudicator_id:
        raise AnnotationError("only the two annotators and the adjudicator take part in a discussion")
    if not text.strip():
        raise AnnotationError("the comment is empty", {"text": "empty"})
    return Comment.objects.create(discussion=discussion, author=author, text=text.strip())


def annotation_revise(
    *,
    discussion: Discussion,
    annotation: Annotation,
    actor: AbstractBaseUser,
    version: int,
    no_failure: bool,
    notes: str,
    labels: list[LabelInput],
) -> Annotation:
    """An annotator revises their own submitted coding while the discussion is open (history kept;
    agreement statistics keep using the first submission)."""
    _require_open(discussion)
    if annotation.assignment.annotator_id != actor.pk or annotation.assignment.run_id != discussion.run_id:
        raise AnnotationError("you can only revise your own coding of this run")
    return annotation_save(
        annotation=annotation,
        actor=actor,
        version=version,
        no_failure=no_failure,
        notes=notes,
        labels=labels,
        revising=True,
    )


@transaction.atomic
def discussion_consensus(*, discussion: Discussion, actor: AbstractBaseUser) -> Final:
    _require_open(discussion)
    if actor.pk not in participants(discussion):
        raise AnnotationError("only the two annotators can resolve by consensus")
    annotations = run_annotations(study=discussion.study, run_id=discussion.run_id)
    sets = [mode_keys(a) for a in annotations]
    if len(sets) != 2 or sets[0] != sets[1]:
        raise AnnotationError("the two codings still differ: revise them until they match, or escalate")
    final = final_from_annotations(
        study=discussion.study,
        run_id=discussion.run_id,
        annotations=annotations,
        provenance=Final.Provenance.CONSENSUS,
        actor=actor,
    )
    discussion.status = Discussion.Status.CONSENSUS
    discussion.resolved_at = timezone.now()
    discussion.save(update_fields=["status", "resolved_at"])
    return final


def discussion_escalate(*, discussion: Discussion, actor: AbstractBaseUser) -> Discussion:
    _require_open(discussion)
    if actor.pk not in participants(discussion):
        raise AnnotationError("only the two annotators can escalate")
    discussion.status = Discussion.Status.ESCALATED
    discussion.escalated_at = timezone.now()
    discussion.escalated_by = actor
    discussion.save(update_fields=["status", "escalated_at", "escalated_by"])
    return discussion


@dataclass
class Ruling:
    code_id: int
    rationale: str


@transaction.atomic
def adjudicate(
    *, discussion: Discussion, actor: AbstractBaseUser, rulings: list[Ruling], no_failure: bool = False, note: str = ""
) -> Final:
    """The senior adjudicator picks the final codes, each with a rationale."""
    if actor.pk != discussion.study.adjudicator_id:
        raise AnnotationError("only the study's adjudicator can adjudicate")
    if discussion.status != Discussion.Status.ESCALATED:
        raise AnnotationError("only escalated discussions are adjudicated")
    modes = set(
        Code.objects.filter(codebook=discussion.study.codebook, level=Code.Level.MODE).values_list("pk", flat=True)
    )
    errors = {}
    for ruling in rulings:
        if ruling.code_id not in modes:
            errors[f"code-{ruling.code_id}"] = "not a failure mode of this study's codebook"
        elif not ruling.rationale.strip():
            errors[f"rationale-{ruling.code_id}"] = "needs a rationale"
    if no_failure and rulings:
        errors["no_failure"] = "'no failure mode' excludes picking modes"
    if not rulings and not no_failure:
        errors["codes"] = "pick the final modes, or 'no failure mode'"
    if errors:
        raise AnnotationError("; ".join(f"{k}: {v}" for k, v in errors.items()), errors)
    final = Final.objects.create(
        study=discussion.study,
        run_id=discussion.run_id,
        provenance=Final.Provenance.ADJUDICATED,
        decided_by=actor,
        no_failure=no_failure,
        note=note,
    )
    FinalLabel.objects.bulk_create(
        [FinalLabel(final=final, code_id=r.code_id, rationale=r.rationale.strip()) for r in rulings]
    )
    discussion.status = Discussion.Status.ADJUDICATED
    discussion.resolved_at = timezone.now()
    discussion.save(update_fields=["status", "resolved_at"])
    return final
