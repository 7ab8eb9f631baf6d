"""Writes that review the k codings of a run (the study's coders per run): reconcile (agree → final labels, disagree → a
discussion), the discussion (comments, consensus, escalation) and the senior adjudicator's ruling.

The flow: coding.annotation_submit → run_reconcile → (FinalCoding | Discussion) →
discussion_consensus | discussion_escalate → adjudicate.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from activity.services import record
from common.text import LONG_TEXT, TextError, text_check
from taxonomy.models import Code

from ..analysis.agreement import masi_distance
from ..analysis.store import analysis_changed
from ..errors import AnnotationError, checked_text
from ..models import MAX_INSTANCES, AdvantageTag, Annotation, Comment, Discussion, FinalCoding, FinalLabel, Study
from ..selectors.review import participants, run_annotations
from .anchors import ANCHOR_MAX, anchor_problems, clean_anchors


def mode_keys(annotation: Annotation) -> frozenset[str]:
    return frozenset(annotation.labels.values_list("code__key", flat=True))


def episode_counts(annotation: Annotation) -> Counter[str]:
    return Counter(annotation.labels.values_list("code__key", flat=True))


def final_from_annotations(
    *, study: Study, run_id: int, annotations: list[Annotation], provenance: str, actor=None
) -> FinalCoding:
    """Final labels = the (identical) mode set, each instance with every annotator's rationale and
    evidence (merged_labels)."""
    final = FinalCoding.objects.create(
        study=study,
        run_id=run_id,
        provenance=provenance,
        decided_by=actor,
        no_failure=not any(mode_keys(a) for a in annotations),
    )
    merged = merged_labels(annotations)
    analysis_changed(study_id=study.pk)
    FinalLabel.objects.bulk_create(
        [
            FinalLabel(
                final=final, code_id=code_id, instance=instance, provenance=provenance, decided_by=actor, **fields
            )
            for (code_id, instance), fields in merged.items()
        ]
    )
    return final


TEXT_FIELDS = ("rationale", "realized_consequence", "rejection_reason")


def merged_labels(annotations: list[Annotation]) -> dict[tuple[int, int], dict]:
    """Per (mode, instance), every field the annotators gave it: a mode's instance k merges each
    annotator's k-th episode of it (agreed and consensus finals: every coding has the same count);
    texts side by side, each marked with who wrote it; anchors united; the nearest rejected label
    if they name the same one (else the first named, the other kept in the rejection reason);
    episode id and role as the first gave them."""
    merged: dict[tuple[int, int], dict] = {}
    for annotation in annotations:
        who = annotation.assignment.annotator.get_username()
        for label in annotation.labels.select_related("nearest_rejected").order_by("code__position", "instance"):
            entry = merged.setdefault(
                (label.code_id, label.instance),
                {**dict.fromkeys(TEXT_FIELDS, ""), "evidence": [], "contrast": [], "spans": [],
                 "nearest_rejected": None, "episode_id": "", "comparative_role": ""},
            )  # fmt: skip
            for name in TEXT_FIELDS:
                text = getattr(label, name).strip()
                if text:
                    entry[name] = (entry[name] + "\n\n" if entry[name] else "") + f"[{who}] {text}"
            for name in ("evidence", "contrast", "spans"):
                entry[name] = entry[name] + [a for a in getattr(label, name) if a not in entry[name]]
            if label.nearest_rejected is not None:
                if entry["nearest_rejected"] is None:
                    entry["nearest_rejected"] = label.nearest_rejected
                elif entry["nearest_rejected"] != label.nearest_rejected:
                    entry["rejection_reason"] += f"\n\n[{who}] nearest rejected: {label.nearest_rejected.name}"
            for name in ("episode_id", "comparative_role"):
                entry[name] = entry[name] or getattr(label, name)
    return merged


@transaction.atomic
def run_reconcile(*, study: Study, run_id: int) -> FinalCoding | Discussion | None:
    """Idempotent: does nothing until all k codings are in, or once the run is reconciled."""
    annotations = run_annotations(study=study, run_id=run_id)
    if len(annotations) < study.coders_per_run or not all(a.is_submitted for a in annotations):
        return None
    existing = FinalCoding.objects.filter(study=study, run_id=run_id).first()
    if existing:
        return existing
    discussion = Discussion.objects.filter(study=study, run_id=run_id).first()
    if discussion:
        return discussion
    sets = [mode_keys(a) for a in annotations]
    counts = [episode_counts(a) for a in annotations]
    first = sets[0]
    agree = all(s == first for s in sets)
    # Agreement is on the modes and on how many episodes of each (the instances Table 3 counts).
    differ = count_differences(counts) if agree else ""
    flags = [a for a in annotations if a.flagged]
    if agree and not differ and not flags:
        final = final_from_annotations(
            study=study, run_id=run_id, annotations=annotations, provenance=FinalCoding.Provenance.AGREED
        )
        said = f"{'both' if len(sets) == 2 else f'all {len(sets)}'} codings agree: {_codes(first)}"
        record("final.agreed", said, study_id=study.pk, run_id=run_id, modes=sorted(first))
        return final
    # Agreement: the mean over the run's coder pairs of 1 − MASI distance (one pair for k = 2).
    pairs = [(a, b) for i, a in enumerate(sets) for b in sets[i + 1 :]]
    agreement = sum(1.0 - masi_distance(a, b) for a, b in pairs) / len(pairs)
    discussion = Discussion.objects.create(study=study, run_id=run_id, agreement=agreement)
    if not agree:
        why = f"the codings differ ({' / '.join(_codes(s) for s in sets)})"
    else:
        why = f"the codings agree on {_codes(first)}" + (f" but not on {differ}" if differ else "")
    for flagged in flags:  # a flag asks for a discussion whatever the codings say; its note opens it
        note = f": {flagged.flag_note}" if flagged.flag_note else ""
        why += f"; flagged by {flagged.assignment.annotator.get_username()}{note}"
        Comment.objects.create(discussion=discussion, author=flagged.assignment.annotator,
                               text=f"Flagged for discussion{note or '.'}")  # fmt: skip
    record("discussion.open", f"{why}: discussion opened", study_id=study.pk, run_id=run_id,
           agreement=discussion.agreement, flagged=[a.assignment.annotator.get_username() for a in flags])  # fmt: skip
    return discussion


def _codes(keys) -> str:
    return ", ".join(sorted(keys)) or "no failure mode"


def count_differences(counts: list[Counter[str]]) -> str:
    """The modes whose episode counts differ between codings that all picked them, said as "episode
    counts (lossy-handoff 2 / 1)"; empty when every count agrees."""
    keys = sorted(set().union(*counts))
    differ = [key for key in keys if all(c[key] for c in counts) and len({c[key] for c in counts}) > 1]
    if not differ:
        return ""
    return "episode counts (" + ", ".join(f"{key} {' / '.join(str(c[key]) for c in counts)}" for key in differ) + ")"


