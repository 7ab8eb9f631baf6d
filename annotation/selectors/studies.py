"""Reads for designing and managing a study on the web: who can take part, which runs a filter
picks, and how even the study's assignment is."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet

from accounts.roles import ADJUDICATOR, ADMIN, ANNOTATOR
from trajectories.models import Run
from trajectories.selectors import paired_concurrent_runs

from ..assignment import balance
from ..models import Assignment, Study

User = get_user_model()
RUN_FILTERS = ("agent", "benchmark", "difficulty")  # form field → what it filters on
_LOOKUPS = {"agent": "agent__name__in", "benchmark": "task__benchmark__name__in", "difficulty": "task__difficulty__in"}


def annotator_choices() -> QuerySet:
    """Active users with the annotator role, by username."""
    return User.objects.filter(is_active=True, groups__name=ANNOTATOR).distinct().order_by("username")


def newcomer_choices(*, study: Study) -> QuerySet:
    """Annotators who could join the study: not in it, not its adjudicator."""
    return annotator_choices().exclude(annotator_studies=study).exclude(pk=study.adjudicator_id)


def adjudicator_choices() -> QuerySet:
    """Active users who may lead a study: the adjudicator (senior author) role or admins."""
    return (
        User.objects.filter(Q(groups__name__in=(ADJUDICATOR, ADMIN)) | Q(is_superuser=True), is_active=True)
        .distinct()
        .order_by("username")
    )


def run_filter_choices() -> dict[str, list[str]]:
    """The agents, benchmarks and difficulties of the runs a study can code (paired concurrent runs)."""
    runs = paired_concurrent_runs().order_by()
    return {
        "agent": sorted(set(runs.values_list("agent__name", flat=True))),
        "benchmark": sorted(set(runs.values_list("task__benchmark__name", flat=True))),
        "difficulty": sorted(set(runs.values_list("task__difficulty", flat=True))),
    }


def matching_runs(filters: dict[str, list[str]], *, not_in: Study | None = None) -> QuerySet[Run]:
    """Paired concurrent runs matching every non-empty filter (agent, benchmark, difficulty: any of
    the values given), optionally leaving out a study's runs."""
    runs = paired_concurrent_runs()
    for name, values in filters.items():
        if values:
            runs = runs.filter(**{_LOOKUPS[name]: values})
    if not_in is not None:
        runs = runs.exclude(studies=not_in)
    return runs


def coders_by_run(study: Study, *, exclude_runs: set[int] = frozenset()) -> dict[int, tuple[tuple, list[int]]]:
    """run id → (stratum: agent × benchmark × difficulty, its coders) for the study's assignments."""
    on_run: dict[int, tuple[tuple, list[int]]] = {}
    rows = Assignment.objects.filter(study=study).values_list(
        "run_id", "annotator_id", "run__agent__name", "run__task__benchmark__name", "run__task__difficulty"
    )
    for run_id, annotator, *stratum in rows:
        if run_id not in exclude_runs:
            on_run.setdefault(run_id, (tuple(stratum), []))[1].append(annotator)
    return on_run


def study_balance(*, study: Study) -> dict:
    """How even the study's assignment is (assignment.py balance) over its current
    annotators, with usernames for the counts."""
    on_run = coders_by_run(study)
    current = dict(study.annotators.values_list("pk", "username"))
    report = balance(
        {run_id: coders for run_id, (_, coders) in on_run.items()},
        {run_id: stratum for run_id, (stratum, _) in on_run.items()},
        annotators=list(current),
    )
    names = dict(User.objects.filter(pk__in={a for _, c in on_run.values() for a in c}).values_list("pk", "username"))
    names.update(current)
    report["names"] = names
    report["unassigned"] = study.runs.exclude(assignments__study=study).count()
    return report
