"""Reads for designing and managing a study on the web: who can take part, which runs a filter
picks, and how even the study's assignment is."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Q, QuerySet

from accounts.roles import ADJUDICATOR, ADMIN, ANNOTATOR
from trajectories.models import AgentSystem, Benchmark, Run, Task
from trajectories.selectors import paired_concurrent_runs

from ..assignment import balance_of_counts
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


def group_counts(study: Study) -> dict[tuple[tuple, tuple[int, ...]], int]:
    """(stratum: agent × benchmark × difficulty, coder group) → runs, for the study's runs, counted by the
    database: a row per stratum and group comes back, however many runs and assignments the study has. A run's
    group is its coders in slots 1..k; a run nobody codes yet counts under the empty group."""
    k = study.coders_per_run
    slots = ", ".join(f"MAX(CASE WHEN slot = {slot} THEN annotator_id END) AS s{slot}" for slot in range(1, k + 1))
    names = ", ".join(f"g.s{slot}" for slot in range(1, k + 1))
    tables = {
        "through": Study.runs.through._meta.db_table,
        "assignment": Assignment._meta.db_table,
        "run": Run._meta.db_table,
        "task": Task._meta.db_table,
        "agent": AgentSystem._meta.db_table,
        "benchmark": Benchmark._meta.db_table,
    }
    sql = f"""
        SELECT agent.name, benchmark.name, task.difficulty, {names}, COUNT(*)
        FROM {tables["through"]} AS sr
        JOIN {tables["run"]} AS run ON run.id = sr.run_id
        JOIN {tables["task"]} AS task ON task.id = run.task_id
        JOIN {tables["agent"]} AS agent ON agent.id = run.agent_id
        JOIN {tables["benchmark"]} AS benchmark ON benchmark.id = task.benchmark_id
        LEFT JOIN (
            SELECT run_id, {slots} FROM {tables["assignment"]} WHERE study_id = %s GROUP BY run_id
        ) AS g ON g.run_id = sr.run_id
        WHERE sr.study_id = %s
        GROUP BY agent.name, benchmark.name, task.difficulty, {names}
    """  # noqa: S608 (table names from the models; the study's id is a parameter)
    counts: dict = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, [study.pk, study.pk])
        for agent, benchmark, difficulty, *row in cursor.fetchall():
            group = tuple(sorted(a for a in row[:k] if a is not None))
            key = ((agent, benchmark, difficulty), group)
            counts[key] = counts.get(key, 0) + row[k]
    return counts


def study_balance(*, study: Study) -> dict:
    """How even the study's assignment is (assignment.py balance) over its current annotators, with
    usernames for the counts; its cost does not grow with the study (`group_counts`)."""
    counts = group_counts(study)
    current = dict(study.annotators.values_list("pk", "username"))
    report = balance_of_counts({key: n for key, n in counts.items() if key[1]}, annotators=list(current))
    coders = {a for (_, group) in counts for a in group}
    names = dict(User.objects.filter(pk__in=coders - set(current)).values_list("pk", "username"))
    names.update(current)
    report["names"] = names
    report["unassigned"] = sum(n for (_, group), n in counts.items() if not group)
    return report
