"""A study's live counts, read on its pages (nothing here is a statistic: those are the analysis's,
annotation/analysis/): each annotator's progress, the modes its labels use. Every function takes a study and runs
a fixed number of queries."""

from __future__ import annotations

from django.db.models import Count, Q

from ..models import Assignment, Discussion, FinalCoding, Label, Study


def progress(*, study: Study) -> dict:
    """The live counts: each annotator's assignments, submissions and drafts, the discussions by
    state, the study's runs and final codings. Four aggregate queries."""
    per_annotator = list(
        Assignment.objects.filter(study=study)
        .values("annotator__username")
        .annotate(
            assigned=Count("pk"),
            submitted=Count("pk", filter=Q(annotation__status="submitted")),
            drafts=Count("pk", filter=Q(annotation__status="draft")),
        )
        .order_by("annotator__username")
    )
    queues = dict(Discussion.objects.filter(study=study).values_list("status").annotate(n=Count("pk")))
    return {
        "annotators": per_annotator,
        "queues": {status: queues.get(status, 0) for status in Discussion.Status.values},
        "finals": FinalCoding.objects.filter(study=study).count(),
        "runs": study.runs.count(),
    }


def mode_usage(*, study: Study) -> list[tuple[str, str, int]]:
    """The modes the study's labels use now, in codebook order: (key, name, labels). One query."""
    return list(
        Label.objects.filter(annotation__assignment__study=study)
        .values_list("code__key", "code__name")
        .annotate(n=Count("pk"))
        .order_by("code__position")
    )
