"""Showing an annotator the failure-signature hints of the run they code, and recording that it
happened (docs/annotation.md, "Hints"): the record says which codings may have been helped by them."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from trajectories.access import HINTS_HIDDEN
from trajectories.models import SignatureHit

from ..access import hint_access
from ..errors import AnnotationError
from ..models import Annotation
from .coding import audit, ensure_stored


class HintsHiddenError(AnnotationError):
    """The study (or another study in which the annotator codes the pair) does not show hints now."""


@transaction.atomic
def annotation_hints_show(*, annotation: Annotation, actor: AbstractBaseUser) -> Annotation:
    """The annotator shows the hints of the run they code: allowed only when every study in which they
    code the run (or its twin) shows hints now (HintsHiddenError otherwise). The first time is
    recorded on the annotation (when, and which hits: `hints_seen_at`, `hints_seen`) and in its audit
    trail (action "hints"); showing them again records nothing. The coding's version does not change,
    so an open form keeps saving."""
    assignment = annotation.assignment
    if assignment.annotator_id != actor.pk:
        raise AnnotationError("only the annotator of this coding shows its hints", {"hints": "not yours"})
    if hint_access(actor, assignment.run) == HINTS_HIDDEN:
        raise HintsHiddenError(
            f"{assignment.study} does not show hints for this run now "
            f"(hint policy: {assignment.study.get_hint_policy_display()})",
            {"hints": "hidden"},
        )
    if annotation.hints_seen_at is not None:
        return annotation
    ensure_stored(annotation)
    shown = [
        {"detector": detector, "modes": modes, "position": position, "detector_version": version}
        for detector, modes, position, version in SignatureHit.objects.filter(run_id=assignment.run_id)
        .order_by("position")
        .values_list("detector", "modes", "position", "detector_version")
    ]
    now = timezone.now()
    # First showing wins (two tabs at once record one); the version is not touched.
    first = Annotation.objects.filter(pk=annotation.pk, hints_seen_at__isnull=True).update(
        hints_seen_at=now, hints_seen=shown
    )
    if first:
        annotation.hints_seen_at, annotation.hints_seen = now, shown
        audit(annotation, actor, "hints", before=None, after={"hints": shown})
    else:
        annotation.refresh_from_db(fields=["hints_seen_at", "hints_seen"])
    return annotation
