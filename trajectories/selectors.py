"""Reads for views, API and exports; every list is a fixed number of queries."""

from __future__ import annotations

from django.db.models import Exists, OuterRef, Q, QuerySet

from .models import AgentContext, AgentSystem, Benchmark, Event, Run, Task

RUN_FILTERS = ("benchmark", "agent", "mode", "difficulty", "paired")


# -- the pair: a run and its twin (same task and agent, the other mode) --------------------


def _twin_of_outer() -> QuerySet[Run]:
    """The twin of the run in the enclosing query (for Exists/Subquery)."""
    return Run.objects.filter(task=OuterRef("task"), agent=OuterRef("agent")).exclude(mode=OuterRef("mode"))


def run_twin(*, run: Run) -> Run | None:
    return (
        Run.objects.select_related("task__benchmark", "agent")
        .filter(task_id=run.task_id, agent_id=run.agent_id, mode=run.twin_mode)
        .first()
    )


def twins(*, runs: QuerySet[Run]) -> QuerySet[Run]:
    """The twins of `runs` (one query, however many runs: a study's, say)."""
    return Run.objects.filter(
        Exists(runs.filter(task=OuterRef("task"), agent=OuterRef("agent")).exclude(mode=OuterRef("mode")))
    )


def paired_concurrent_runs() -> QuerySet[Run]:
    """Every concurrent run that has its sequential twin: what a study codes by default."""
    return Run.objects.filter(Exists(_twin_of_outer()), mode=Run.Mode.CONCURRENT).order_by("pk")


def pair_sides(run: Run) -> dict:
    """The concurrent run on the left, its sequential twin on the right (either may be missing):
    what the pair, annotate, adjudicate and pilot pages show."""
    twin = run_twin(run=run)
    concurrent, sequential = (run, twin) if run.mode == Run.Mode.CONCURRENT else (twin, run)
    return {
        "run": run,
        "twin": twin,
        "left": None if concurrent is None else {"run": concurrent},
        "right": None if sequential is None else {"run": sequential},
        "pair_rows": [
            {"mode": Run.Mode.CONCURRENT, "run": concurrent},
            {"mode": Run.Mode.SEQUENTIAL, "run": sequential},
        ],
    }


# -- lists and pages -------------------------------------------------------------------------


def run_list(*, filters: dict[str, str] | None = None) -> QuerySet[Run]:
    """Runs with task/agent joined and an `is_paired` flag (twin of the other mode exists)."""
    filters = filters or {}
    qs = Run.objects.select_related("task__benchmark", "agent").annotate(is_paired=Exists(_twin_of_outer()))
    if filters.get("benchmark"):
        qs = qs.filter(task__benchmark__name=filters["benchmark"])
    if filters.get("agent"):
        qs = qs.filter(agent__name=filters["agent"])
    if filters.get("mode"):
        qs = qs.filter(mode=filters["mode"])
    if filters.get("difficulty"):
        qs = qs.filter(task__difficulty=filters["difficulty"])
    if filters.get("paired") == "yes":
        qs = qs.filter(is_paired=True)
    elif filters.get("paired") == "no":
        qs = qs.filter(is_paired=False)
    if filters.get("q"):
        qs = qs.filter(Q(task__external_id__icontains=filters["q"]) | Q(source_name__icontains=filters["q"]))
    return qs.order_by("task__benchmark__name", "task__external_id", "agent__name", "mode")


def run_contexts(*, run: Run, offset: int = 0, limit: int = 100) -> list[AgentContext]:
    """One page of a run's agents in order of appearance, plus one to tell whether more follow."""
    return list(AgentContext.objects.filter(run=run).order_by("position")[offset : offset + limit + 1])


def run_lanes(*, run: Run) -> list[AgentContext]:
    """Every agent of a run, with only what the timeline draws."""
    return list(
        AgentContext.objects.filter(run=run)
        .order_by("position")
        .only("pk", "label", "external_id", "role", "depth", "status", "started_at", "ended_at")
    )


def context_events(
    *, context: AgentContext, offset: int = 0, limit: int = 100, kinds: list[str] | None = None
) -> list[Event]:
    qs = Event.objects.filter(context=context).order_by("seq")
    if kinds:
        qs = qs.filter(kind__in=kinds)
    return list(qs[offset : offset + limit + 1])  # one extra tells whether there is a next page


def filter_choices() -> dict[str, list[str]]:
    return {
        "benchmarks": list(Benchmark.objects.values_list("name", flat=True)),
        "agents": list(AgentSystem.objects.values_list("name", flat=True)),
        "difficulties": sorted(d for d in Task.objects.values_list("difficulty", flat=True).distinct() if d),
    }
