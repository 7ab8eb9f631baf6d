"""Writes for an annotator's coding of a run: autosave (optimistic locking), submit, and the
revision of a submitted coding while its run is under discussion. Every change is audited."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from common.text import TextError, text_check
from taxonomy.models import Code

from ..analysis.store import analysis_changed
from ..errors import AnnotationError, ConflictError, LockedError, checked_text
from ..models import MAX_INSTANCES, Annotation, AuditEntry, Discussion, Label, Study
from .anchors import ANCHOR_MAX, anchor_problems, clean_anchors, field_key, numbered
from .review import discussion_require_open, run_reconcile
from .spans import clean_spans, span_problems


@dataclass
class LabelInput:
    """One instance (episode) of a failure mode. Several inputs with one code are that mode's
    instances, numbered 1, 2, … in the order given."""

    code_id: int
    rationale: str = ""
    realized_consequence: str = ""
    evidence: list[str] = field(default_factory=list)
    contrast: list[str] = field(default_factory=list)
    spans: list = field(default_factory=list)  # cited spans of events' texts (services/spans.py), checked at save
    nearest_rejected_id: int | None = None
    rejection_reason: str = ""
    episode_id: str = ""
    comparative_role: str = ""


def ensure_stored(annotation: Annotation) -> None:
    """First save of a draft: store it (or pick up the one another request stored meanwhile)."""
    if annotation.pk is not None:
        return
    stored, _ = Annotation.objects.get_or_create(assignment=annotation.assignment)
    for name in (
        "id", "status", "version", "no_failure", "notes", "skip_reason", "flagged", "flag_note", "created_at",
        "updated_at", "submitted_at", "hints_seen_at", "hints_seen",
    ):  # fmt: skip
        setattr(annotation, name, getattr(stored, name))
    annotation._state.adding = False


def snapshot(annotation: Annotation, labels: list[Label] | None = None) -> dict:
    """An annotation's content as the audit trail keeps it (codes by key). `labels`: its labels in
    codebook order with their codes, when the caller has them (else they are read)."""
    if labels is None:
        labels = (
            annotation.labels.select_related("code", "nearest_rejected").order_by("code__position", "instance")
            if annotation.pk
            else []
        )
    return {
        "status": annotation.status,
        "version": annotation.version,
        "no_failure": annotation.no_failure,
        "notes": annotation.notes,
        "flagged": annotation.flagged,
        "flag_note": annotation.flag_note,
        "skip_reason": annotation.skip_reason,
        "labels": [{"code": label.code.key, **label.content()} for label in labels],
    }


def audit(annotation: Annotation, actor, action: str, *, before: dict | None, after: dict | None) -> None:
    AuditEntry.objects.create(annotation=annotation, actor=actor, action=action, before=before, after=after)


def _claim_version(annotation: Annotation, version: int, *, revising: bool = False, **fields) -> None:
    """Compare-and-set: only a save that names the current version may write (`fields` too, in the
    same statement). A draft is saved; a submitted annotation only changes as a revision during its
    run's discussion."""
    if annotation.is_submitted and not revising:
        raise LockedError("this annotation is submitted and locked")
    if annotation.assignment.study.closed_at is not None:
        raise LockedError(f"{annotation.assignment.study} is closed: its codings no longer change")
    status = Annotation.Status.SUBMITTED if revising else Annotation.Status.DRAFT
    now = timezone.now()
    updated = Annotation.objects.filter(pk=annotation.pk, version=version, status=status).update(
        version=version + 1, updated_at=now, **fields
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
    annotation.updated_at = now  # the status line says when this save happened
    for name, value in fields.items():
        setattr(annotation, name, value)


SHORT_FIELD_MAX = Label._meta.get_field("episode_id").max_length
LABEL_TEXTS = ("rationale", "realized_consequence", "rejection_reason", "episode_id", "comparative_role")
TEXT_LIMITS = {name: Label._meta.get_field(name).max_length for name in LABEL_TEXTS}


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
    for instance, label in numbered(labels):
        for name in ("episode_id", "comparative_role"):
            if len(getattr(label, name).strip()) > SHORT_FIELD_MAX:
                errors[field_key(name, label.code_id, instance)] = f"{name} is longer than {SHORT_FIELD_MAX} characters"
        texts = [(name, getattr(label, name)) for name in LABEL_TEXTS]
        texts += [(name, anchor) for name in ("evidence", "contrast") for anchor in getattr(label, name)]
        for name, value in texts:
            key = field_key(name, label.code_id, instance)
            try:
                text_check(value, field=key, max_length=TEXT_LIMITS.get(name, ANCHOR_MAX))
            except TextError as exc:
                errors.setdefault(key, exc.problem)
        if instance == MAX_INSTANCES + 1:
            errors[field_key("code", label.code_id)] = f"more than {MAX_INSTANCES} episodes of one mode"
    if no_failure and labels:
        errors["no_failure"] = "'no failure mode' excludes picking modes"
    if not errors and any(label.spans for label in labels):
        errors.update(span_problems(run=annotation.assignment.run, labels=labels))
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
    flagged: bool | None = None,
    flag_note: str | None = None,
    revising: bool = False,
) -> Annotation:
    """Autosave a draft: replaces its labels. Stale `version` → ConflictError, nothing written.
    `flagged`/`flag_note` (None: unchanged) ask for a discussion of the run whatever the other
    coding says. `revising` is for annotation_revise only (a submitted annotation under discussion)."""
    codes = _validate_labels(annotation, no_failure, labels)
    checked_text(Annotation, "notes", notes)
    if flag_note is not None:
        checked_text(Annotation, "flag_note", flag_note)
    if revising:
        errors = {
            field_key("rationale", label.code_id, instance): "needs a rationale"
            for instance, label in numbered(labels)
            if not label.rationale.strip()
        }
        if errors:
            raise AnnotationError("every failure mode needs a rationale", errors)
    ensure_stored(annotation)
    before = snapshot(annotation)
    fields = {"no_failure": no_failure, "notes": notes}
    if not revising:  # a flag asks for a discussion before there is one
        if flagged is not None:
            fields["flagged"] = flagged
        if flag_note is not None:
            fields["flag_note"] = flag_note.strip()
    _claim_version(annotation, version, revising=revising, **fields)
    annotation.labels.all().delete()
    stored = Label.objects.bulk_create(
        [
            Label(
                annotation=annotation,
                code=codes[label.code_id],
                instance=instance,
                rationale=label.rationale.strip(),
                realized_consequence=label.realized_consequence.strip(),
                evidence=clean_anchors(label.evidence + _span_anchors(label, "evidence")),
                contrast=clean_anchors(label.contrast + _span_anchors(label, "contrast")),
                spans=clean_spans(label.spans),
                nearest_rejected=codes.get(label.nearest_rejected_id),
                rejection_reason=label.rejection_reason.strip(),
                episode_id=label.episode_id.strip(),
                comparative_role=label.comparative_role.strip(),
            )
            for instance, label in numbered(labels)
        ]
    )
    after = snapshot(annotation, sorted(stored, key=lambda label: (label.code.position, label.instance)))
    if _content(before) != _content(after):
        audit(annotation, actor, "revise" if revising else "save", before=before, after=after)
    return annotation


