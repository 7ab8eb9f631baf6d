"""Writes for studies, assignments and annotations. Every change to an annotation is audited."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from taxonomy.models import Code, Codebook
from trajectories.models import Run

from .assignment import assign_pairs
from .models import Annotation, Assignment, AuditEntry, Final, FinalLabel, Label, Study
from .reconcile import run_reconcile


class AnnotationError(ValueError):
    """A request the annotation rules refuse; `errors` maps field → message where it helps."""

    def __init__(self, message: str, errors: dict[str, str] | None = None):
        super().__init__(message)
        self.errors = errors or {}


class ConflictError(AnnotationError):
    pass


class LockedError(AnnotationError):
    pass


@dataclass
class LabelInput:
    code_id: int
    rationale: str = ""
    realized_consequence: str = ""
    evidence: list[str] = field(default_factory=list)
    contrast: list[str] = field(default_factory=list)
    nearest_rejected_id: int | None = None
    rejection_reason: str = ""


# -- studies and assignment ---------------------------------------------------------------


def paired_concurrent_runs():
    twins = Run.objects.filter(mode=Run.Mode.SEQUENTIAL).values_list("task_id", "agent_id")
    pairs = set(twins)
    return [
        r.pk
        for r in Run.objects.filter(mode=Run.Mode.CONCURRENT).only("pk", "task_id", "agent_id")
        if (r.task_id, r.agent_id) in pairs
    ]


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
    study.runs.set(run_ids if run_ids is not None else paired_concurrent_runs())
    return study


def study_assign(*, study: Study) -> int:
    """Assign every unassigned run of the study to two of its three annotators. Idempotent and
    deterministic (same seed, same result), so concurrent calls insert the same rows; the
    database constraints make any other outcome impossible. Returns assignments created."""
    annotators = sorted(study.annotators.values_list("pk", flat=True))
    assigned = set(Assignment.objects.filter(study=study).values_list("run_id", flat=True))
    runs = [
        (r.pk, (r.agent.name, r.task.benchmark.name))
        for r in study.runs.select_related("agent", "task__benchmark")
        if r.pk not in assigned
    ]
    plan = assign_pairs(runs, annotators, seed=study.seed)
    rows = [
        Assignment(study=study, run_id=run_id, annotator_id=annotator, slot=slot)
        for run_id, pair in plan.items()
        for slot, annotator in enumerate(pair, start=1)
    ]
    before = Assignment.objects.filter(study=study).count()
    with transaction.atomic():
        Assignment.objects.bulk_create(rows, ignore_conflicts=True, batch_size=1000)
    return Assignment.objects.filter(study=study).count() - before


def assignment_add(*, study: Study, run: Run, annotator: AbstractBaseUser) -> Assignment:
    """Give one more annotator a run: refused if the run already has two (also under races)."""
    taken = set(Assignment.objects.filter(study=study, run=run).values_list("slot", flat=True))
    free = [slot for slot in (1, 2) if slot not in taken]
    if not free:
        raise AnnotationError(f"run {run.pk} already has two annotators in {study}")
    try:
        with transaction.atomic():
            return Assignment.objects.create(study=study, run=run, annotator=annotator, slot=free[0])
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
    for assignment in Assignment.objects.select_for_update().filter(study=study, annotator=leaving):
        annotation = Annotation.objects.filter(assignment=assignment).first()
        if annotation is not None and annotation.is_submitted:
            kept += 1
            continue
        on_run = set(Assignment.objects.filter(study=study, run=assignment.run).values_list("annotator_id", flat=True))
        candidates = [u for u in ([replacement] if replacement else others) if u is not None and u.pk not in on_run]
        if not candidates:
            raise AnnotationError(f"no annotator left to take run {assignment.run_id}")
        if annotation is not None:
            # The draft was the leaver's own reasoning: it does not pass to the next coder.
            _audit(annotation, actor, "reassign", before=snapshot(annotation), after=None)
            annotation.labels.all().delete()
            annotation.delete()
        assignment.annotator = candidates[0]
        assignment.save(update_fields=["annotator"])
        moved += 1
    return {"moved": moved, "kept": kept}


# -- annotations --------------------------------------------------------------------------


def annotation_for(*, assignment: Assignment) -> Annotation:
    """The stored annotation, or an unsaved empty draft: merely opening a run writes nothing."""
    return Annotation.objects.filter(assignment=assignment).first() or Annotation(assignment=assignment)


def _ensure_stored(annotation: Annotation) -> None:
    """First save of a draft: store it (or pick up the one another request stored meanwhile)."""
    if annotation.pk is not None:
        return
    stored, _ = Annotation.objects.get_or_create(assignment=annotation.assignment)
    for name in ("id", "status", "version", "no_failure", "notes", "created_at", "updated_at", "submitted_at"):
        setattr(annotation, name, getattr(stored, name))
    annotation._state.adding = False


def snapshot(annotation: Annotation) -> dict:
    labels = (
        annotation.labels.select_related("code", "nearest_rejected").order_by("code__position") if annotation.pk else []
    )
    return {
        "status": annotation.status,
        "version": annotation.version,
        "no_failure": annotation.no_failure,
        "notes": annotation.notes,
        "labels": [
            {
                "code": label.code.key,
                "rationale": label.rationale,
                "realized_consequence": label.realized_consequence,
                "evidence": label.evidence,
                "contrast": label.contrast,
                "nearest_rejected": label.nearest_rejected.key if label.nearest_rejected else None,
                "rejection_reason": label.rejection_reason,
            }
            for label in labels
        ],
    }


def _audit(annotation: Annotation, actor, action: str, *, before: dict | None, after: dict | None) -> None:
    AuditEntry.objects.create(annotation=annotation, actor=actor, action=action, before=before, after=after)


def _claim_version(annotation: Annotation, version: int, *, revising: bool = False) -> None:
    """Compare-and-set: only a save that names the current version may write. A draft is
    saved; a submitted annotation only changes as a revision during its run's discussion."""
    if annotation.is_submitted and not revising:
        raise LockedError("this annotation is submitted and locked")
    status = Annotation.Status.SUBMITTED if revising else Annotation.Status.DRAFT
    updated = Annotation.objects.filter(pk=annotation.pk, version=version, status=status).update(
        version=version + 1, updated_at=timezone.now()
    )
    if not updated:
        current = Annotation.objects.filter(pk=annotation.pk).values_list("version", "status").first()
        if current and current[1] == Annotation.Status.SUBMITTED and not revising:
            raise LockedError("this annotation was submitted meanwhile and is locked")
        raise ConflictError(
            f"this annotation was saved elsewhere (version {current[0] if current else '?'}, yours was {version}); "
            "reload to see the newer version — your change was not saved"
        )
    annotation.version = version + 1


