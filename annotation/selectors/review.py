"""Reads for reviewing a run's two codings: who takes part in its discussion, both codings side by
side and what changed in each since its first submission, the modes the adjudicator rules on, the
final coding once there is one, an annotator's discussions and the adjudicator's queue."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Exists, OuterRef, Q, Value
from django.db.models.functions import Coalesce

from accounts.roles import is_admin
from common.keyset import KeysetPage, keyset_page
from taxonomy.models import Code

from ..access import blind_to_pair, not_blind
from ..coding_changes import coding_diff
from ..models import Annotation, Assignment, AuditEntry, Discussion, FinalCoding, Study
from .suggestions import uncertainty_subquery

LIST_PAGE_SIZE = 50


def run_annotations(*, study: Study, run_id: int) -> list[Annotation]:
    """Every coding of a run (slot order: k of them), with their annotators."""
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
    """The discussion, if this user may see it — and is not blind to its run (access.blind_to_pair: they still
    code it, or its twin, in some study); None otherwise (callers answer 404)."""
    discussion = (
        Discussion.objects.select_related("study__codebook", "run__task__benchmark", "run__agent", "escalated_by")
        .filter(pk=discussion_id)
        .first()
    )
    if discussion is None or not can_view(discussion, user) or blind_to_pair(user, discussion.run):
        return None
    return discussion


def codings_compare(*, discussion) -> dict:
    """The codings of a discussed run, side by side: one row per mode any coder picked, each cell the
    episodes (instances) that annotator recorded of it; a row differs when not every coder picked the
    mode or they counted its episodes differently (`counts_differ`)."""
    annotations = run_annotations(study=discussion.study, run_id=discussion.run_id)
    codes = {}
    for annotation in annotations:
        annotation.label_map = {}
        annotation.current = list(annotation.labels.select_related("code__parent__parent", "nearest_rejected"))
        for label in annotation.current:
            annotation.label_map.setdefault(label.code_id, []).append(label)
            codes[label.code_id] = label.code
    rows = []
    for code_id, code in sorted(codes.items(), key=lambda item: item[1].position):
        cells = [a.label_map.get(code_id, []) for a in annotations]
        counts_differ = all(cells) and len({len(c) for c in cells}) > 1  # all picked it, not as often
        rows.append({"code": code, "cells": cells, "differs": any(not c for c in cells) or counts_differ,
                     "counts_differ": counts_differ})  # fmt: skip
    return {
        "annotations": annotations,
        "rows": rows,
        "same": all(not r["differs"] for r in rows),
        "run_id": discussion.run_id,  # anchors are followed from this run's pair
    }


def coding_changes(*, discussion: Discussion, compare: dict) -> list[dict]:
    """For each coding of `compare` (codings_compare), what changed since its first submission (the
    `after` of its first "submit" entry, as agreement takes the independent coding) to now:
    {"annotation", "first_at", "diff"} (stats.changes.coding_diff; None without a submit entry). Two
    queries."""
    annotations = compare["annotations"]
    first: dict[int, AuditEntry] = {}
    for entry in AuditEntry.objects.filter(annotation__in=annotations, action="submit").order_by("at", "pk"):
        first.setdefault(entry.annotation_id, entry)
    now = {
        a.pk: {"no_failure": a.no_failure, "notes": a.notes,
               "labels": [{"code": label.code.key, **label.content()} for label in a.current]}
        for a in annotations
    }  # fmt: skip
    keys = {
        key
        for snap in [*(e.after or {} for e in first.values()), *now.values()]
        for label in snap.get("labels", [])
        for key in (label.get("code"), label.get("nearest_rejected"))
        if key
    }
    names = dict(Code.objects.filter(codebook_id=discussion.study.codebook_id, key__in=keys).values_list("key", "name"))
    return [
        {
            "annotation": a,
            "first_at": first[a.pk].at if a.pk in first else None,
            "diff": coding_diff(first[a.pk].after, now[a.pk], names) if a.pk in first else None,
        }
        for a in annotations
    ]


def ruling_modes(*, discussion: Discussion, compare: dict) -> dict[str, list[dict]]:
    """The codebook's modes for the adjudicator's ruling, in codebook order: `proposed` — the modes
    either coding has now, each with who proposed it and the episodes they recorded, the counts they
    gave (`counts`) and the count the ruling starts from (`episodes`: theirs if they agree, else None) —
    and `others`, the rest (one episode to start from). One query."""
    modes = discussion.study.codebook.codes.filter(level=Code.Level.MODE).select_related("parent__parent")
    proposals = {
        row["code"].pk: [
            {"who": a.assignment.annotator.get_username(), "episodes": episodes}
            for a, episodes in zip(compare["annotations"], row["cells"], strict=True)
            if episodes
        ]
        for row in compare["rows"]
    }
    rows = []
    for code in modes.order_by("position"):
        counts = sorted({len(p["episodes"]) for p in proposals.get(code.pk, [])})
        # the episodes the ruling starts from: the count every proposer gave; none when they differ
        rows.append({"code": code, "proposals": proposals.get(code.pk, []), "counts": counts,
                     "episodes": counts[0] if len(counts) == 1 else (1 if not counts else None)})  # fmt: skip
    return {"proposed": [r for r in rows if r["proposals"]], "others": [r for r in rows if not r["proposals"]]}


def final_for(*, discussion: Discussion) -> FinalCoding | None:
    """The run's final coding once its discussion is finished (consensus or adjudicated), with its
    labels (`final.label_list`); None before. Two queries, none for an unfinished discussion."""
    if discussion.status not in (Discussion.Status.CONSENSUS, Discussion.Status.ADJUDICATED):
        return None
    final = (
        FinalCoding.objects.filter(study_id=discussion.study_id, run_id=discussion.run_id)
        .select_related("decided_by")
        .first()
    )
    if final is not None:
        final.label_list = list(final.labels.select_related("code__parent__parent", "nearest_rejected", "decided_by"))
    return final


def my_discussions(*, user: AbstractBaseUser):
    """The discussions of runs the user coded *in that discussion's study*, but none of a run the user still has
    to code — or its twin — in another study (access.not_blind). (A correlated EXISTS: joining the assignments
    instead repeats each discussion once per run the user has in its study.)"""
    mine = Assignment.objects.filter(annotator=user, study=OuterRef("study"), run=OuterRef("run"))
    return (
        not_blind(user, Discussion.objects.filter(Exists(mine)))
        .select_related("study", "run__task__benchmark", "run__agent")
        .order_by("agreement", "pk")
    )


DISCUSSION_TABS = {
    "open": ("Open", Q(status=Discussion.Status.OPEN)),
    "escalated": ("With the adjudicator", Q(status=Discussion.Status.ESCALATED)),
    "resolved": ("Resolved", Q(status__in=(Discussion.Status.CONSENSUS, Discussion.Status.ADJUDICATED))),
}


def my_discussion_counts(*, user: AbstractBaseUser) -> dict[str, int]:
    """How many of the user's discussions each tab holds. One query."""
    return my_discussions(user=user).aggregate(
        **{key: Count("pk", filter=condition) for key, (_, condition) in DISCUSSION_TABS.items()}
    )