# -- discussion and adjudication --------------------------------------------------------


def discussion_require_open(discussion: Discussion) -> None:
    if discussion.status != Discussion.Status.OPEN:
        raise AnnotationError(f"this discussion is {discussion.get_status_display().lower()}")


def discussion_comment(*, discussion: Discussion, author: AbstractBaseUser, text: str) -> Comment:
    if author.pk not in participants(discussion) and author.pk != discussion.study.adjudicator_id:
        raise AnnotationError("only the run's annotators and the adjudicator take part in a discussion")
    if not text.strip():
        raise AnnotationError("the comment is empty", {"text": "empty"})
    checked_text(Comment, "text", text, field="comment")
    return Comment.objects.create(discussion=discussion, author=author, text=text.strip())


@transaction.atomic
def discussion_consensus(*, discussion: Discussion, actor: AbstractBaseUser) -> FinalCoding:
    discussion_require_open(discussion)
    if actor.pk not in participants(discussion):
        raise AnnotationError("only the run's annotators can resolve by consensus")
    annotations = run_annotations(study=discussion.study, run_id=discussion.run_id)
    sets = [mode_keys(a) for a in annotations]
    if len(sets) < discussion.study.coders_per_run or any(s != sets[0] for s in sets):
        raise AnnotationError("the codings still differ: revise them until they match, or escalate")
    differ = count_differences([episode_counts(a) for a in annotations])
    if differ:
        raise AnnotationError(f"the codings still differ on {differ}: revise them until they match, or escalate")
    final = final_from_annotations(
        study=discussion.study,
        run_id=discussion.run_id,
        annotations=annotations,
        provenance=FinalCoding.Provenance.CONSENSUS,
        actor=actor,
    )
    discussion.status = Discussion.Status.CONSENSUS
    discussion.resolved_at = timezone.now()
    discussion.save(update_fields=["status", "resolved_at"])
    record("final.consensus", f"consensus after discussion: {_codes(sets[0])}", actor=actor,
           study_id=discussion.study_id, run_id=discussion.run_id, modes=sorted(sets[0]))  # fmt: skip
    return final


