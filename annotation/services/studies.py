"""Writes for a study's design: creating it, assigning its runs, changing its annotators."""

from __future__ import annotations

from collections import Counter, defaultdict

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Count, Max
from django.utils import timezone

from activity.services import record
from taxonomy.models import Codebook
from trajectories.models import Run
from trajectories.selectors import paired_concurrent_runs

from ..analysis.store import analysis_changed
from ..assignment import assign_groups, queue_order
from ..errors import AnnotationError
from ..hint_policies import DEFAULT_HINT_POLICY, HINT_POLICIES
from ..models import Annotation, Assignment, Study
from ..selectors.studies import coders_by_run as _coders_by_run
from ..selectors.studies import group_counts
from .coding import audit, snapshot

User = get_user_model()


def _check_design(*, annotators: list, adjudicator, coders_per_run: int) -> None:
    errors = {}
    count = len({a.pk for a in annotators})
    if count != len(annotators):
        errors["annotators"] = "an annotator is listed twice"
    elif count < 2:
        errors["annotators"] = f"a study needs at least two annotators ({count} given)"
    elif not 2 <= coders_per_run <= count:
        errors["coders_per_run"] = f"coders per run must be between 2 and the {count} annotators, not {coders_per_run}"
    if adjudicator is not None and adjudicator.pk in {a.pk for a in annotators}:
        errors["adjudicator"] = f"the adjudicator ({adjudicator.get_username()}) cannot also be an annotator"
    if errors:
        raise AnnotationError("; ".join(errors.values()), errors)


@transaction.atomic
def study_create(
    *,
    name: str,
    codebook: Codebook,
    annotators: list[AbstractBaseUser],
    adjudicator: AbstractBaseUser,
    run_ids: list[int] | None = None,
    seed: int = 0,
    coders_per_run: int = 2,
    hint_policy: str = DEFAULT_HINT_POLICY,
    user: AbstractBaseUser | None = None,
) -> Study:
    """A study of N ≥ 2 annotators, k of them per run (2 ≤ k ≤ N), on a frozen codebook, over the
    given runs (default: every concurrent run with a sequential twin). Assigning is a separate step
    (study_assign)."""
    name = name.strip()
    if not name:
        raise AnnotationError("a study needs a name", {"name": "empty"})
    if not codebook.is_frozen:
        raise AnnotationError(f"{codebook} is a draft: freeze it before a study pins it", {"codebook": "not frozen"})
    _check_design(annotators=annotators, adjudicator=adjudicator, coders_per_run=coders_per_run)
    if hint_policy not in HINT_POLICIES:
        known = ", ".join(HINT_POLICIES)
        raise AnnotationError(
            f"hint policy must be one of {known}, not {hint_policy[:40]!r}", {"hint_policy": "unknown"}
        )
    if Study.objects.filter(name=name).exists():
        raise AnnotationError(f"a study named {name!r} exists", {"name": "taken"})
    if run_ids is not None:
        _check_runs(study=None, run_ids=run_ids)
    study = Study.objects.create(name=name, codebook=codebook, adjudicator=adjudicator, seed=seed,
                                 coders_per_run=coders_per_run, hint_policy=hint_policy, created_by=user)  # fmt: skip
    study.annotators.set(annotators)
    study.runs.set(run_ids if run_ids is not None else list(paired_concurrent_runs().values_list("pk", flat=True)))
    record("study.create", f"study {name!r} created on {codebook}", actor=user, study_id=study.pk,
           codebook_id=codebook.pk, seed=seed, runs=study.runs.count(), adjudicator=adjudicator.get_username(),
           annotators=sorted(a.get_username() for a in annotators), coders_per_run=coders_per_run,
           hint_policy=hint_policy)  # fmt: skip
    analysis_changed(study_id=study.pk)  # RQ1 has its figures before anything is coded
    return study


