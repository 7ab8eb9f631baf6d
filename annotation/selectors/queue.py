"""Reads for an annotator's own work: their queue, progress, the run they code next. Blinding
lives here: these reads only ever return the user's own assignments and annotations."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from taxonomy.selectors import codebook_tree

from ..models import Annotation, Assignment, Study


def my_assignments(*, user: AbstractBaseUser, study: Study | None = None) -> QuerySet[Assignment]:
    qs = (
        Assignment.objects.filter(annotator=user)
        .select_related("study", "run__task__benchmark", "run__agent", "annotation")
        .order_by("study__name", "run__task__benchmark__name", "run__task__external_id", "run__agent__name")
    )
    if study is not None:
        qs = qs.filter(study=study)
    return qs


def next_assignment(*, user: AbstractBaseUser, study: Study | None = None) -> Assignment | None:
    """Resume where I left off: a started draft first, then the first untouched run, and the runs
    I skipped last (the one skipped longest ago first)."""
    mine = my_assignments(user=user, study=study)
    drafts = mine.filter(annotation__status=Annotation.Status.DRAFT)
    started = drafts.filter(annotation__skip_reason="").order_by("-annotation__updated_at").first()
    return (
        started
        or mine.filter(annotation__isnull=True).first()
        or drafts.exclude(annotation__skip_reason="").order_by("annotation__updated_at").first()
    )


def queue_position(*, user: AbstractBaseUser, assignment: Assignment) -> dict:
    """Where this run sits in the annotator's queue of its study: its place, the queue's size, how
    many are still to submit, how many were submitted today, and the runs before and after it
    (queue order). One query, whatever the queue's size."""
    rows = list(
        my_assignments(user=user, study=assignment.study).values_list(
            "pk", "annotation__status", "annotation__submitted_at"
        )
    )
    ids = [pk for pk, _, _ in rows]
    index = ids.index(assignment.pk)
    today = timezone.localdate()
    return {
        "place": index + 1,
        "total": len(ids),
        "left": sum(status != Annotation.Status.SUBMITTED for _, status, _ in rows),
        "today": sum(at is not None and timezone.localdate(at) == today for _, _, at in rows),
        "previous_id": ids[index - 1] if index > 0 else None,
        "next_id": ids[index + 1] if index + 1 < len(ids) else None,
    }


def own_assignment(*, user: AbstractBaseUser, assignment_id: int) -> Assignment | None:
    """The assignment, if it is this user's; None otherwise (callers answer 404, never 403,
    so that ids of other people's work are not confirmed)."""
    return (
        Assignment.objects.select_related("study__codebook", "run__task__benchmark", "run__agent")
        .filter(pk=assignment_id, annotator=user)
        .first()
    )


def queue_progress(*, user: AbstractBaseUser) -> list[dict]:
    return list(
        Assignment.objects.filter(annotator=user)
        .values("study_id", "study__name")
        .annotate(
            assigned=Count("pk"),
            submitted=Count("pk", filter=Q(annotation__status=Annotation.Status.SUBMITTED)),
            drafts=Count("pk", filter=Q(annotation__status=Annotation.Status.DRAFT)),
        )
        .order_by("study__name")
    )


def picker_tree(*, study: Study):
    return codebook_tree(codebook=study.codebook)


def annotation_for(*, assignment: Assignment) -> Annotation:
    """The stored annotation, or an unsaved empty draft: merely opening a run writes nothing."""
    return Annotation.objects.filter(assignment=assignment).first() or Annotation(assignment=assignment)