def discussion_escalate(*, discussion: Discussion, actor: AbstractBaseUser) -> Discussion:
    discussion_require_open(discussion)
    if actor.pk not in participants(discussion):
        raise AnnotationError("only the run's annotators can escalate")
    discussion.status = Discussion.Status.ESCALATED
    discussion.escalated_at = timezone.now()
    discussion.escalated_by = actor
    discussion.save(update_fields=["status", "escalated_at", "escalated_by"])
    record("discussion.escalate", "escalated to the adjudicator", actor=actor, study_id=discussion.study_id,
           run_id=discussion.run_id)  # fmt: skip
    return discussion


@dataclass
class Ruling:
    """The adjudicator's final word on one mode: a rationale (required) and, when given, the
    realized consequence and the evidence (concurrent run) and contrast (sequential run) anchors."""

    code_id: int
    rationale: str
    realized_consequence: str = ""
    evidence: list[str] = field(default_factory=list)
    contrast: list[str] = field(default_factory=list)
    # How many episodes of the mode the run shows. None: the count every annotator who picked the mode
    # gave (1 if none did); it must be given when they differ.
    episodes: int | None = None


@transaction.atomic
def adjudicate(
    *, discussion: Discussion, actor: AbstractBaseUser, rulings: list[Ruling], no_failure: bool = False, note: str = ""
) -> FinalCoding:
    """The senior adjudicator picks the final modes, each with a rationale, and may give its realized
    consequence and anchors (which must resolve to a file and line of the pair, as the annotators' do)."""
    if actor.pk != discussion.study.adjudicator_id:
        raise AnnotationError("only the study's adjudicator can adjudicate")
    # The status as stored, row locked: of two rulings sent at once (two tabs), the second sees the first's.
    discussion.status = Discussion.objects.select_for_update().values_list("status", flat=True).get(pk=discussion.pk)
    if discussion.status in (Discussion.Status.CONSENSUS, Discussion.Status.ADJUDICATED):
        raise AnnotationError(
            f"this discussion is {discussion.get_status_display().lower()}: its final labels are recorded"
        )
    if discussion.status != Discussion.Status.ESCALATED:
        raise AnnotationError("only escalated discussions are adjudicated")
    _rulings_text_check(rulings, note)
    mode_rows = Code.objects.filter(codebook=discussion.study.codebook, level=Code.Level.MODE)
    modes = dict(mode_rows.values_list("pk", "name"))
    keys = dict(mode_rows.values_list("pk", "key"))
    errors = {}
    for ruling in rulings:
        if sum(r.code_id == ruling.code_id for r in rulings) > 1:
            errors[f"code-{ruling.code_id}"] = "ruled twice"
        elif ruling.code_id not in modes:
            errors[f"code-{ruling.code_id}"] = "not a failure mode of this study's codebook"
        elif not ruling.rationale.strip():
            errors[f"rationale-{ruling.code_id}"] = f"'{modes[ruling.code_id]}' needs a rationale"
    annotations = run_annotations(study=discussion.study, run_id=discussion.run_id)
    proposed = [episode_counts(a) for a in annotations]
    episodes = {}
    for ruling in rulings:
        given = {c[keys[ruling.code_id]] for c in proposed} - {0} if ruling.code_id in modes else set()
        if ruling.episodes is None and len(given) > 1:
            errors[f"episodes-{ruling.code_id}"] = (
                f"'{modes[ruling.code_id]}': the annotators counted {' / '.join(map(str, sorted(given)))} "
                "episodes; say how many"
            )
        elif ruling.episodes is not None and not 1 <= ruling.episodes <= MAX_INSTANCES:
            errors[f"episodes-{ruling.code_id}"] = (
                f"'{modes.get(ruling.code_id, ruling.code_id)}': episodes must be between 1 and {MAX_INSTANCES}"
            )
        else:
            episodes[ruling.code_id] = ruling.episodes if ruling.episodes is not None else (min(given) if given else 1)
    if no_failure and rulings:
        errors["no_failure"] = "'no failure mode' excludes picking modes"
    if not rulings and not no_failure:
        errors["codes"] = "pick the final modes, or 'no failure mode'"
    rulings = [
        replace(r, evidence=clean_anchors(r.evidence), contrast=clean_anchors(r.contrast))
        for r in rulings
        if r.code_id in modes
    ]
    # As at submit: an anchor into a run imported before files were kept cannot be checked, and passes.
    for key, problems in anchor_problems(run=discussion.run, labels=rulings, unchecked=False).items():
        name, _, code_id = key.partition("-")
        errors[key] = f"'{modes[int(code_id)]}' {name}: " + "; ".join(problems)
    if errors:
        raise AnnotationError("; ".join(f"{k}: {v}" for k, v in errors.items()), errors)
    analysis_changed(study_id=discussion.study_id)
    final = FinalCoding.objects.create(
        study=discussion.study,
        run_id=discussion.run_id,
        provenance=FinalCoding.Provenance.ADJUDICATED,
        decided_by=actor,
        no_failure=no_failure,
        note=note.strip(),
    )
    # The adjudicator's rationale decides, and the number of episodes; what the annotators recorded
    # for each of those episodes is kept. The consequence and anchors the adjudicator gives replace
    # those of the mode's first episode only: the others are separate episodes, with their own
    # evidence (docs/agreement.md).
    recorded = merged_labels(annotations)
    FinalLabel.objects.bulk_create(
        [
            FinalLabel(
                final=final,
                code_id=r.code_id,
                instance=instance,
                provenance=FinalCoding.Provenance.ADJUDICATED,
                decided_by=actor,
                **_kept_spans(
                    {**fields, **(_ruled_fields(r) if instance == 1 else {}), "rationale": r.rationale.strip()}
                ),
            )
            for r in rulings
            for instance, fields in ((k, recorded.get((r.code_id, k), {})) for k in range(1, episodes[r.code_id] + 1))
        ]
    )
    discussion.status = Discussion.Status.ADJUDICATED
    discussion.resolved_at = timezone.now()
    discussion.save(update_fields=["status", "resolved_at"])
    record("final.adjudicated", f"adjudicated: {_codes(keys[r.code_id] for r in rulings)}", actor=actor,
           study_id=discussion.study_id, run_id=discussion.run_id, no_failure=no_failure, note=note.strip(),
           rulings=[{"mode": keys[r.code_id], "rationale": r.rationale.strip(), "episodes": episodes[r.code_id],
                     **_ruled_fields(r)} for r in rulings])  # fmt: skip
    return final


