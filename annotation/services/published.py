"""Loading the study's own published records — each pair's `annotation.md` with the `review.json`
and `advantage-review.json` beside it (read by published_files.py, ORM-free) — as one annotator's
submitted codings or as final labels. All or nothing: every record is checked before anything is
stored, and a failure stores nothing."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from activity.services import record as log
from taxonomy.models import Code
from trajectories.benchmarks import canonical_benchmark
from trajectories.models import Run
from trajectories.selectors import run_twin

from ..analysis.store import analysis_changed
from ..errors import AnnotationError
from ..models import Assignment, FinalCoding, FinalLabel, PublishedRecord, Study
from ..published_files import PublishedPair
from ..review_json import advantage_verdict, review_from_data
from ..selectors.queue import annotation_for
from .coding import LabelInput, anchor_problems, annotation_save, annotation_submit, numbered
from .studies import assignment_add


@dataclass
class PublishedImportResult:
    source: str
    run_id: int | None = None
    imported: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # labels not in the codebook: reported, kept in notes
    unresolved: list[str] = field(default_factory=list)  # anchors that cite no stored file and line: reported, kept
    contradictions: list[str] = field(default_factory=list)  # header outcomes the imported runs contradict
    reviews: list[str] = field(default_factory=list)  # what each review beside the record decided
    error: str = ""


class PublishedImportError(AnnotationError):
    """Records that cannot be loaded, each named with why; nothing was stored."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


AGENT_ALIASES = {"codex": "Codex", "claude": "Claude Code", "kimi": "Kimi Code"}


def _published_run(study: Study, pair: PublishedPair) -> Run:
    agent = AGENT_ALIASES.get(pair.agent, pair.agent)
    runs = study.runs.filter(task__external_id=pair.task_id, agent__name=agent, mode=Run.Mode.CONCURRENT)
    found = list(runs.select_related("task__benchmark", "agent")[:5])
    if len(found) > 1 and pair.benchmark_hint:
        wanted = canonical_benchmark(pair.benchmark_hint)
        found = [run for run in found if run.task.benchmark.name == wanted]
    if not found:
        raise AnnotationError(f"no concurrent run of task {pair.task_id!r} by {agent} in {study}")
    if len(found) > 1:
        raise AnnotationError(f"task {pair.task_id!r} by {agent} is ambiguous (several benchmarks)")
    return found[0]


def published_check(*, study: Study, pairs: list[PublishedPair], annotator: AbstractBaseUser | None) -> list[Run]:
    """The run of every pair, once every pair has been checked: it must be found, once, and be
    loadable — as final labels, it has none yet; as the annotator's coding, they code it in the study
    (or it has a free coder's place for them) and have not submitted it. PublishedImportError lists
    every problem. Writes nothing: `published_import` calls it first, and the command calls it on
    the records that parse when others do not, to report every problem at once."""
    problems: list[str] = []
    if annotator is not None:
        if not study.annotators.filter(pk=annotator.pk).exists():
            raise PublishedImportError([
                f"{annotator.get_username()} is not an annotator of {study}; published codings are loaded as one "
                "of its annotators' (or --as-gold)"
            ])  # fmt: skip
        if study.closed_at is not None:
            raise PublishedImportError([f"{study} is closed: reopen it first"])
    runs: list[Run] = []
    for pair in pairs:
        try:
            runs.append(_published_run(study, pair))
        except AnnotationError as exc:
            problems.append(f"{pair.display}: {exc}")
    if problems:
        raise PublishedImportError(problems)
    seen = Counter(run.pk for run in runs)
    finals = set(FinalCoding.objects.filter(study=study, run__in=runs).values_list("run_id", flat=True))
    coders: dict[int, dict[int, str]] = {}
    for assignment in Assignment.objects.filter(study=study, run__in=runs).select_related("annotator"):
        coders.setdefault(assignment.run_id, {})[assignment.annotator_id] = assignment.annotator.get_username()
    submitted = set()
    if annotator is not None:
        submitted = set(
            Assignment.objects.filter(study=study, run__in=runs, annotator=annotator, annotation__status="submitted")
            .values_list("run_id", flat=True)
        )  # fmt: skip
    known = {name.lower() for name in Code.objects.filter(codebook=study.codebook, level=Code.Level.MODE)
             .values_list("name", flat=True)} if annotator is not None else set()  # fmt: skip
    for pair, run in zip(pairs, runs, strict=True):
        where = f"{pair.display}: run #{run.pk} ({run.task.external_id} by {run.agent.name})"
        failures = pair.record.failures
        if annotator is not None and failures and not any(f.labels[2].lower() in known for f in failures):
            modes = ", ".join(f.labels[2] for f in failures)
            problems.append(f"{where}: none of its labels ({modes}) is in the codebook {study.codebook}: "
                            "as a coding it would have nothing to submit")  # fmt: skip
            continue
        if seen[run.pk] > 1:
            problems.append(f"{where} is named by {seen[run.pk]} records of this import")
        elif annotator is None:
            if run.pk in finals:
                problems.append(f"{where} already has final labels in {study}")
        elif run.pk in submitted:
            problems.append(f"{where}: {annotator.get_username()} has already submitted it")
        elif annotator.pk not in coders.get(run.pk, {}) and len(coders.get(run.pk, {})) >= study.coders_per_run:
            names = ", ".join(sorted(coders[run.pk].values()))
            problems.append(
                f"{where} already has its {study.coders_per_run} coders in {study} ({names}); "
                f"{annotator.get_username()} is not one of them"
            )
    if problems:
        raise PublishedImportError(problems)
    return runs


