"""Reads behind a study's dashboard, its exports and the `agreement` command: plain rows for
stats.reports and stats.agreement. Every function takes a study and runs a fixed number of
queries."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Exists, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

from taxonomy.models import Codebook
from trajectories.selectors import twins

from ..models import (
    Annotation,
    Assignment,
    AuditEntry,
    Discussion,
    FinalCoding,
    FinalLabel,
    Label,
    Study,
    StudyCodebookMove,
)
from ..stats.agreement import LEVELS, Coding, Taxonomy, agreement_report, headline_bootstrap, headline_series
from ..stats.reports import (
    PROCESS_METRICS,
    FinalInstance,
    PairOutcome,
    RunMetrics,
    failure_mode_table,
    outcome_comparison,
)
from ..stats.settings import CODE_UNIVERSES


@dataclass(frozen=True)
class Period:
    """A codebook version a study pinned, and when: codings submitted in [start, end) were coded
    against it (None: open-ended)."""

    codebook: Codebook
    start: datetime | None
    end: datetime | None


def codebook_periods(*, study: Study) -> list[Period]:
    """The versions the study has pinned, oldest first (one, unless it moved). One query."""
    moves = list(StudyCodebookMove.objects.filter(study=study).select_related("from_codebook", "to_codebook"))
    if not moves:
        return [Period(study.codebook, None, None)]
    periods = [Period(moves[0].from_codebook, None, moves[0].at)]
    for move, after in zip(moves, [*moves[1:], None], strict=True):
        periods.append(Period(move.to_codebook, move.at, after.at if after else None))
    return periods


def _submits(study: Study, period: Period | None = None):
    """The study's submit entries in the order they happened, within one codebook period (default:
    the current version's): each annotation's first is its *independent* coding against it."""
    entries = AuditEntry.objects.filter(annotation__assignment__study=study, action="submit").order_by("at", "pk")
    if period is None:
        last = StudyCodebookMove.objects.filter(study=study).order_by("-at", "-pk").values_list("at", flat=True).first()
        return entries.filter(at__gte=last) if last is not None else entries
    if period.start is not None:
        entries = entries.filter(at__gte=period.start)
    if period.end is not None:
        entries = entries.filter(at__lt=period.end)
    return entries


def first_submissions(*, study: Study) -> list[AuditEntry]:
    """Each annotation's first submit entry: the *independent* coding (its `after` snapshot), as
    agreement uses it and the reproducibility bundle exports it. One query."""
    first: dict[int, AuditEntry] = {}
    entries = (
        _submits(study)
        .select_related("annotation__assignment__annotator")
        .select_related("annotation__assignment__run__task__benchmark", "annotation__assignment__run__agent")
    )
    for entry in entries:
        first.setdefault(entry.annotation_id, entry)
    return list(first.values())


def agreement_input(*, study: Study, period: Period | None = None):
    """The study's taxonomy and every *independent* coding: the label set each annotator
    submitted first (from the submit entry of the history), not later discussion revisions — of
    one codebook version (`period`; default: the version the study pins now). The taxonomy holds
    the study's code universe: every mode of the codebook, or (kappa_universe "observed") only the
    modes some independent coding used — and so, at the upper levels, only their subcategories and
    categories."""
    codes = {c.pk: c for c in (period.codebook if period else study.codebook).codes.all()}
    modes = {}
    for code in codes.values():
        if code.level == "mode":
            sub = codes[code.parent_id]
            modes[code.key] = (sub.key, codes[sub.parent_id].key)
    # first_submissions' rows, as plain values (no model instances: this reads every coding of the study)
    entries = _submits(study, period).values_list(
        "annotation_id", "annotation__assignment__run_id", "annotation__assignment__annotator__username", "after"
    )
    first: dict[int, Coding] = {}
    for annotation_id, run_id, username, after in entries:
        if annotation_id not in first:
            codes = frozenset(label["code"] for label in (after or {}).get("labels", []))
            first[annotation_id] = Coding(item=str(run_id), annotator=username, codes=codes)
    if study.kappa_universe == "observed":
        observed = {code for coding in first.values() for code in coding.codes}
        modes = {key: parents for key, parents in modes.items() if key in observed}
    return Taxonomy(modes), list(first.values())


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


def strata(*, study: Study) -> list[dict]:
    """Per agent × benchmark stratum: runs, runs with all k codings submitted, runs with final
    labels (a statistic: computed by the worker with the others)."""
    submitted = (
        Annotation.objects.filter(assignment__study=study, assignment__run=OuterRef("pk"), status="submitted")
        .order_by()
        .values("assignment__run")
        .annotate(n=Count("pk"))
        .values("n")
    )
    rows = list(
        study.runs.annotate(
            submitted=Coalesce(Subquery(submitted), 0),
            is_final=Exists(FinalCoding.objects.filter(study=study, run=OuterRef("pk"))),
        )
        .values("agent__name", "task__benchmark__name")
        .annotate(
            runs=Count("pk"),
            coded_by_all=Count("pk", filter=Q(submitted__gte=study.coders_per_run)),
            final=Count("pk", filter=Q(is_final=True)),
        )
        .order_by("agent__name", "task__benchmark__name")
    )
    for row in rows:
        row["agent"], row["benchmark"] = row.pop("agent__name"), row.pop("task__benchmark__name")
    return rows


def agreement(*, study: Study, resamples: int = 1000, inputs=None) -> dict:
    """The agreement report with the headline's bootstrap CI (`inputs`: agreement_input's result,
    when the caller has it)."""
    taxonomy, codings = inputs or agreement_input(study=study)
    report = agreement_report(taxonomy, codings)
    report["headline"] = headline_bootstrap(taxonomy, codings, n_resamples=resamples, seed=study.seed)
    report["names"] = dict(study.codebook.codes.values_list("key", "name"))
    report["code_universe"] = {
        "kind": study.kappa_universe,
        "label": CODE_UNIVERSES[study.kappa_universe],
        "codes": {level: len(taxonomy.universe(level)) for level in LEVELS},
    }
    return report


def mode_usage(*, study: Study) -> list[tuple[str, str, int]]:
    """The modes the study's labels use now, in codebook order: (key, name, labels). One query."""
    return list(
        Label.objects.filter(annotation__assignment__study=study)
        .values_list("code__key", "code__name")
        .annotate(n=Count("pk"))
        .order_by("code__position")
    )