def _span_anchors(label: LabelInput, name: str) -> list[str]:
    """A cited span's event is part of the evidence (or contrast): its anchor is in that field too."""
    return [span["anchor"] for span in label.spans if span["field"] == name]


def _content(snap: dict) -> dict:
    return {k: v for k, v in snap.items() if k != "version"}


@transaction.atomic
def annotation_submit(
    *, annotation: Annotation, actor: AbstractBaseUser, version: int, check_anchors: bool = True
) -> Annotation:
    """Lock a saved coding: every mode needs a rationale, and every anchor must resolve to a file
    and line of the pair (`check_anchors=False` only for the study's published records, whose
    unresolved anchors the loader reports)."""
    if annotation.pk is None:
        raise AnnotationError(
            "nothing is saved yet: pick failure modes (or 'no failure mode') first", {"codes": "empty"}
        )
    labels = list(annotation.labels.select_related("code").order_by("code__position", "instance"))
    errors = {
        field_key("rationale", label.code_id, label.instance): f"'{_named(label)}' needs a rationale"
        for label in labels
        if not label.rationale.strip()
    }
    if not labels and not annotation.no_failure:
        errors["codes"] = "pick at least one failure mode, or choose 'no failure mode'"
    names = {field_key("", label.code_id, label.instance): _named(label) for label in labels}
    # An anchor into a run imported before files were kept cannot be checked: said at save, not refused here.
    problems = anchor_problems(run=annotation.assignment.run, labels=labels, unchecked=False) if check_anchors else {}
    for key, messages in problems.items():
        name, _, suffix = key.partition("-")
        errors[key] = f"'{names['-' + suffix]}' {name}: " + "; ".join(messages)
    if errors:
        raise AnnotationError("; ".join(errors.values()), errors)
    before = snapshot(annotation)
    # The study's row first (as assignment changes take it), then the annotation's: one lock order.
    analysis_changed(study_id=annotation.assignment.study_id)  # agreement counts first submissions
    _claim_version(annotation, version)
    annotation.status = Annotation.Status.SUBMITTED
    annotation.submitted_at = timezone.now()
    annotation.skip_reason = ""  # a run skipped earlier and coded now is no longer skipped
    annotation.recode_reason = ""  # a coding reopened by a codebook move is coded again
    # The version it was coded against: the labels' codes are the study's pinned version's (checked
    # at save), and agreement is computed per version.
    pinned = Study.objects.filter(pk=annotation.assignment.study_id).values_list("codebook_id", flat=True).get()
    if any(label.code.codebook_id != pinned for label in labels):
        raise AnnotationError(
            "the study moved to another codebook version since these codes were picked: reload and pick again",
            {"codes": "codebook moved"},
        )
    annotation.codebook_id = pinned
    annotation.save(update_fields=["status", "submitted_at", "skip_reason", "recode_reason", "codebook"])
    audit(annotation, actor, "submit", before=before, after=snapshot(annotation))
    run_reconcile(study=annotation.assignment.study, run_id=annotation.assignment.run_id)
    return annotation


