"""When both codings of a run are submitted: agree → final labels; disagree → a discussion."""

from __future__ import annotations

from django.db import transaction

from .agreement import masi_distance
from .models import Annotation, Discussion, Final, FinalLabel, Study


def mode_keys(annotation: Annotation) -> frozenset[str]:
    return frozenset(annotation.labels.values_list("code__key", flat=True))


def run_annotations(*, study: Study, run_id: int) -> list[Annotation]:
    return list(
        Annotation.objects.filter(assignment__study=study, assignment__run_id=run_id)
        .select_related("assignment__annotator")
        .order_by("assignment__slot")
    )


def final_from_annotations(
    *, study: Study, run_id: int, annotations: list[Annotation], provenance: str, actor=None
) -> Final:
    """Final labels = the (identical) mode set, each with both annotators' rationales and evidence."""
    final = Final.objects.create(
        study=study,
        run_id=run_id,
        provenance=provenance,
        decided_by=actor,
        no_failure=not any(mode_keys(a) for a in annotations),
    )
    merged: dict[int, FinalLabel] = {}
    for annotation in annotations:
        who = annotation.assignment.annotator.get_username()
        for label in annotation.labels.all():
            entry = merged.setdefault(label.code_id, FinalLabel(final=final, code_id=label.code_id, evidence=[]))
            entry.rationale = (entry.rationale + "\n\n" if entry.rationale else "") + f"[{who}] {label.rationale}"
            entry.evidence = entry.evidence + [e for e in label.evidence if e not in entry.evidence]
    FinalLabel.objects.bulk_create(merged.values())
    return final


@transaction.atomic
def run_reconcile(*, study: Study, run_id: int) -> Final | Discussion | None:
    """Idempotent: does nothing until both codings are in, or once the run is reconciled."""
    annotations = run_annotations(study=study, run_id=run_id)
    if len(annotations) != 2 or not all(a.is_submitted for a in annotations):
        return None
    existing = Final.objects.filter(study=study, run_id=run_id).first()
    if existing:
        return existing
    discussion = Discussion.objects.filter(study=study, run_id=run_id).first()
    if discussion:
        return discussion
    first, second = (mode_keys(a) for a in annotations)
    if first == second:
        return final_from_annotations(
            study=study, run_id=run_id, annotations=annotations, provenance=Final.Provenance.AGREED
        )
    return Discussion.objects.create(study=study, run_id=run_id, agreement=1.0 - masi_distance(first, second))