def agreement_by_version(*, study: Study, resamples: int = 1000) -> list[dict]:
    """The headline κ (mode level, mean pairwise pooled, with its bootstrap CI) of each codebook
    version the study has pinned, over the codings submitted against it."""
    rows = []
    for period in codebook_periods(study=study):
        taxonomy, codings = agreement_input(study=study, period=period)
        headline = headline_bootstrap(taxonomy, codings, n_resamples=resamples, seed=study.seed)
        per_item = Counter(c.item for c in codings)
        rows.append(
            {
                "codebook_id": period.codebook.pk,
                "codebook": period.codebook.name,
                "version": period.codebook.version,
                "current": period.end is None,
                "from": period.start,
                "to": period.end,
                "codings": len(codings),
                "runs_compared": sum(1 for n in per_item.values() if n >= 2),
                "kappa": headline["kappa"],
                "ci_low": headline["ci_low"],
                "ci_high": headline["ci_high"],
            }
        )
    return rows


def kappa_over_time(*, study: Study, points: int = 10, inputs=None) -> list[dict]:
    """Headline κ over the runs completed so far (all k first submissions in), at even steps."""
    taxonomy, codings = inputs or agreement_input(study=study)
    done_at: dict[str, list] = defaultdict(list)
    for entry in _submits(study).values("annotation__assignment__run_id", "at"):
        done_at[str(entry["annotation__assignment__run_id"])].append(entry["at"])
    k = study.coders_per_run
    completed = sorted((times[k - 1], item) for item, times in done_at.items() if len(times) >= k)
    if not completed:
        return []
    steps = sorted({max(1, round(len(completed) * k / points)) for k in range(1, points + 1)})
    values = headline_series(taxonomy, codings, item_order=[item for _, item in completed], checkpoints=steps)
    return [{"runs": n, "at": completed[n - 1][0], "kappa": value} for n, value in zip(steps, values, strict=True)]


