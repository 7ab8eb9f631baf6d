"""Writes for a study's design: creating it, assigning its runs, changing its annotators."""

from __future__ import annotations

from collections import Counter, defaultdict

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Max

from activity.services import record
from taxonomy.models import Codebook
from trajectories.models import Run
from trajectories.selectors import paired_concurrent_runs

from ..errors import AnnotationError
from ..models import Annotation, Assignment, Study
from ..stats.assignment import assign_pairs, queue_order
from .coding import audit, snapshot
from .statistics import statistics_changed


@transaction.atomic
def study_create(
    *,
    name: str,
    codebook: Codebook,
    annotators: list[AbstractBaseUser],
    adjudicator: AbstractBaseUser,
    run_ids: list[int] | None = None,
    seed: int = 0,
    user: AbstractBaseUser | None = None,
) -> Study:
    if not codebook.is_frozen:
        raise AnnotationError(f"{codebook} is a draft: freeze it before a study pins it", {"codebook": "not frozen"})
    if len({a.pk for a in annotators}) != 3:
        raise AnnotationError("a study needs exactly three distinct annotators", {"annotators": "need three"})
    if adjudicator.pk in {a.pk for a in annotators}:
        raise AnnotationError("the adjudicator cannot also be an annotator", {"adjudicator": "is an annotator"})
    if Study.objects.filter(name=name).exists():
        raise AnnotationError(f"a study named {name!r} exists", {"name": "taken"})
    study = Study.objects.create(name=name, codebook=codebook, adjudicator=adjudicator, seed=seed, created_by=user)
    study.annotators.set(annotators)
    study.runs.set(run_ids if run_ids is not None else list(paired_concurrent_runs().values_list("pk", flat=True)))
    record("study.create", f"study {name!r} created on {codebook}", actor=user, study_id=study.pk,
           codebook_id=codebook.pk, seed=seed, runs=study.runs.count(), adjudicator=adjudicator.get_username(),
           annotators=sorted(a.get_username() for a in annotators))  # fmt: skip
    statistics_changed(study_id=study.pk)  # RQ1 has its figures before anything is coded
    return study


def _next_positions(*, study: Study) -> dict[int, int]:
    """Each annotator's next free queue position in the study (1 for an empty queue)."""
    last = Assignment.objects.filter(study=study).values("annotator_id").annotate(last=Max("position"))
    return defaultdict(lambda: 1, {row["annotator_id"]: row["last"] + 1 for row in last})


def _stratum(run) -> tuple[str, str, str]:
    """What assignment balances within: agent system × benchmark × difficulty."""
    return (run.agent.name, run.task.benchmark.name, run.task.difficulty)


def _pair_counts(study: Study) -> Counter:
    """(stratum, annotator pair) → runs the study has given that pair so far."""
    on_run: dict[int, list] = defaultdict(list)
    rows = Assignment.objects.filter(study=study).values_list(
        "run_id", "annotator_id", "run__agent__name", "run__task__benchmark__name", "run__task__difficulty"
    )
    for run_id, annotator, *stratum in rows:
        on_run[run_id].append((annotator, tuple(stratum)))
    return Counter((coders[0][1], tuple(sorted(a for a, _ in coders))) for coders in on_run.values())


def study_assign(*, study: Study) -> int:
    """Assign every unassigned run of the study to two of its three annotators, continuing the
    balance the study already has (runs added later, even one at a time, are dealt where pair
    counts are lowest: stats/assignment.py). Deterministic (same seed and same arrivals, same
    result) and serialised on the study's row, so concurrent calls cannot assign a run twice; the
    database constraints make any other outcome impossible. Each annotator's new runs join the end
    of their queue in an order drawn from the seed. Returns assignments created."""
    with transaction.atomic():
        Study.objects.select_for_update().filter(pk=study.pk).first()
        usernames = dict(study.annotators.values_list("pk", "username"))
        annotators = sorted(usernames)
        assigned = set(Assignment.objects.filter(study=study).values_list("run_id", flat=True))
        runs = [
            (r.pk, _stratum(r))
            for r in study.runs.select_related("agent", "task__benchmark").order_by("pk")
            if r.pk not in assigned
        ]
        plan = assign_pairs(runs, annotators, seed=study.seed, already=_pair_counts(study))
        positions = _next_positions(study=study)
        rows = []
        for annotator in annotators:
            mine = [run_id for run_id, pair in plan.items() if annotator in pair]
            order = queue_order(mine, seed=study.seed, annotator=usernames[annotator], start=positions[annotator])
            for run_id in order:
                slot = plan[run_id].index(annotator) + 1
                rows.append(Assignment(study=study, run_id=run_id, annotator_id=annotator, slot=slot,
                                       position=positions[annotator]))  # fmt: skip
                positions[annotator] += 1
        Assignment.objects.bulk_create(rows, batch_size=1000)
        if rows:
            record("study.assign", f"{len(rows)} assignments made (seed {study.seed})", study_id=study.pk,
                   assignments=len(rows), seed=study.seed)  # fmt: skip
    return len(rows)


