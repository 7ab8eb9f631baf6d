"""Pilot open coding: free-text codes on a pilot sample, grouped and promoted into the pilot's
draft codebook version (one draft that every promotion adds to). The OpenCode → Code mapping is
kept (`OpenCode.promoted_to`)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from taxonomy.models import Codebook, OpenDraftError
from taxonomy.services import code_create, codebook_create_from_specs, codebook_new_version, codebook_specs
from taxonomy.tree import TreeError, slugify_key
from trajectories.selectors import paired_concurrent_runs

from ..assignment import pilot_sample
from ..errors import AnnotationError, checked_text
from ..models import OpenCode, PilotRound


@transaction.atomic
def pilot_create(
    *,
    name: str,
    annotators: list[AbstractBaseUser],
    base_codebook: Codebook | None = None,
    run_ids: list[int] | None = None,
    size: int = 50,
    seed: int = 0,
) -> PilotRound:
    if len({a.pk for a in annotators}) != 2:
        raise AnnotationError("a pilot round has two annotators")
    pilot = PilotRound.objects.create(name=name, base_codebook=base_codebook)
    pilot.annotators.set(annotators)
    if run_ids is None:
        run_ids = pilot_sample(list(paired_concurrent_runs().values_list("pk", flat=True)), size=size, seed=seed)
    pilot.runs.set(run_ids)
    return pilot


@transaction.atomic
def open_codes_set(
    *, pilot: PilotRound, run_id: int, annotator: AbstractBaseUser, texts: list[str], memo: str = ""
) -> list[OpenCode]:
    """Replace this annotator's open codes for one run (one code per non-empty line)."""
    if not pilot.annotators.filter(pk=annotator.pk).exists():
        raise AnnotationError("you are not an annotator of this pilot round")
    if not pilot.runs.filter(pk=run_id).exists():
        raise AnnotationError("that run is not in the pilot sample")
    if OpenCode.objects.filter(pilot=pilot, run_id=run_id, annotator=annotator, promoted_to__isnull=False).exists():
        raise AnnotationError("these codes were already promoted into a codebook; they can no longer change")
    checked_text(OpenCode, "memo", memo)
    for text in texts:
        checked_text(OpenCode, "text", text, field="codes")
    OpenCode.objects.filter(pilot=pilot, run_id=run_id, annotator=annotator).delete()
    cleaned = []
    for text in texts:
        text = " ".join(text.split())[:200]
        if text and text.lower() not in {c.lower() for c in cleaned}:
            cleaned.append(text)
    return OpenCode.objects.bulk_create(
        [OpenCode(pilot=pilot, run_id=run_id, annotator=annotator, text=text, memo=memo) for text in cleaned]
    )


@dataclass
class Promotion:
    group_keys: list[str]  # normalised texts merged into one code
    name: str
    parent_key: str  # a category or subcategory of the pilot's draft (or one promoted before it)
    level: str = "mode"
    definition: str = ""


@transaction.atomic
def pilot_open_draft(*, pilot: PilotRound, user: AbstractBaseUser | None = None, codebook_name: str = "") -> Codebook:
    """The pilot's open draft, which every promotion adds to: made the first time (from the base
    codebook, or empty for a pilot without one), and made anew from the last result if that was
    frozen meanwhile (so nothing promoted before is lost). A base codebook whose next version is already being
    drafted (by hand or by another pilot) lends that draft: one next version, not two."""
    pilot = PilotRound.objects.select_for_update().get(pk=pilot.pk)  # two promotions at once make one draft
    draft = pilot.result_codebook
    if draft is not None and not draft.is_frozen:
        return draft
    change_log = f"Open codes promoted from pilot round '{pilot.name}'."
    origin = draft or pilot.base_codebook
    if origin is not None and not codebook_name:
        try:
            draft = codebook_new_version(codebook=origin, change_log=change_log, user=user)
        except OpenDraftError as exc:
            # the codebook's next version is already being drafted (by hand or by another pilot): this pilot's
            # codes go there too, not into a second draft claiming the same next version
            draft = exc.draft
    else:
        name = codebook_name or f"Pilot: {pilot.name}"
        latest = Codebook.objects.filter(name=name).order_by("-version").first()
        draft = codebook_create_from_specs(
            name=name,
            version=(latest.version + 1) if latest else 1,
            specs=codebook_specs(origin) if origin else [],
            parent=origin,
            user=user,
            description=origin.description if origin else "",
            change_log=change_log,
        )
    pilot.result_codebook = draft
    pilot.save(update_fields=["result_codebook"])
    return draft


@transaction.atomic
def pilot_promote(
    *, pilot: PilotRound, promotions: list[Promotion], user: AbstractBaseUser | None = None, codebook_name: str = ""
) -> Codebook:
    """Add one code per promotion to the pilot's open draft (pilot_open_draft): promotions
    accumulate in one draft version, and every promoted open code keeps a link to its code. A bad
    promotion (repeated key, unknown parent) stores none of them."""
    draft = pilot_open_draft(pilot=pilot, user=user, codebook_name=codebook_name)
    for promotion in promotions:
        key = slugify_key(promotion.name)
        if not key or draft.codes.filter(key=key).exists():
            raise AnnotationError(f"code {promotion.name!r} would repeat key {key!r}")
        try:
            code = code_create(
                codebook=draft,
                level=promotion.level,
                name=promotion.name,
                key=key,
                parent_key=promotion.parent_key,
                definition=promotion.definition,
                user=user,
            )
        except TreeError as exc:
            raise AnnotationError(f"code {promotion.name!r}: {exc}") from exc
        groups = set(promotion.group_keys)
        promoted = [c for c in pilot.open_codes.filter(promoted_to__isnull=True) if c.group_key in groups]
        for open_code in promoted:
            open_code.promoted_to = code
        OpenCode.objects.bulk_update(promoted, ["promoted_to"])
    return draft