def _validate_labels(annotation: Annotation, no_failure: bool, labels: list[LabelInput]) -> dict[int, Code]:
    codebook_id = annotation.assignment.study.codebook_id
    ids = {label.code_id for label in labels} | {
        label.nearest_rejected_id for label in labels if label.nearest_rejected_id
    }
    codes = {c.pk: c for c in Code.objects.filter(pk__in=ids, codebook_id=codebook_id)}
    errors = {}
    for label in labels:
        code = codes.get(label.code_id)
        if code is None or code.level != Code.Level.MODE:
            errors[f"code-{label.code_id}"] = "not a failure mode of this study's codebook"
        if label.nearest_rejected_id and label.nearest_rejected_id not in codes:
            errors[f"rejected-{label.code_id}"] = "not a code of this study's codebook"
    if len({label.code_id for label in labels}) != len(labels):
        errors["codes"] = "a mode is picked twice"
    if no_failure and labels:
        errors["no_failure"] = "'no failure mode' excludes picking modes"
    if errors:
        raise AnnotationError("; ".join(f"{k}: {v}" for k, v in errors.items()), errors)
    return codes


@transaction.atomic
def annotation_save(
    *,
    annotation: Annotation,
    actor: AbstractBaseUser,
    version: int,
    no_failure: bool,
    notes: str,
    labels: list[LabelInput],
    revising: bool = False,
) -> Annotation:
    """Autosave a draft: replaces its labels. Stale `version` → ConflictError, nothing written.
    `revising` is for discussion.annotation_revise only (a submitted annotation under discussion)."""
    _validate_labels(annotation, no_failure, labels)
    if revising:
        errors = {f"rationale-{label.code_id}": "needs a rationale" for label in labels if not label.rationale.strip()}
        if errors:
            raise AnnotationError("every failure mode needs a rationale", errors)
    _ensure_stored(annotation)
    before = snapshot(annotation)
    _claim_version(annotation, version, revising=revising)
    annotation.no_failure = no_failure
    annotation.notes = notes
    annotation.save(update_fields=["no_failure", "notes"])
    annotation.labels.all().delete()
    Label.objects.bulk_create(
        [
            Label(
                annotation=annotation,
                code_id=label.code_id,
                rationale=label.rationale.strip(),
                realized_consequence=label.realized_consequence.strip(),
                evidence=_clean_anchors(label.evidence),
                contrast=_clean_anchors(label.contrast),
                nearest_rejected_id=label.nearest_rejected_id,
                rejection_reason=label.rejection_reason.strip(),
            )
            for label in labels
        ]
    )
    after = snapshot(annotation)
    if _content(before) != _content(after):
        _audit(annotation, actor, "revise" if revising else "save", before=before, after=after)
    return annotation