@transaction.atomic
def study_update(
    *,
    study: Study,
    actor: AbstractBaseUser | None,
    name: str | None = None,
    adjudicator: AbstractBaseUser | None = None,
    seed: int | None = None,
    coders_per_run: int | None = None,
) -> Study:
    """Edit a study. Its name and adjudicator can change at any time; its seed and coders per run
    only while nothing is assigned (they decide the assignment)."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    errors, changes = {}, {}
    if name is not None and name.strip() != study.name:
        name = name.strip()
        if not name:
            errors["name"] = "a study needs a name"
        elif Study.objects.filter(name=name).exclude(pk=study.pk).exists():
            errors["name"] = f"a study named {name!r} exists"
        else:
            changes["name"] = name
    assigned = Assignment.objects.filter(study=study).exists()
    for field, value in (("seed", seed), ("coders_per_run", coders_per_run)):
        if value is not None and value != getattr(study, field):
            if assigned:
                errors[field] = (
                    f"the {field.replace('_', ' ')} decides the assignment: it cannot change once runs are assigned"
                )
            else:
                changes[field] = value
    annotators = list(study.annotators.all())
    if adjudicator is not None and adjudicator.pk != study.adjudicator_id:
        changes["adjudicator"] = adjudicator
    try:
        _check_design(annotators=annotators, adjudicator=changes.get("adjudicator"),
                      coders_per_run=changes.get("coders_per_run", study.coders_per_run))  # fmt: skip
    except AnnotationError as exc:
        errors.update(exc.errors)
    if errors:
        raise AnnotationError("; ".join(errors.values()), errors)
    if not changes:
        return study
    before = {field: str(getattr(study, field)) for field in changes}
    for field, value in changes.items():
        setattr(study, field, value)
    study.save(update_fields=list(changes))
    record("study.update", f"{study.name!r} edited: {', '.join(sorted(changes))}", actor=actor, study_id=study.pk,
           before=before, after={field: str(value) for field, value in changes.items()})  # fmt: skip
    return study


@transaction.atomic
def study_close(*, study: Study, actor: AbstractBaseUser | None, reopen: bool = False) -> Study:
    """Close a study (no more coding, runs or assignments; its adjudicator can still rule on open
    cases), or reopen it."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    if reopen == (study.closed_at is None):
        raise AnnotationError(f"{study.name!r} is already {'open' if reopen else 'closed'}")
    study.closed_at = None if reopen else timezone.now()
    study.save(update_fields=["closed_at"])
    record("study.reopen" if reopen else "study.close", f"{study.name!r} {'reopened' if reopen else 'closed'}",
           actor=actor, study_id=study.pk)  # fmt: skip
    return study


def _require_open(study: Study) -> None:
    if study.closed_at is not None:
        raise AnnotationError(f"{study.name!r} is closed: reopen it first", {"study": "closed"})


def _next_positions(*, study: Study) -> dict[int, int]:
    """Each annotator's next free queue position in the study (1 for an empty queue)."""
    last = Assignment.objects.filter(study=study).values("annotator_id").annotate(last=Max("position"))
    return defaultdict(lambda: 1, {row["annotator_id"]: row["last"] + 1 for row in last})


def _stratum(run) -> tuple[str, str, str]:
    """What assignment balances within: agent system × benchmark × difficulty."""
    return (run.agent.name, run.task.benchmark.name, run.task.difficulty)


def _group_counts(on_run: dict[int, tuple[tuple, list[int]]]) -> Counter:
    """(stratum, coder group) → runs the study has given that group so far."""
    return Counter((stratum, tuple(sorted(coders))) for stratum, coders in on_run.values())


def _deal(study: Study, runs: list[tuple[int, tuple]], *, already: Counter) -> list[Assignment]:
    """Assignments (unsaved) for `runs` (run id, stratum), each to k annotators, continuing the
    balance in `already`; each annotator's new runs join the end of their queue in seeded order."""
    usernames = dict(study.annotators.values_list("pk", "username"))
    annotators = sorted(usernames)
    plan = assign_groups(runs, annotators, k=study.coders_per_run, seed=study.seed, already=already)
    positions = _next_positions(study=study)
    rows = []
    for annotator in annotators:
        mine = [run_id for run_id, group in plan.items() if annotator in group]
        for run_id in queue_order(mine, seed=study.seed, annotator=usernames[annotator], start=positions[annotator]):
            rows.append(Assignment(study=study, run_id=run_id, annotator_id=annotator,
                                   slot=plan[run_id].index(annotator) + 1, position=positions[annotator]))  # fmt: skip
            positions[annotator] += 1
    return rows


