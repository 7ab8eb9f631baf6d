"""Loading the study's own published records (`annotation.md`, parsed by annotation_md.py) as an
annotator's submitted coding or as a run's final labels."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from activity.services import record as log
from taxonomy.models import Code
from trajectories.benchmarks import canonical_benchmark
from trajectories.models import Run

from ..errors import AnnotationError
from ..models import Assignment, FinalCoding, FinalLabel, PublishedRecord, Study
from ..selectors.queue import annotation_for
from .coding import LabelInput, anchor_problems, annotation_save, annotation_submit, numbered
from .statistics import statistics_changed
from .studies import assignment_add


@dataclass
class PublishedImportResult:
    source: str
    run_id: int | None = None
    imported: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # labels not in the codebook: reported, kept in notes
    unresolved: list[str] = field(default_factory=list)  # anchors that cite no stored file and line: reported, kept
    contradictions: list[str] = field(default_factory=list)  # header outcomes the imported runs contradict
    error: str = ""


AGENT_ALIASES = {"codex": "Codex", "claude": "Claude Code", "kimi": "Kimi Code"}


def _published_run(study: Study, record, benchmark_hint: str) -> Run:
    task_id = record.header.get("task_id") or record.pair_id.split("/")[0]
    agent_raw = record.header.get("agent") or record.pair_id.split("/")[-1]
    agent = AGENT_ALIASES.get(agent_raw, agent_raw)
    runs = study.runs.filter(task__external_id=task_id, agent__name=agent, mode=Run.Mode.CONCURRENT)
    if benchmark_hint and runs.count() > 1:
        runs = runs.filter(task__benchmark__name=canonical_benchmark(benchmark_hint))
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
    if annotator is not None and not study.annotators.filter(pk=annotator.pk).exists():
        raise AnnotationError(
            f"{record.name}: {annotator.get_username()} is not an annotator of {study}; published codings are "
            "loaded as one of its annotators' (or --as-gold)"
        )
    run = _published_run(study, record, benchmark_hint)
    result.run_id = run.pk
    result.contradictions = _contradictions(record, run)
    PublishedRecord.objects.create(
        study=study, run=run, name=record.name[:500], text=record.text, header=record.header, imported_by=actor
    )
    codes = {c.name.lower(): c for c in Code.objects.filter(codebook=study.codebook).select_related("parent__parent")}
    rejected_ids = {c.name.lower(): c.pk for c in codes.values()}
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
        # A second block of one mode is its next episode (instance), as the study counts them.
        episode = 1 + sum(c.pk == code.pk for c, _ in picked)
        picked.append((code, failure))
        result.imported.append(code.name if episode == 1 else f"{code.name} (episode {episode})")
    note = "Imported from " + record.name
    if result.unknown:
        note += "\nLabels not in the codebook: " + "; ".join(result.unknown)
    inputs = [LabelInput(code_id=code.pk, **_recorded(failure, rejected_ids)) for code, failure in picked]
    if annotator is None:
        if FinalCoding.objects.filter(study=study, run=run).exists():
            raise AnnotationError(f"{record.name}: run {run.pk} already has final labels in {study}")
        statistics_changed(study_id=study.pk)
        final = FinalCoding.objects.create(
            study=study,
            run=run,
            provenance=FinalCoding.Provenance.IMPORTED,
            no_failure=not picked and not result.unknown,
            note=note,
            decided_by=actor,
        )
        log(
            "published.gold",
            f"{record.name}: the study's published labels loaded as final labels",
            actor=actor,
            study_id=study.pk,
            run_id=run.pk,
            labels=result.imported,
            unknown=result.unknown,
        )
        FinalLabel.objects.bulk_create(
            [
                FinalLabel(
                    final=final,
                    instance=instance,
                    provenance=FinalCoding.Provenance.IMPORTED,
                    decided_by=actor,
                    **asdict(label),
                )
                for instance, label in numbered(inputs)
            ]
        )
        problems = anchor_problems(run=run, labels=inputs)
        result.unresolved = [message for messages in problems.values() for message in messages]
        return result
    assignment = Assignment.objects.filter(study=study, run=run, annotator=annotator).first()
    if assignment is None:
        assignment = assignment_add(study=study, run=run, annotator=annotator)
    annotation = annotation_for(assignment=assignment)
    if annotation.is_submitted:
        raise AnnotationError(f"{record.name}: {annotator} has already submitted run {run.pk}")
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
    # The study's own record is kept as published; anchors that do not resolve in the imported
    # files (a run imported from other logs than the record cites) are reported, not refused.
    problems = anchor_problems(run=run, labels=inputs)
    result.unresolved = [message for messages in problems.values() for message in messages]
    annotation_submit(annotation=annotation, actor=actor or annotator, version=annotation.version, check_anchors=False)
    log("published.coding", f"{record.name}: the study's published labels loaded as "
           f"{annotator.get_username()}'s submitted coding", actor=actor, study_id=study.pk, run_id=run.pk,
           labels=result.imported, unknown=result.unknown, unresolved=result.unresolved)  # fmt: skip
    return result


OUTCOME_KEYS = (("parallel_solution_passed", "concurrent"), ("serial_solution_passed", "sequential"))


def _contradictions(record, run: Run) -> list[str]:
    """Header outcomes (`parallel_solution_passed: true` …) that the imported runs contradict."""
    from trajectories.selectors import run_twin

    sides = {"concurrent": run, "sequential": run_twin(run=run)}
    found = []
    for key, mode in OUTCOME_KEYS:
        stated = {"true": True, "false": False}.get(record.header.get(key, "").strip().lower())
        side = sides[mode]
        if stated is None or side is None or side.task_pass is None:
            continue
        if stated != side.task_pass:
            found.append(
                f"{record.name}: field '{key}' says {str(stated).lower()}, but the imported {mode} run #{side.pk} "
                f"{'passed' if side.task_pass else 'failed'}"
            )
    return found


def _recorded(failure, rejected_ids: dict[str, int]) -> dict:
    """Every field of a published failure block, as a label's fields."""
    fields = failure.fields
    return {
        "rationale": fields.get("reasoning", ""),
        "realized_consequence": fields.get("realized_consequence", ""),
        "evidence": failure.anchors("parallel_evidence"),
        "contrast": failure.anchors("serial_contrast"),
        "nearest_rejected_id": rejected_ids.get(fields.get("nearest_rejected_label", "").lower()),
        "rejection_reason": fields.get("rejection_reason", ""),
        "episode_id": fields.get("episode_id", ""),
        "comparative_role": fields.get("comparative_role", ""),
    }