def _content(snap: dict) -> dict:
    return {k: v for k, v in snap.items() if k != "version"}


def _clean_anchors(anchors: list[str]) -> list[str]:
    seen, out = set(), []
    for anchor in anchors:
        anchor = anchor.strip()
        if anchor and anchor not in seen:
            seen.add(anchor)
            out.append(anchor)
    return out


@transaction.atomic
def annotation_submit(*, annotation: Annotation, actor: AbstractBaseUser, version: int) -> Annotation:
    if annotation.pk is None:
        raise AnnotationError(
            "nothing is saved yet: pick failure modes (or 'no failure mode') first", {"codes": "empty"}
        )
    labels = list(annotation.labels.select_related("code"))
    errors = {
        f"rationale-{label.code_id}": f"'{label.code.name}' needs a rationale"
        for label in labels
        if not label.rationale.strip()
    }
    if not labels and not annotation.no_failure:
        errors["codes"] = "pick at least one failure mode, or choose 'no failure mode'"
    if errors:
        raise AnnotationError("; ".join(errors.values()), errors)
    before = snapshot(annotation)
    _claim_version(annotation, version)
    annotation.status = Annotation.Status.SUBMITTED
    annotation.submitted_at = timezone.now()
    annotation.save(update_fields=["status", "submitted_at"])
    _audit(annotation, actor, "submit", before=before, after=snapshot(annotation))
    run_reconcile(study=annotation.assignment.study, run_id=annotation.assignment.run_id)
    return annotation


# -- published labels ------------------------------------------------------------------------


@dataclass
class PublishedImportResult:
    source: str
    run_id: int | None = None
    imported: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # labels not in the codebook: reported, kept in notes
    error: str = ""


AGENT_ALIASES = {"codex": "Codex", "claude": "Claude Code", "kimi": "Kimi Code"}


def _published_run(study: Study, record, benchmark_hint: str) -> Run:
    task_id = record.header.get("task_id") or record.pair_id.split("/")[0]
    agent_raw = record.header.get("agent") or record.pair_id.split("/")[-1]
    agent = AGENT_ALIASES.get(agent_raw, agent_raw)
    runs = study.runs.filter(task__external_id=task_id, agent__name=agent, mode=Run.Mode.CONCURRENT)
    if benchmark_hint and runs.count() > 1:
        runs = runs.filter(task__benchmark__name=benchmark_hint)
    found = list(runs[:2])
    if not found:
        raise AnnotationError(f"{record.name}: no concurrent run of task {task_id!r} by {agent} in {study}")
    if len(found) > 1:
        raise AnnotationError(f"{record.name}: task {task_id!r} by {agent} is ambiguous (several benchmarks)")
    return found[0]