@transaction.atomic
def published_import(
    *,
    study: Study,
    pairs: list[PublishedPair],
    actor: AbstractBaseUser | None = None,
    annotator: AbstractBaseUser | None = None,
) -> list[PublishedImportResult]:
    """Load the pairs' published records — as `annotator`'s submitted codings, or (annotator=None)
    as the runs' final labels with provenance 'imported' — and keep every file with its run: its
    text as published, its path in the artifact, its data. All or nothing: every pair is checked
    first (PublishedImportError names each file that cannot be loaded and why), then all are loaded
    in this one transaction. Unknown labels are reported and kept in the notes, never dropped."""
    runs = published_check(study=study, pairs=pairs, annotator=annotator)
    codes = {c.name.lower(): c for c in Code.objects.filter(codebook=study.codebook).select_related("parent__parent")}
    results = []
    for pair, run in zip(pairs, runs, strict=True):
        try:
            results.append(_load(study, pair, run, codes, actor=actor, annotator=annotator))
        except AnnotationError as exc:  # after the checks, still refused: nothing of this import stays
            raise PublishedImportError([f"{pair.display}: {exc}"]) from exc
    return results


def _load(study: Study, pair: PublishedPair, run: Run, codes: dict[str, Code], *, actor, annotator):
    record = pair.record
    result = PublishedImportResult(source=pair.display, run_id=run.pk)
    result.contradictions = _contradictions(pair, run)
    _keep(study, run, kind=PublishedRecord.Kind.ANNOTATION, name=record.name, path=pair.path, text=record.text,
          data=record.data(), actor=actor)  # fmt: skip
    result.reviews = _keep_reviews(study, pair, run, actor=actor)
    rejected_ids = {name: code.pk for name, code in codes.items()}
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
        rejected = failure.fields.get("nearest_rejected_label", "")
        if rejected and rejected.lower() not in rejected_ids:
            result.unknown.append(f"Failure {failure.number}: nearest rejected label {rejected!r} is not in the "
                                  "codebook (kept as published: export writes the record's text back)")  # fmt: skip
    note = "Imported from " + pair.display
    if result.unknown:
        note += "\nNot in the codebook: " + "; ".join(result.unknown)
    inputs = [LabelInput(code_id=code.pk, **_recorded(failure, rejected_ids)) for code, failure in picked]
    if annotator is None:
        analysis_changed(study_id=study.pk)
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
            f"{pair.display}: the study's published labels loaded as final labels",
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
    annotation_save(
        annotation=annotation,
        actor=actor or annotator,
        version=annotation.version,
        no_failure=not picked and not result.unknown,
        notes=note,
        labels=inputs,
    )
    if not picked and any(failure for failure in record.failures):  # published_check refuses this first
        raise AnnotationError("none of its labels is in the codebook: there is nothing to submit")
    # The study's own record is kept as published; anchors that do not resolve in the imported
    # files (a run imported from other logs than the record cites) are reported, not refused.
    problems = anchor_problems(run=run, labels=inputs)
    result.unresolved = [message for messages in problems.values() for message in messages]
    annotation_submit(annotation=annotation, actor=actor or annotator, version=annotation.version, check_anchors=False)
    log("published.coding", f"{pair.display}: the study's published labels loaded as "
           f"{annotator.get_username()}'s submitted coding", actor=actor, study_id=study.pk, run_id=run.pk,
           labels=result.imported, unknown=result.unknown, unresolved=result.unresolved)  # fmt: skip
    return result