@transaction.atomic
def published_reviews_import(*, study: Study, run_id: int, files: dict[str, str], actor=None) -> list[str]:
    """Keep the structured reviews beside a pair's annotation.md (`review.json`, `advantage-review.json`,
    name -> text) whole with its run, and say what they hold: the candidate decisions and whether the
    retained ones are the record's failure modes."""
    from ..review_json import parse_advantage_review, parse_review

    run = Run.objects.get(pk=run_id)
    said = []
    for name, text in files.items():
        if name.endswith("advantage-review.json"):
            header = {"kind": "advantage-review", **parse_advantage_review(text, name=name)}
            said.append(f"{name}: advantage decision {header.get('decision')!r}")
        else:
            review = parse_review(text, name=name)
            retained = sorted(c.third_label for c in review.retained)
            header = {"kind": "review", "candidates": len(review.candidates), "retained": retained,
                      "decisions": [vars(c) for c in review.candidates]}  # fmt: skip
            said.append(f"{name}: {len(review.candidates)} candidate decisions, {len(retained)} retained"
                        f"{' (' + ', '.join(retained) + ')' if retained else ''}")  # fmt: skip
        PublishedRecord.objects.create(
            study=study, run=run, name=name[:500], text=text, header=header, imported_by=actor
        )
    log("published.reviews", "; ".join(said), actor=actor, study_id=study.pk, run_id=run.pk)
    return said