def _rulings_text_check(rulings: list[Ruling], note: str) -> None:
    """Refuse text no field can hold (common.text), naming the ruling form's fields, before anything else
    reads it (an anchor is looked up as a path)."""
    errors = {}
    texts = [("note", note)]
    for r in rulings:
        texts += [(f"rationale-{r.code_id}", r.rationale), (f"consequence-{r.code_id}", r.realized_consequence)]
        texts += [(f"{name}-{r.code_id}", anchor) for name in ("evidence", "contrast") for anchor in getattr(r, name)]
    for key, value in texts:
        limit = ANCHOR_MAX if key.startswith(("evidence", "contrast")) else LONG_TEXT
        try:
            text_check(value, field=key, max_length=limit)
        except TextError as exc:
            errors.setdefault(key, exc.problem)
    if errors:
        raise AnnotationError("; ".join(f"{k}: {v}" for k, v in errors.items()), errors)


def _kept_spans(fields: dict) -> dict:
    """The recorded spans whose events are still cited once the adjudicator's anchors replaced the recorded ones."""
    if fields.get("spans"):
        fields["spans"] = [s for s in fields["spans"] if s["anchor"] in fields.get(s["field"], [])]
    return fields


def _ruled_fields(ruling: Ruling) -> dict:
    """The fields the adjudicator gave besides the rationale (an empty one keeps what was recorded)."""
    given = {
        "realized_consequence": ruling.realized_consequence.strip(),
        "evidence": ruling.evidence,
        "contrast": ruling.contrast,
    }
    return {name: value for name, value in given.items() if value}


@transaction.atomic
def advantage_tag(*, study: Study, run_id: int, mechanism: str, note: str, actor: AbstractBaseUser) -> AdvantageTag:
    """Tag an RQ4 pair (concurrency helped) with its mechanism; every (re)tag is logged."""
    checked_text(AdvantageTag, "note", note)
    tag, _ = AdvantageTag.objects.update_or_create(
        study=study, run_id=run_id, defaults={"mechanism": mechanism, "note": note, "tagged_by": actor}
    )
    record("rq4.tag", f"tagged '{mechanism}'", actor=actor, study_id=study.pk, run_id=run_id, note=note)
    return tag