@transaction.atomic
def published_import(
    *,
    study: Study,
    record,
    actor: AbstractBaseUser | None = None,
    annotator: AbstractBaseUser | None = None,
    benchmark_hint: str = "",
) -> PublishedImportResult:
    """Load one published record as `annotator`'s submitted annotation, or (annotator=None) as
    the run's final labels with provenance 'imported'. Unknown labels are reported and kept
    in the notes, never silently dropped."""
    result = PublishedImportResult(source=record.name)
    run = _published_run(study, record, benchmark_hint)
    result.run_id = run.pk
    codes = {c.name.lower(): c for c in Code.objects.filter(codebook=study.codebook).select_related("parent__parent")}
    picked: list[tuple[Code, object]] = []
    for failure in record.failures:
        top, sub, mode = failure.labels
        code = codes.get(mode.lower())
        if code is None or code.level != Code.Level.MODE:
            result.unknown.append(f"Failure {failure.number}: {top} > {sub} > {mode}")
            continue
        parent_names = (code.parent.parent.name.lower(), code.parent.name.lower())
        if parent_names != (top.lower(), sub.lower()):
            result.unknown.append(
                f"Failure {failure.number}: {top} > {sub} > {mode} (the codebook files "
                f"{mode} under {code.parent.parent.name} > {code.parent.name})"
            )
            continue
        if any(c.pk == code.pk for c, _ in picked):
            continue
        picked.append((code, failure))
        result.imported.append(code.name)
    note = "Imported from " + record.name
    if result.unknown:
        note += "\nLabels not in the codebook: " + "; ".join(result.unknown)
    if annotator is None:
        if Final.objects.filter(study=study, run=run).exists():
            raise AnnotationError(f"{record.name}: run {run.pk} already has final labels in {study}")
        final = Final.objects.create(
            study=study,
            run=run,
            provenance=Final.Provenance.IMPORTED,
            no_failure=not picked and not result.unknown,
            note=note,
            decided_by=actor,
        )
        FinalLabel.objects.bulk_create(
            [
                FinalLabel(
                    final=final,
                    code=code,
                    rationale=failure.fields.get("reasoning", ""),
                    evidence=failure.anchors("parallel_evidence"),
                )
                for code, failure in picked
            ]
        )
        return result
    assignment = Assignment.objects.filter(study=study, run=run, annotator=annotator).first()
    if assignment is None:
        assignment = assignment_add(study=study, run=run, annotator=annotator)
    annotation = annotation_for(assignment=assignment)
    if annotation.is_submitted:
        raise AnnotationError(f"{record.name}: {annotator} has already submitted run {run.pk}")
    rejected_ids = {c.name.lower(): c.pk for c in codes.values()}
    inputs = [
        LabelInput(
            code_id=code.pk,
            rationale=failure.fields.get("reasoning", ""),
            realized_consequence=failure.fields.get("realized_consequence", ""),
            evidence=failure.anchors("parallel_evidence"),
            contrast=failure.anchors("serial_contrast"),
            nearest_rejected_id=rejected_ids.get(failure.fields.get("nearest_rejected_label", "").lower()),
            rejection_reason=failure.fields.get("rejection_reason", ""),
        )
        for code, failure in picked
    ]
    annotation_save(
        annotation=annotation,
        actor=actor or annotator,
        version=annotation.version,
        no_failure=not picked and not result.unknown,
        notes=note,
        labels=inputs,
    )
    if not picked and result.unknown:
        result.error = "no label matched the codebook: left as a draft for the annotator to finish"
        return result
    annotation_submit(annotation=annotation, actor=actor or annotator, version=annotation.version)
    return result