def my_discussion_page(*, user: AbstractBaseUser, tab: str, params) -> KeysetPage:
    """One page of the user's discussions in a tab, lowest agreement first."""
    qs = my_discussions(user=user).filter(DISCUSSION_TABS[tab][1])
    return keyset_page(qs, order=("agreement", "pk"), params=params, size=LIST_PAGE_SIZE)


def _escalated_to(user: AbstractBaseUser):
    """What waits for this adjudicator, but no run they still code (or its twin) somewhere (access.not_blind)."""
    return not_blind(user, Discussion.objects.filter(study__adjudicator=user, status=Discussion.Status.ESCALATED))


def adjudication_queue(*, user: AbstractBaseUser, filters: dict[str, str] | None = None):
    filters = filters or {}
    qs = (
        _escalated_to(user)
        .select_related("study", "run__task__benchmark", "run__agent", "escalated_by")
        .order_by("agreement", "pk")
    )
    if filters.get("agent"):
        qs = qs.filter(run__agent__name=filters["agent"])
    if filters.get("benchmark"):
        qs = qs.filter(run__task__benchmark__name=filters["benchmark"])
    if filters.get("study"):
        qs = qs.filter(study__name=filters["study"])
    return qs


ADJUDICATION_ORDERS = {
    "agreement": "lowest agreement first",
    "uncertainty": "most uncertain first",  # to the study's suggestions model (docs/suggestions.md)
}


def adjudication_page(
    *, user: AbstractBaseUser, filters: dict[str, str], params, order: str = "agreement"
) -> KeysetPage:
    """One page of the adjudicator's queue (filtered), in one of ADJUDICATION_ORDERS, and how many
    wait. By uncertainty, a run without a prediction (its study has no model yet) comes last."""
    qs = adjudication_queue(user=user, filters=filters)
    keys, boundary = ("agreement", "pk"), None
    if order == "uncertainty":
        uncertainty = Coalesce(uncertainty_subquery(), Value(-1.0))
        qs = qs.annotate(uncertainty=uncertainty)
        keys, boundary = ("-uncertainty", "agreement", "pk"), Discussion.objects.annotate(uncertainty=uncertainty)
    page = keyset_page(qs, order=keys, params=params, size=LIST_PAGE_SIZE, boundary=boundary)
    page.extra["total"] = qs.count()
    return page


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