def final_instances(*, study: Study) -> list[FinalInstance]:
    """Every final label of the study as a Table 3 instance (plain values: one row per label)."""
    codes = {c.pk: c for c in study.codebook.codes.all()}
    rows = FinalLabel.objects.filter(final__study=study).values_list(
        "final__run_id", "final__run__agent__name", "code_id"
    )
    out = []
    for run_id, agent, code_id in rows:
        mode = codes[code_id]
        sub = codes[mode.parent_id]
        cat = codes[sub.parent_id]
        out.append(FinalInstance(run_id=run_id, agent=agent, mode=(mode.key, mode.name),
                                 subcategory=(sub.key, sub.name), category=(cat.key, cat.name)))  # fmt: skip
    return out


def study_failure_modes(*, study: Study) -> dict:
    """The study's Table 3: failure-mode instances per category, subcategory and mode."""
    agents = sorted(set(study.runs.values_list("agent__name", flat=True)))
    return failure_mode_table(final_instances(study=study), agents=agents, runs_total=study.runs.count())


def pair_outcomes(*, study: Study, run_ids: list[int] | None = None) -> list[PairOutcome]:
    """The study's concurrent runs (or those of `run_ids`) with their sequential twins' outcomes."""
    runs = study.runs.all() if run_ids is None else study.runs.filter(pk__in=run_ids)
    outcomes = ("pk", "task_id", "agent_id", "task_pass", "test_pass", "duration_s", "tokens")
    concurrent = runs.select_related("agent", "task__benchmark").only(
        *outcomes, "agent__name", "task__external_id", "task__benchmark__name"
    )
    twin_of = {(r.task_id, r.agent_id): r for r in twins(runs=runs).only(*outcomes)}
    out = []
    for run in concurrent:
        twin = twin_of.get((run.task_id, run.agent_id))
        if twin is None:
            continue
        out.append(
            PairOutcome(
                agent=run.agent.name,
                benchmark=run.task.benchmark.name,
                task=run.task.external_id,
                concurrent_pass=run.task_pass,
                sequential_pass=twin.task_pass,
                concurrent_test_pass=run.test_pass,
                sequential_test_pass=twin.test_pass,
                concurrent_duration=run.duration_s,
                sequential_duration=twin.duration_s,
                concurrent_tokens=run.tokens,
                sequential_tokens=twin.tokens,
                concurrent_run_id=run.pk,
                sequential_run_id=twin.pk,
            )
        )
    return out


def study_outcomes(*, study: Study) -> dict:
    """The study's RQ1: concurrent against sequential outcomes, per agent and benchmark."""
    return outcome_comparison(pair_outcomes(study=study))


def pair_metrics(*, study: Study) -> list[RunMetrics]:
    """RQ2's input: the process metrics of the study's concurrent runs that have a sequential twin,
    and of those twins (plain values: two queries)."""
    fields = (
        "task_id",
        "agent_id",
        "mode",
        "agent__name",
        "task__benchmark__name",
        "task__difficulty",
        "task__external_id",
        *PROCESS_METRICS,
    )
    runs = study.runs.all()
    concurrent = list(runs.values(*fields))
    twin_of = {(row["task_id"], row["agent_id"]): row for row in twins(runs=runs).values(*fields)}
    out = []
    for row in concurrent:
        twin = twin_of.get((row["task_id"], row["agent_id"]))
        if twin is None:
            continue
        for side, values in (("concurrent", row), ("sequential", twin)):
            out.append(
                RunMetrics(
                    agent=row["agent__name"],
                    benchmark=row["task__benchmark__name"],
                    difficulty=row["task__difficulty"],
                    mode=side,
                    values={name: values[name] for name in PROCESS_METRICS},
                    task=row["task__external_id"],
                )
            )
    return out