def study_assign(*, study: Study) -> int:
    """Assign every unassigned run of the study to k of its N annotators, continuing the balance
    the study already has (runs added later, even one at a time, are dealt where group counts are
    lowest: assignment.py). Deterministic (same seed and same arrivals, same result) and
    serialised on the study's row, so concurrent calls cannot assign a run twice; the database
    constraints make any other outcome impossible. Each annotator's new runs join the end of their
    queue in an order drawn from the seed. Returns assignments created."""
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        _require_open(study)
        assigned = set(Assignment.objects.filter(study=study).values_list("run_id", flat=True))
        runs = [
            (r.pk, _stratum(r))
            for r in study.runs.select_related("agent", "task__benchmark").order_by("pk")
            if r.pk not in assigned
        ]
        already = Counter({key: n for key, n in group_counts(study).items() if key[1]})
        rows = _deal(study, runs, already=already)
        Assignment.objects.bulk_create(rows, batch_size=1000)
        if rows:
            record("study.assign", f"{len(rows)} assignments made (seed {study.seed})", study_id=study.pk,
                   assignments=len(rows), seed=study.seed, coders_per_run=study.coders_per_run)  # fmt: skip
    return len(rows)


def _check_runs(*, study: Study | None, run_ids: list[int]) -> set[int]:
    """Only concurrent runs with a sequential twin can be in a study (it codes pairs); a run already
    in the study is refused. Every refusal names its run; nothing is added."""
    wanted = set(run_ids)
    eligible = set(paired_concurrent_runs().filter(pk__in=wanted).values_list("pk", flat=True))
    present = set(study.runs.filter(pk__in=wanted).values_list("pk", flat=True)) if study else set()
    errors = {}
    for run_id in sorted(wanted):
        if run_id in present:
            errors[f"run-{run_id}"] = f"run {run_id} is already in {study}"
        elif run_id not in eligible:
            errors[f"run-{run_id}"] = f"run {run_id} is not a concurrent run with a sequential twin (or does not exist)"
    if errors:
        raise AnnotationError("; ".join(errors.values()), errors)
    return wanted


@transaction.atomic
def study_add_runs(*, study: Study, run_ids: list[int], actor: AbstractBaseUser | None = None) -> int:
    """Add runs to a study after it started, and assign them (the balance continues: study_assign).
    Returns the runs added."""
    _require_open(study)
    wanted = _check_runs(study=study, run_ids=run_ids)
    if not wanted:
        raise AnnotationError("no runs to add", {"runs": "empty"})
    study.runs.add(*wanted)
    record("study.add_runs", f"{len(wanted)} runs added to {study.name!r}", actor=actor, study_id=study.pk,
           runs=sorted(wanted))  # fmt: skip
    study_assign(study=study)
    analysis_changed(study_id=study.pk)  # RQ1 covers the new pairs
    return len(wanted)


def assignment_add(*, study: Study, run: Run, annotator: AbstractBaseUser) -> Assignment:
    """Give one more annotator a run, at the end of their queue: refused if the run already has
    the study's k coders (also under races)."""
    try:
        with transaction.atomic():
            study = Study.objects.select_for_update().get(pk=study.pk)
            _require_open(study)
            taken = set(Assignment.objects.filter(study=study, run=run).values_list("slot", flat=True))
            free = [slot for slot in range(1, study.coders_per_run + 1) if slot not in taken]
            if not free:
                raise AnnotationError(f"run {run.pk} already has its {study.coders_per_run} annotators in {study}")
            position = _next_positions(study=study)[annotator.pk]
            assignment = Assignment.objects.create(study=study, run=run, annotator=annotator, slot=free[0],
                                                   position=position)  # fmt: skip
            record("assignment.add", f"{annotator.get_username()} given run {run.pk} (slot {free[0]})",
                   study_id=study.pk, run_id=run.pk, annotator=annotator.get_username())  # fmt: skip
            return assignment
    except IntegrityError as exc:
        raise AnnotationError(f"run {run.pk}: that annotator or slot was taken meanwhile ({exc})") from exc


