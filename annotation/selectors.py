"""Reads for the annotation pages and API. Blinding lives here: an annotator's reads only
ever return their own assignments and annotations."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Q, QuerySet

from taxonomy.selectors import codebook_tree

from .agreement import Coding, Taxonomy
from .models import Annotation, Assignment, AuditEntry, Discussion, Study
from .reconcile import run_annotations


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
    """Resume where I left off: a started draft first, then the first untouched run."""
    mine = my_assignments(user=user, study=study)
    started = mine.filter(annotation__status=Annotation.Status.DRAFT).order_by("-annotation__updated_at").first()
    return started or mine.filter(annotation__isnull=True).first()


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


def agreement_input(*, study: Study):
    """The study's taxonomy and every *independent* coding: the label set each annotator
    submitted first (from the submit entry of the history), not later discussion revisions."""
    codes = {c.pk: c for c in study.codebook.codes.all()}
    modes = {}
    for code in codes.values():
        if code.level == "mode":
            sub = codes[code.parent_id]
            modes[code.key] = (sub.key, codes[sub.parent_id].key)
    first_submit = {}
    entries = (
        AuditEntry.objects.filter(annotation__assignment__study=study, action="submit")
        .select_related("annotation__assignment__annotator")
        .order_by("at", "pk")
    )
    for entry in entries:
        first_submit.setdefault(entry.annotation_id, entry)
    codings = [
        Coding(
            item=str(e.annotation.assignment.run_id),
            annotator=e.annotation.assignment.annotator.username,
            codes=frozenset(label["code"] for label in (e.after or {}).get("labels", [])),
        )
        for e in first_submit.values()
    ]
    return Taxonomy(modes), codings


def codings_compare(*, discussion) -> dict:
    """Both codings of a discussed run, side by side: one row per mode either picked."""
    annotations = run_annotations(study=discussion.study, run_id=discussion.run_id)
    for annotation in annotations:
        annotation.label_map = {
            label.code_id: label
            for label in annotation.labels.select_related("code__parent__parent", "nearest_rejected")
        }
    codes = {}
    for annotation in annotations:
        for label in annotation.label_map.values():
            codes[label.code_id] = label.code
    rows = []
    for code_id, code in sorted(codes.items(), key=lambda item: item[1].position):
        cells = [a.label_map.get(code_id) for a in annotations]
        rows.append({"code": code, "cells": cells, "differs": any(c is None for c in cells)})
    return {"annotations": annotations, "rows": rows, "same": all(not r["differs"] for r in rows)}


def my_discussions(*, user: AbstractBaseUser):
    runs = Assignment.objects.filter(annotator=user).values("run_id")
    return (
        Discussion.objects.filter(run_id__in=runs, study__assignments__annotator=user)
        .distinct()
        .select_related("study", "run__task__benchmark", "run__agent")
        .order_by("status", "agreement")
    )


def adjudication_queue(*, user: AbstractBaseUser, filters: dict[str, str] | None = None):
    filters = filters or {}
    qs = (
        Discussion.objects.filter(study__adjudicator=user, status=Discussion.Status.ESCALATED)
        .select_related("study", "run__task__benchmark", "run__agent", "escalated_by")
        .order_by("agreement", "escalated_at")
    )
    if filters.get("agent"):
        qs = qs.filter(run__agent__name=filters["agent"])
    if filters.get("benchmark"):
        qs = qs.filter(run__task__benchmark__name=filters["benchmark"])
    if filters.get("study"):
        qs = qs.filter(study__name=filters["study"])
    return qs
