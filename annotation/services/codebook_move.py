"""A study moves to a new frozen codebook version with a key map (old mode key → new key(s)).

Renames and merges (one target) carry the labels over; a split (several targets) is ambiguous, so
the codings that used the split code are reopened for re-coding, and a final coding that used it
is removed and its run's discussion reopened for the adjudicator. The move is recorded
(StudyCodebookMove, the activity log, the audit trail of every coding it changed); agreement is
then reported per version (analysis/inputs.py: a coding belongs to the version pinned when it
was submitted)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from activity.services import record
from taxonomy.models import Code, Codebook

from ..analysis.store import analysis_changed
from ..errors import AnnotationError, checked_text
from ..models import Annotation, Discussion, FinalLabel, Label, Study, StudyCodebookMove
from .coding import audit, snapshot


def _normalised(key_map: Mapping[str, str | Sequence[str]]) -> dict[str, list[str]]:
    return {
        str(old).strip(): [t.strip() for t in ([targets] if isinstance(targets, str) else targets) if t.strip()]
        for old, targets in key_map.items()
    }


def key_map_problems(*, study: Study, old: Codebook, new: Codebook, key_map: dict[str, list[str]]) -> dict[str, str]:
    """Each bad entry of the map, by key: keys that are not modes of the old version, targets that
    are not modes of the new one, and keys the study's labels use that are neither mapped nor
    modes of the new version."""
    old_modes = set(old.codes.filter(level=Code.Level.MODE).values_list("key", flat=True))
    new_modes = set(new.codes.filter(level=Code.Level.MODE).values_list("key", flat=True))
    problems: dict[str, str] = {}
    for key, targets in key_map.items():
        if key not in old_modes:
            problems[key] = f"'{key}' is not a failure mode of {old.name} v{old.version}"
        elif not targets:
            problems[key] = f"'{key}' maps to nothing"
        elif len(set(targets)) != len(targets):
            problems[key] = f"'{key}' names a target twice"
        else:
            missing = [t for t in targets if t not in new_modes]
            if missing:
                problems[key] = (
                    f"'{key}' maps to {', '.join(repr(t) for t in missing)}, not a failure mode of "
                    f"{new.name} v{new.version}"
                )
    used = Counter(
        Label.objects.filter(annotation__assignment__study=study).values_list("code__key", flat=True)
    ) + Counter(FinalLabel.objects.filter(final__study=study).values_list("code__key", flat=True))
    for key, count in sorted(used.items()):
        if key not in key_map and key not in new_modes:
            problems[key] = (
                f"'{key}' is used by {count} label(s) of this study and is neither mapped nor a failure mode of "
                f"{new.name} v{new.version}"
            )
    return problems


def _carry(labels: list, key_map: dict[str, list[str]], new_codes: dict[str, Code]) -> tuple[list, list]:
    """The labels that carry over (re-pointed, episodes renumbered per new code) and the ones a
    split made ambiguous."""
    kept, ambiguous = [], []
    instances: Counter = Counter()
    for label in sorted(labels, key=lambda lb: (lb.code.position, lb.instance)):
        targets = key_map.get(label.code.key, [label.code.key])
        if len(targets) > 1:
            ambiguous.append(label)
            continue
        code = new_codes[targets[0]]
        instances[code.key] += 1
        label.code, label.instance = code, instances[code.key]
        rejected = label.nearest_rejected
        if rejected is not None:  # a rename or merge follows the map; a split or a gone key is cleared
            target = key_map.get(rejected.key, [rejected.key])
            label.nearest_rejected = new_codes.get(target[0]) if len(target) == 1 else None
        kept.append(label)
    return kept, ambiguous


def _fresh(label, model, **owner):
    """A copy of a label for bulk_create (the old rows are deleted first: episode numbers may swap)."""
    names = [f.attname for f in model._meta.concrete_fields if f.name not in ("id",)]
    values = {name: getattr(label, name) for name in names}
    values.update(
        code_id=label.code.pk, nearest_rejected_id=label.nearest_rejected.pk if label.nearest_rejected else None
    )
    values.update(owner)
    return model(**values)


@transaction.atomic
def study_move_codebook(
    *,
    study: Study,
    codebook: Codebook,
    key_map: Mapping[str, str | Sequence[str]],
    actor: AbstractBaseUser | None,
    note: str = "",
) -> StudyCodebookMove:
    """Re-pin the study to `codebook` (frozen), carrying its labels over with `key_map`. A bad map
    raises AnnotationError naming each bad key (errors: key → message), and nothing is written."""
    checked_text(StudyCodebookMove, "note", note)
    study = Study.objects.select_for_update().select_related("codebook").get(pk=study.pk)
    codebook = Codebook.objects.get(pk=codebook.pk)
    old = study.codebook
    if not codebook.is_frozen:
        raise AnnotationError(
            f"{codebook} is a draft: a study moves to a frozen version only (freeze it first)", {"codebook": "draft"}
        )
    if codebook.pk == old.pk:
        raise AnnotationError(f"the study already pins {codebook}", {"codebook": "same"})
    if study.closed_at is not None:
        raise AnnotationError("the study is closed: its codebook no longer changes", {"study": "closed"})
    mapping = _normalised(key_map)
    problems = key_map_problems(study=study, old=old, new=codebook, key_map=mapping)
    if problems:
        raise AnnotationError("the key map does not fit: " + "; ".join(problems.values()), problems)
    # Unmapped keys keep their code (same key in the new version); only used keys matter below.
    mapping = {key: targets for key, targets in mapping.items() if targets != [key]}
    new_codes = {c.key: c for c in codebook.codes.all()}
    split = {key: targets for key, targets in mapping.items() if len(targets) > 1}

    mapped = reopened = 0
    labels = defaultdict(list)
    for label in Label.objects.filter(annotation__assignment__study=study).select_related("code", "nearest_rejected"):
        labels[label.annotation_id].append(label)
    annotations = Annotation.objects.filter(pk__in=list(labels)).select_related("assignment__annotator").order_by("pk")
    for annotation in annotations:
        before = snapshot(annotation, sorted(labels[annotation.pk], key=lambda lb: (lb.code.position, lb.instance)))
        kept, ambiguous = _carry(labels[annotation.pk], mapping, new_codes)
        annotation.labels.all().delete()
        Label.objects.bulk_create([_fresh(label, Label, annotation_id=annotation.pk) for label in kept])
        mapped += len(kept)
        fields = ["version", "updated_at"]
        annotation.version += 1  # an open tab's next save conflicts and reloads the moved coding
        if ambiguous:
            reopened += 1
            what = "; ".join(
                f"'{label.code.name}' ({label.code.key}) was split into {', '.join(split[label.code.key])}"
                + (f" — your rationale: {label.rationale}" if label.rationale else "")
                for label in ambiguous
            )
            annotation.recode_reason = f"Codebook moved to {codebook.name} v{codebook.version}: {what}. Pick again."
            annotation.status = Annotation.Status.DRAFT
            fields += ["recode_reason", "status"]
        annotation.save(update_fields=fields)
        after = snapshot(annotation, kept)
        if before != after:
            audit(annotation, actor, "codebook-move", before=before, after=after)

    finals = defaultdict(list)
    for label in FinalLabel.objects.filter(final__study=study).select_related("code", "nearest_rejected", "final"):
        finals[label.final_id].append(label)
    removed_finals = []
    for final_id, final_labels in finals.items():
        was = [{"code": label.code.key, **label.content()} for label in final_labels]
        kept, ambiguous = _carry(final_labels, mapping, new_codes)
        final = final_labels[0].final
        if ambiguous:  # the gold coding is ambiguous too: removed (kept in the activity log), discussion reopened
            removed_finals.append({"run_id": final.run_id, "provenance": final.provenance, "labels": was})
            Discussion.objects.filter(study=study, run_id=final.run_id).update(
                status=Discussion.Status.OPEN, resolved_at=None
            )
            final.delete()
            continue
        FinalLabel.objects.filter(final_id=final_id).delete()
        FinalLabel.objects.bulk_create([_fresh(label, FinalLabel, final_id=final_id) for label in kept])

    study.codebook = codebook
    study.save(update_fields=["codebook"], repin=True)
    move = StudyCodebookMove.objects.create(
        study=study, from_codebook=old, to_codebook=codebook, key_map=mapping, actor=actor, note=note.strip(),
        mapped_labels=mapped, reopened=reopened,
    )  # fmt: skip
    analysis_changed(study_id=study.pk)
    record(
        "study.codebook_move",
        f"{study} moved from {old.name} v{old.version} to v{codebook.version}: {mapped} label(s) carried over, "
        f"{reopened} coding(s) reopened for re-coding, {len(removed_finals)} final coding(s) removed",
        actor=actor, study_id=study.pk, codebook_id=codebook.pk, from_codebook_id=old.pk, key_map=mapping,
        removed_finals=removed_finals,
    )  # fmt: skip
    return move