def _uncoded_runs(study: Study) -> set[int]:
    """Runs of the study that nobody has started: none of their assignments has a stored coding (a
    draft is stored at its first save)."""
    started = set(
        Annotation.objects.filter(assignment__study=study).values_list("assignment__run_id", flat=True).distinct()
    )
    assigned = set(Assignment.objects.filter(study=study).values_list("run_id", flat=True))
    return assigned - started


@transaction.atomic
def study_add_annotator(*, study: Study, annotator: AbstractBaseUser, actor: AbstractBaseUser | None) -> dict:
    """A new annotator joins mid-study: the runs nobody has started are dealt again over the
    annotators now in the study (continuing from the groups of the started runs, so the newcomer
    takes the larger share of what is left); started and submitted work stays where it is. Every
    assignment that changes hands is in the activity log. Returns counts."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    _require_open(study)
    if study.annotators.filter(pk=annotator.pk).exists():
        raise AnnotationError(f"{annotator.get_username()} is already an annotator of {study}", {"annotator": "in"})
    if annotator.pk == study.adjudicator_id:
        raise AnnotationError(f"{annotator.get_username()} adjudicates {study}", {"annotator": "is the adjudicator"})
    study.annotators.add(annotator)
    record("study.add_annotator", f"{annotator.get_username()} joined {study.name!r}", actor=actor,
           study_id=study.pk, annotator=annotator.get_username())  # fmt: skip
    return _rebalance(study, actor=actor)


def _rebalance(study: Study, *, actor: AbstractBaseUser | None) -> dict:
    """Deal the study's unstarted runs again over its current annotators. A run keeps the coders
    the new deal keeps (and their queue places); the others' assignments are removed and the new
    coders get the run at the end of their queue."""
    uncoded = _uncoded_runs(study)
    coded = _coders_by_run(study, exclude_runs=uncoded)
    current = _coders_by_run(study)
    runs = sorted((run_id, current[run_id][0]) for run_id in uncoded)
    usernames = dict(User.objects.filter(assignments__study=study).values_list("pk", "username").distinct())
    plan = assign_groups(runs, sorted(study.annotators.values_list("pk", flat=True)), k=study.coders_per_run,
                         seed=study.seed, already=_group_counts(coded))  # fmt: skip
    leaving: list[tuple[int, int]] = []  # (run, annotator) assignments to remove
    joining: dict[int, list[int]] = defaultdict(list)  # annotator → runs to add
    for run_id, group in plan.items():
        before = set(current[run_id][1])
        leaving += [(run_id, a) for a in sorted(before - set(group))]
        for annotator in sorted(set(group) - before):
            joining[annotator].append(run_id)
    for run_id, annotator in leaving:
        Assignment.objects.filter(study=study, run_id=run_id, annotator_id=annotator).delete()
    usernames.update(dict(study.annotators.values_list("pk", "username")))
    positions = _next_positions(study=study)
    rows = []
    for annotator, run_ids in sorted(joining.items()):
        for run_id in queue_order(run_ids, seed=study.seed, annotator=usernames[annotator], start=positions[annotator]):
            taken = set(Assignment.objects.filter(study=study, run_id=run_id).values_list("slot", flat=True))
            taken |= {row.slot for row in rows if row.run_id == run_id}
            slot = min(set(range(1, study.coders_per_run + 1)) - taken)
            rows.append(Assignment(study=study, run_id=run_id, annotator_id=annotator, slot=slot,
                                   position=positions[annotator]))  # fmt: skip
            positions[annotator] += 1
    Assignment.objects.bulk_create(rows, batch_size=1000)
    moved = len(rows)
    if moved:
        record("study.rebalance", f"{moved} unstarted assignments dealt again over {len(set(usernames))} annotators",
               actor=actor, study_id=study.pk, unstarted_runs=len(uncoded),
               removed=[[run_id, usernames[a]] for run_id, a in leaving],
               added=[[row.run_id, usernames[row.annotator_id]] for row in rows])  # fmt: skip
    return {"unstarted_runs": len(uncoded), "moved": moved}


@transaction.atomic
def annotator_replace(
    *,
    study: Study,
    leaving: AbstractBaseUser,
    replacement: AbstractBaseUser | None = None,
    actor: AbstractBaseUser | None = None,
) -> dict[str, int]:
    """An annotator leaves: submitted work stays theirs (and counts in agreement); every
    unsubmitted run moves to the replacement (or, without one, to the least-loaded remaining
    annotator not yet on that run). A draft does not pass on: the next coder starts empty, and the
    draft stays in the audit trail."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    _require_open(study)
    if not study.annotators.filter(pk=leaving.pk).exists():
        raise AnnotationError(f"{leaving} is not an annotator of {study}", {"leaving": "not an annotator"})
    if replacement is not None:
        if replacement.pk == study.adjudicator_id:
            raise AnnotationError(f"{replacement} adjudicates {study}", {"replacement": "is the adjudicator"})
        if replacement.pk == leaving.pk:
            raise AnnotationError("an annotator cannot replace themselves", {"replacement": "same person"})
        study.annotators.add(replacement)
    study.annotators.remove(leaving)
    others = list(study.annotators.all())
    if replacement is None and len(others) < study.coders_per_run:
        raise AnnotationError(
            f"without a replacement {study} would have {len(others)} annotators for {study.coders_per_run} per run",
            {"replacement": "needed"},
        )
    record("study.replace_annotator", f"{leaving.get_username()} left {study.name!r}"
           + (f", replaced by {replacement.get_username()}" if replacement else ""), actor=actor, study_id=study.pk,
           leaving=leaving.get_username(), replacement=replacement.get_username() if replacement else None)  # fmt: skip
    loads = Counter(dict(Assignment.objects.filter(study=study).values("annotator_id")
                         .annotate(n=Count("pk")).values_list("annotator_id", "n")))  # fmt: skip
    moved = kept = 0
    positions = _next_positions(study=study)
    for assignment in (
        Assignment.objects.select_for_update().filter(study=study, annotator=leaving).order_by("position")
    ):
        annotation = Annotation.objects.filter(assignment=assignment).first()
        if annotation is not None and annotation.is_submitted:
            kept += 1
            continue
        on_run = set(Assignment.objects.filter(study=study, run=assignment.run).values_list("annotator_id", flat=True))
        candidates = [u for u in ([replacement] if replacement else others) if u.pk not in on_run]
        if not candidates:
            raise AnnotationError(f"no annotator left to take run {assignment.run_id}")
        taker = min(candidates, key=lambda u: (loads[u.pk], u.get_username()))
        loads[taker.pk] += 1
        assignment.annotator = taker
        assignment.position = positions[taker.pk]  # the end of the new annotator's queue
        positions[taker.pk] += 1
        assignment.save(update_fields=["annotator", "position"])
        record("assignment.reassign", f"run {assignment.run_id} moved from {leaving.get_username()} to "
               f"{taker.get_username()}", actor=actor, study_id=study.pk, run_id=assignment.run_id,
               leaving=leaving.get_username(), to=taker.get_username())  # fmt: skip
        if annotation is not None:
            # The draft was the leaver's own reasoning: it does not pass to the next coder, who starts
            # from an empty draft. It is not deleted either: its history (and this reassignment, with
            # the draft as it was) stays in the append-only audit trail.
            before = snapshot(annotation)
            annotation.labels.all().delete()
            annotation.no_failure, annotation.notes = False, ""
            annotation.version += 1
            annotation.save(update_fields=["no_failure", "notes", "version", "updated_at"])
            after = {**snapshot(annotation), "from": leaving.get_username(), "to": taker.get_username()}
            audit(annotation, actor, "reassign", before=before, after=after)
        moved += 1
    return {"moved": moved, "kept": kept}
