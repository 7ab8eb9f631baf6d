"""Pilot open coding: free-text codes on a pilot sample, grouped and promoted into a new
draft codebook version. The OpenCode → Code mapping is kept (`OpenCode.promoted_to`)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from taxonomy.models import Codebook
from taxonomy.services import codebook_create_from_specs, codebook_specs
from taxonomy.tree import CodeSpec, TreeError, slugify_key
from trajectories.selectors import paired_concurrent_runs

from ..errors import AnnotationError
from ..models import OpenCode, PilotRound
from ..stats.assignment import pilot_sample


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
    parent_key: str  # a subcategory of the base codebook (or one promoted in the same call)
    level: str = "mode"
    definition: str = ""


@transaction.atomic
def pilot_promote(
    *, pilot: PilotRound, promotions: list[Promotion], user: AbstractBaseUser | None = None, codebook_name: str = ""
) -> Codebook:
    """Create a new draft codebook: the base codebook's codes plus one code per promotion."""
    base = pilot.base_codebook
    specs = codebook_specs(base) if base else []
    known = {spec.key for spec in specs}
    for promotion in promotions:
        key = slugify_key(promotion.name)
        if not key or key in known:
            raise AnnotationError(f"code {promotion.name!r} would repeat key {key!r}")
        known.add(key)
        specs.append(
            CodeSpec(
                key=key,
                level=promotion.level,
                name=promotion.name,
                parent_key=promotion.parent_key,
                definition=promotion.definition,
            )
        )
    name = codebook_name or (base.name if base else f"Pilot: {pilot.name}")
    latest = Codebook.objects.filter(name=name).order_by("-version").first()
    try:
        codebook = codebook_create_from_specs(
            name=name,
            version=(latest.version + 1) if latest else 1,
            specs=specs,
            parent=base,
            user=user,
            description=base.description if base else "",
            change_log=f"Promoted {len(promotions)} open code group(s) from pilot round '{pilot.name}'.",
        )
    except TreeError as exc:
        raise AnnotationError(str(exc)) from exc
    for promotion in promotions:
        code = codebook.codes.get(key=slugify_key(promotion.name))
        for open_code in pilot.open_codes.all():
            if open_code.group_key in promotion.group_keys:
                open_code.promoted_to = code
                open_code.save(update_fields=["promoted_to"])
    pilot.result_codebook = codebook
    pilot.save(update_fields=["result_codebook"])
    return codebook
