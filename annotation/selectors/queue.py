"""Reads for an annotator's own work: their queue, progress, the run they code next. Blinding
lives here: these reads only ever return the user's own assignments and annotations."""

from __future__ import annotations

from datetime import datetime, time

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Max, Min, Q, QuerySet
from django.utils import timezone

from common.keyset import KeysetPage, keyset_page
from taxonomy.selectors import codebook_tree

from ..models import Annotation, Assignment, Study

QUEUE_PAGE_SIZE = 50


def my_assignments(*, user: AbstractBaseUser, study: Study | None = None) -> QuerySet[Assignment]:
    """The user's assignments in queue order (per study, by position)."""
    qs = (
        Assignment.objects.filter(annotator=user)
        .select_related("study", "run__task__benchmark", "run__agent", "annotation")
        .order_by("study__name", "study_id", "position")
    )
    if study is not None:
        qs = qs.filter(study=study)
    return qs


QUEUE_SHOWS = {
    "todo": ("To do", ~Q(annotation__status=Annotation.Status.SUBMITTED) | Q(annotation__isnull=True)),
    "submitted": ("Submitted", Q(annotation__status=Annotation.Status.SUBMITTED)),
    "skipped": ("Skipped", Q(annotation__status=Annotation.Status.DRAFT) & ~Q(annotation__skip_reason="")),
    "all": ("All", Q()),
}


def queue_page(*, user: AbstractBaseUser, study: Study, show: str, params) -> KeysetPage:
    """One page of the user's queue in a study (queue order), `show` one of QUEUE_SHOWS. Two
    queries at most, whatever the queue's length (common/keyset.py)."""
    qs = my_assignments(user=user, study=study).filter(QUEUE_SHOWS[show][1])
    return keyset_page(qs, order=("position",), params=params, size=QUEUE_PAGE_SIZE)


def next_assignment(*, user: AbstractBaseUser, study: Study | None = None) -> Assignment | None:
    """Resume where I left off: a started draft first, then the first untouched run, and the runs
    I skipped last (the one skipped longest ago first). Three small queries at most."""
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
    (queue order). Two queries: counts over the queue's index, then the two neighbours."""
    mine = Assignment.objects.filter(annotator=user, study_id=assignment.study_id)
    here = assignment.position
    midnight = timezone.make_aware(datetime.combine(timezone.localdate(), time.min))
    counts = mine.aggregate(
        place=Count("pk", filter=Q(position__lte=here)),
        total=Count("pk"),
        submitted=Count("pk", filter=Q(annotation__status=Annotation.Status.SUBMITTED)),
        today=Count("pk", filter=Q(annotation__submitted_at__gte=midnight)),
        previous=Max("position", filter=Q(position__lt=here)),
        next=Min("position", filter=Q(position__gt=here)),
    )
    neighbours = dict(
        mine.filter(position__in=[p for p in (counts["previous"], counts["next"]) if p is not None]).values_list(
            "position", "pk"
        )
    )
    return {
        "place": counts["place"],
        "total": counts["total"],
        "left": counts["total"] - counts["submitted"],
        "today": counts["today"],
        "previous_id": neighbours.get(counts["previous"]),
        "next_id": neighbours.get(counts["next"]),
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
            drafts=Count("pk", filter=Q(annotation__status=Annotation.Status.DRAFT, annotation__skip_reason="")),
            skipped=Count("pk", filter=Q(annotation__status=Annotation.Status.DRAFT) & ~Q(annotation__skip_reason="")),
        )
        .order_by("study__name", "study_id")
    )


def picker_tree(*, study: Study):
    return codebook_tree(codebook=study.codebook)


def annotation_for(*, assignment: Assignment) -> Annotation:
    """The stored annotation, or an unsaved empty draft: merely opening a run writes nothing."""
    annotation = Annotation.objects.filter(assignment=assignment).first() or Annotation(assignment=assignment)
    annotation.assignment = assignment  # already read, with its study and run: not read again
    return annotation