def _keep_reviews(study: Study, pair: PublishedPair, run: Run, *, actor) -> list[str]:
    """Keep the reviews beside the record with its run, and say what they decided: the candidate
    decisions, the retained patterns and whether those are the record's failure modes."""
    said = []
    for review in pair.reviews:
        _keep(study, run, kind=review.kind, name=review.name, path=review.path, text=review.text, data=review.data,
              actor=actor)  # fmt: skip
        if review.kind == PublishedRecord.Kind.ADVANTAGE_REVIEW:
            said.append(f"{review.display}: advantage decision {advantage_verdict(review.data).get('decision')!r}")
            continue
        decided = review_from_data(review.data, name=review.display)
        retained = sorted(c.third_label for c in decided.retained)
        line = (
            f"{review.display}: {len(decided.candidates)} candidate decisions ({decided.anchor_count} anchors), "
            f"{len(retained)} retained{' (' + ', '.join(retained) + ')' if retained else ''}"
        )
        if decided.patterns:
            counts = ", ".join(f"{p.third_label} {len(p.parallel_evidence)} + {len(p.serial_contrast)}"
                               for p in decided.patterns)  # fmt: skip
            line += f"; retained patterns with evidence + contrast anchors: {counts}"
        said.append(line)
        in_record = sorted({failure.labels[2] for failure in pair.record.failures})
        if in_record != sorted(set(retained)):
            said.append(
                f"{review.display}: retains {', '.join(retained) or 'nothing'} but {pair.display} labels "
                f"{', '.join(in_record) or 'nothing'}"
            )
    if said:
        log("published.reviews", "; ".join(said), actor=actor, study_id=study.pk, run_id=run.pk)
    return said


def _keep(study: Study, run: Run, *, kind: str, name: str, path: str, text: str, data: dict, actor) -> None:
    """Store a published file with its run, once: the same file loaded again (for another
    annotator, say) is the same record."""
    if PublishedRecord.objects.filter(study=study, run=run, kind=kind, text=text).exists():
        return
    PublishedRecord.objects.create(study=study, run=run, kind=kind, name=name[:500], path=path[:500], text=text,
                                   data=data, imported_by=actor)  # fmt: skip


OUTCOME_KEYS = (("parallel_solution_passed", "concurrent"), ("serial_solution_passed", "sequential"))


def _contradictions(pair: PublishedPair, run: Run) -> list[str]:
    """Header outcomes (`parallel_solution_passed: true` …) that the imported runs contradict."""
    sides = {"concurrent": run, "sequential": run_twin(run=run)}
    found = []
    for key, mode in OUTCOME_KEYS:
        stated = {"true": True, "false": False}.get(pair.record.header.get(key, "").strip().lower())
        side = sides[mode]
        if stated is None or side is None or side.task_pass is None:
            continue
        if stated != side.task_pass:
            found.append(
                f"{pair.display}: field '{key}' says {str(stated).lower()}, but the imported {mode} run #{side.pk} "
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
