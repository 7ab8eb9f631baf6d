"""Reads for reviewing a run's two codings: who takes part in its discussion, both codings side by
side, an annotator's discussions and the adjudicator's queue."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Exists, OuterRef

from accounts.roles import is_admin

from ..models import Annotation, Assignment, Discussion, Study


def run_annotations(*, study: Study, run_id: int) -> list[Annotation]:
    """Both codings of a run (slot order), with their annotators."""
    return list(
        Annotation.objects.filter(assignment__study=study, assignment__run_id=run_id)
        .select_related("assignment__annotator")
        .order_by("assignment__slot")
    )


def participants(discussion: Discussion) -> set[int]:
    """The annotators who coded the discussed run."""
    return set(discussion.study.assignments.filter(run_id=discussion.run_id).values_list("annotator_id", flat=True))


def can_view(discussion: Discussion, user: AbstractBaseUser) -> bool:
    return user.pk in participants(discussion) or user.pk == discussion.study.adjudicator_id or is_admin(user)


def discussion_for(*, user: AbstractBaseUser, discussion_id: int) -> Discussion | None:
    """The discussion, if this user may see it; None otherwise (callers answer 404)."""
    discussion = (
        Discussion.objects.select_related("study__codebook", "run__task__benchmark", "run__agent")
        .filter(pk=discussion_id)
        .first()
    )
    return discussion if discussion is not None and can_view(discussion, user) else None


def codings_compare(*, discussion) -> dict:
    """Both codings of a discussed run, side by side: one row per mode either picked, each cell the
    episodes (instances) that annotator recorded of it."""
    annotations = run_annotations(study=discussion.study, run_id=discussion.run_id)
    codes = {}
    for annotation in annotations:
        annotation.label_map = {}
        for label in annotation.labels.select_related("code__parent__parent", "nearest_rejected"):
            annotation.label_map.setdefault(label.code_id, []).append(label)
            codes[label.code_id] = label.code
    rows = []
    for code_id, code in sorted(codes.items(), key=lambda item: item[1].position):
        cells = [a.label_map.get(code_id, []) for a in annotations]
        rows.append({"code": code, "cells": cells, "differs": any(not c for c in cells)})
    return {
        "annotations": annotations,
        "rows": rows,
        "same": all(not r["differs"] for r in rows),
        "run_id": discussion.run_id,  # anchors are followed from this run's pair
    }


def my_discussions(*, user: AbstractBaseUser):
    """The discussions of runs the user coded *in that discussion's study*: a run the user still has
    to code in another study stays blind."""
    mine = Assignment.objects.filter(annotator=user, study=OuterRef("study"), run=OuterRef("run"))
    return (
        Discussion.objects.filter(Exists(mine))
        .select_related("study", "run__task__benchmark", "run__agent")
        .order_by("status", "agreement")
    )


def _escalated_to(user: AbstractBaseUser):
    return Discussion.objects.filter(study__adjudicator=user, status=Discussion.Status.ESCALATED)


def adjudication_queue(*, user: AbstractBaseUser, filters: dict[str, str] | None = None):
    filters = filters or {}
    qs = (
        _escalated_to(user)
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


def adjudication_filter_choices(*, user: AbstractBaseUser) -> dict[str, list[str]]:
    """The queue's dropdowns: the agents, benchmarks and studies of what waits for this adjudicator,
    each once (one query; `order_by()` keeps Discussion's ordering out of the DISTINCT)."""
    rows = (
        _escalated_to(user)
        .order_by()
        .values_list("run__agent__name", "run__task__benchmark__name", "study__name")
        .distinct()
    )
    agents, benchmarks, studies = set(), set(), set()
    for agent, benchmark, study in rows:
        agents.add(agent)
        benchmarks.add(benchmark)
        studies.add(study)
    return {"agents": sorted(agents), "benchmarks": sorted(benchmarks), "studies": sorted(studies)}