@transaction.atomic
def study_add_runs(*, study: Study, run_ids: list[int], actor: AbstractBaseUser | None = None) -> int:
    """Add runs to a study after it started, and assign them (the balance continues: study_assign).
    Only concurrent runs with a sequential twin can join (the study codes pairs); a run already in
    the study is refused, naming it, and nothing is added. Returns the runs added."""
    wanted = set(run_ids)
    eligible = set(paired_concurrent_runs().filter(pk__in=wanted).values_list("pk", flat=True))
    present = set(study.runs.filter(pk__in=wanted).values_list("pk", flat=True))
    errors = {}
    for run_id in sorted(wanted):
        if run_id in present:
            errors[f"run-{run_id}"] = f"run {run_id} is already in {study}"
        elif run_id not in eligible:
            errors[f"run-{run_id}"] = f"run {run_id} is not a concurrent run with a sequential twin (or does not exist)"
    if errors:
        raise AnnotationError("; ".join(errors.values()), errors)
    study.runs.add(*wanted)
    record("study.add_runs", f"{len(wanted)} runs added to {study.name!r}", actor=actor, study_id=study.pk,
           runs=sorted(wanted))  # fmt: skip
    study_assign(study=study)
    statistics_changed(study_id=study.pk)  # RQ1 covers the new pairs
    return len(wanted)


def assignment_add(*, study: Study, run: Run, annotator: AbstractBaseUser) -> Assignment:
    """Give one more annotator a run, at the end of their queue: refused if the run already has
    two (also under races)."""
    try:
        with transaction.atomic():
            Study.objects.select_for_update().filter(pk=study.pk).first()
            taken = set(Assignment.objects.filter(study=study, run=run).values_list("slot", flat=True))
            free = [slot for slot in (1, 2) if slot not in taken]
            if not free:
                raise AnnotationError(f"run {run.pk} already has two annotators in {study}")
            position = _next_positions(study=study)[annotator.pk]
            assignment = Assignment.objects.create(study=study, run=run, annotator=annotator, slot=free[0],
                                                   position=position)  # fmt: skip
            record("assignment.add", f"{annotator.get_username()} given run {run.pk} (slot {free[0]})",
                   study_id=study.pk, run_id=run.pk, annotator=annotator.get_username())  # fmt: skip
            return assignment
    except IntegrityError as exc:
        raise AnnotationError(f"run {run.pk}: that annotator or slot was taken meanwhile ({exc})") from exc


@transaction.atomic
def annotator_replace(
    *,
    study: Study,
    leaving: AbstractBaseUser,
    replacement: AbstractBaseUser | None = None,
    actor: AbstractBaseUser | None = None,
) -> dict[str, int]:
    """An annotator leaves: submitted work stays theirs; every unsubmitted run moves to the
    replacement (or, without one, to the remaining annotator not yet on that run)."""
    if not study.annotators.filter(pk=leaving.pk).exists():
        raise AnnotationError(f"{leaving} is not an annotator of {study}")
    if replacement is not None:
        study.annotators.add(replacement)
    study.annotators.remove(leaving)
    others = list(study.annotators.exclude(pk=leaving.pk))
    moved = kept = 0
    Study.objects.select_for_update().filter(pk=study.pk).first()
    positions = _next_positions(study=study)
    for assignment in (
        Assignment.objects.select_for_update().filter(study=study, annotator=leaving).order_by("position")
    ):
        annotation = Annotation.objects.filter(assignment=assignment).first()
        if annotation is not None and annotation.is_submitted:
            kept += 1
            continue
        on_run = set(Assignment.objects.filter(study=study, run=assignment.run).values_list("annotator_id", flat=True))
        candidates = [u for u in ([replacement] if replacement else others) if u is not None and u.pk not in on_run]
        if not candidates:
            raise AnnotationError(f"no annotator left to take run {assignment.run_id}")
        assignment.annotator = candidates[0]
        assignment.position = positions[candidates[0].pk]  # the end of the new annotator's queue
        positions[candidates[0].pk] += 1
        assignment.save(update_fields=["annotator", "position"])
        record("assignment.reassign", f"run {assignment.run_id} moved from {leaving.get_username()} to "
               f"{candidates[0].get_username()}", actor=actor, study_id=study.pk, run_id=assignment.run_id,
               leaving=leaving.get_username(), to=candidates[0].get_username())  # fmt: skip
        if annotation is not None:
            # The draft was the leaver's own reasoning: it does not pass to the next coder, who starts
            # from an empty draft. It is not deleted either: its history (and this reassignment, with
            # the draft as it was) stays in the append-only audit trail.
            before = snapshot(annotation)
            annotation.labels.all().delete()
            annotation.no_failure, annotation.notes = False, ""
            annotation.version += 1
            annotation.save(update_fields=["no_failure", "notes", "version", "updated_at"])
            after = {**snapshot(annotation), "from": leaving.get_username(), "to": candidates[0].get_username()}
            audit(annotation, actor, "reassign", before=before, after=after)
        moved += 1
    return {"moved": moved, "kept": kept}