@transaction.atomic
def annotation_skip(*, annotation: Annotation, actor: AbstractBaseUser, reason: str) -> Annotation:
    """Set a run aside for now, saying why: it moves to the end of the annotator's queue (what is
    coded so far stays as it is). Coding it later and submitting clears the skip."""
    if annotation.is_submitted:
        raise LockedError("this run is submitted: there is nothing to skip")
    if not reason.strip():
        raise AnnotationError("say why you skip this run", {"skip_reason": "empty"})
    checked_text(Annotation, "skip_reason", reason, field="reason")
    if annotation.assignment.study.closed_at is not None:
        raise LockedError(f"{annotation.assignment.study} is closed: its codings no longer change")
    ensure_stored(annotation)
    before = snapshot(annotation)
    # Only a draft is skipped: a submit from another tab meanwhile wins, and the skip is refused.
    now = timezone.now()
    skipped = Annotation.objects.filter(pk=annotation.pk, status=Annotation.Status.DRAFT).update(
        skip_reason=reason.strip(), updated_at=now
    )
    if not skipped:
        raise LockedError("this run was submitted meanwhile: there is nothing to skip")
    annotation.skip_reason, annotation.updated_at = reason.strip(), now
    audit(annotation, actor, "skip", before=before, after=snapshot(annotation))
    return annotation


def _named(label: Label) -> str:
    """A label's mode, with its episode when it is not the first: "Same-File Collision (episode 2)"."""
    return label.code.name if label.instance == 1 else f"{label.code.name} (episode {label.instance})"


def annotation_revise(
    *,
    discussion: Discussion,
    annotation: Annotation,
    actor: AbstractBaseUser,
    version: int,
    no_failure: bool,
    notes: str,
    labels: list[LabelInput],
    flagged: bool | None = None,
    flag_note: str | None = None,
) -> Annotation:
    """An annotator revises their own submitted coding while its run's discussion is open (history
    kept; agreement statistics keep using the first submission). The flag is not revised: it asked
    for this discussion."""
    discussion_require_open(discussion)
    if annotation.assignment.annotator_id != actor.pk or annotation.assignment.run_id != discussion.run_id:
        raise AnnotationError("you can only revise your own coding of this run")
    return annotation_save(
        annotation=annotation,
        actor=actor,
        version=version,
        no_failure=no_failure,
        notes=notes,
        labels=labels,
        revising=True,
    )
