"""A study's published records, for export and for the run-history page.

Export (`export_published`): per run with final labels, the files of its pair folder as the study's
artifact names them — `annotation.md` rendered from the stored record's header and prose with the
study's final labels as its failure blocks, and the stored `review.json` / `advantage-review.json`
written back from their data as the study writes them — so that import → export gives the same
files, byte for byte, while the final labels are the published ones."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from trajectories.artifacts import AnchorError
from trajectories.models import Run
from trajectories.selectors import PairAnchors, twins

from ..annotation_md import anchors_in, render_annotation_md
from ..models import FinalCoding, FinalLabel, PublishedRecord, Study
from ..published_files import KIND_FILES, cell_pair_folder, safe_relative
from ..review_json import advantage_verdict, review_from_data, serialize_review


@dataclass
class PublishedExport:
    run: Run
    folder: str  # the pair's folder, relative: swebench_verified/django__django-10999/claude
    files: dict[str, str] = field(default_factory=dict)  # file name -> its text
    final_only: list[str] = field(default_factory=list)  # modes of the final labels review.json does not retain
    review_only: list[str] = field(default_factory=list)  # modes review.json retains that no final label has

    @property
    def differs(self) -> bool:
        return bool(self.final_only or self.review_only)


def published_export(*, study: Study) -> list[PublishedExport]:
    """Every run of the study with final labels, with the files to write for it (five queries)."""
    finals = list(
        FinalCoding.objects.filter(study=study).select_related("run__task__benchmark", "run__agent").order_by("run_id")
    )
    labels: dict[int, list[FinalLabel]] = {}
    chosen = FinalLabel.objects.filter(final__in=finals).select_related("code__parent__parent", "nearest_rejected")
    for label in chosen.order_by("pk"):  # the order they were recorded in: an imported record's own order
        labels.setdefault(label.final_id, []).append(label)
    stored: dict[tuple[int, str], PublishedRecord] = {}
    for record in PublishedRecord.objects.filter(study=study, run__in=[f.run_id for f in finals]).order_by(
        "imported_at", "pk"
    ):
        stored[(record.run_id, record.kind)] = record  # the newest of each kind
    bare = [f.run for f in finals if not stored.get((f.run_id, PublishedRecord.Kind.ANNOTATION))]
    twin_passed = {}
    if bare:
        for twin in twins(runs=Run.objects.filter(pk__in=[run.pk for run in bare])):
            twin_passed[(twin.task_id, twin.agent_id)] = twin.task_pass
    exports = []
    for final in finals:
        run = final.run
        records = {kind: stored.get((run.pk, kind)) for kind in PublishedRecord.Kind.values}
        export = PublishedExport(run=run, folder=_folder(run, records))
        annotation = records[PublishedRecord.Kind.ANNOTATION]
        if annotation is not None and annotation.data.get("header"):
            data = annotation.data
        else:
            data = {"header": _header(run, twin_passed.get((run.task_id, run.agent_id)))}
        final_labels = labels.get(final.pk, [])
        unknown = _unknown_rejections(annotation.data if annotation is not None else {})
        failures = [_failure(fl, unknown) for fl in final_labels]
        export.files["annotation.md"] = render_annotation_md(data=data, failures=failures)
        review = records[PublishedRecord.Kind.REVIEW]
        if review is not None:
            export.files["review.json"] = serialize_review(review.data) if review.data else review.text
            if review.data:
                retained = {c.third_label for c in review_from_data(review.data, name=review.path).retained}
                finals_named = {fl.code.name for fl in final_labels}
                export.final_only = sorted(finals_named - retained)
                export.review_only = sorted(retained - finals_named)
        advantage = records[PublishedRecord.Kind.ADVANTAGE_REVIEW]
        if advantage is not None:
            export.files["advantage-review.json"] = (
                serialize_review(advantage.data) if advantage.data else advantage.text
            )
        exports.append(export)
    return exports


def _folder(run: Run, records: dict[str, PublishedRecord | None]) -> str:
    """The pair's folder: where its stored records sit in the artifact; else the folder of the cell
    the run was imported from; else <benchmark>/<task>/<agent>."""
    for kind in KIND_FILES:
        record = records.get(kind)
        if record is not None and record.path:
            return str(safe_relative(record.path).parent)
    from_cell = cell_pair_folder(run.source_name, task_id=run.task.external_id)
    if from_cell:
        return from_cell
    return str(PurePosixPath(run.task.benchmark.name, run.task.external_id, run.agent.name))


def _header(run: Run, twin_passed: bool | None) -> dict[str, str]:
    """A record's header made from the pair, for a run loaded from no record."""
    header = {
        "pair_id": f"{run.task.external_id}/{run.agent.name}",
        "task_id": run.task.external_id,
        "agent": run.agent.name,
        "parallel_solution_passed": _flag(run.task_pass),
        "serial_solution_passed": _flag(twin_passed),
    }
    return {key: value for key, value in header.items() if value != ""}


def _unknown_rejections(record_data: dict) -> dict[tuple[str, str], str]:
    """(mode name, episode id) -> the nearest rejected label a published failure names, for the names
    the codebook has no code for: a label keeps only a code, so the text is taken from the record."""
    found = {}
    for failure in record_data.get("failures", []):
        fields = failure.get("fields", {})
        if fields.get("nearest_rejected_label"):
            key = (fields.get("third_label", "").lower(), fields.get("episode_id", ""))
            found[key] = fields["nearest_rejected_label"]
    return found


def _failure(label: FinalLabel, unknown_rejections: dict[tuple[str, str], str]) -> dict:
    code = label.code
    rejected = label.nearest_rejected.name if label.nearest_rejected else ""
    if not rejected:  # a name outside the codebook, as the published record wrote it
        rejected = unknown_rejections.get((code.name.lower(), label.episode_id), "")
    return {
        "top_label": code.parent.parent.name,
        "sub_label": code.parent.name,
        "third_label": code.name,
        "episode_id": label.episode_id,
        "comparative_role": label.comparative_role,
        "parallel_evidence": label.evidence,
        "serial_contrast": label.contrast,
        "realized_consequence": label.realized_consequence,
        "reasoning": label.rationale,
        "nearest_rejected_label": rejected,
        "rejection_reason": label.rejection_reason,
    }


def _flag(value: bool | None) -> str:
    return "" if value is None else str(value).lower()


# -- the run-history page ----------------------------------------------------------------------

HEADER_SHOWN = ("verdict", "outcome_relation", "retained_pattern_count")  # beside causal_scope and the anchors
ANCHOR_FIELDS = {"parallel_anchor": Run.Mode.CONCURRENT, "serial_anchor": Run.Mode.SEQUENTIAL}


@dataclass
class ShownAnchor:
    text: str
    url: str = ""  # the cited file at that line, when the anchor resolves
    problem: str = ""  # why it does not, in full (the run's files included)

    @property
    def reason(self) -> str:
        """Why it does not resolve, without the list of the files the run does have."""
        return self.problem.split(" (its files: ")[0]


@dataclass
class ShownDecision:
    """A failure block of an annotation.md, or a candidate decision or retained pattern of a review."""

    top_label: str
    sub_label: str
    third_label: str
    decision: str = ""
    reason: str = ""
    episode_id: str = ""
    comparative_role: str = ""
    realized_consequence: str = ""
    nearest_rejected_label: str = ""
    near_match_reason: str = ""
    evidence: list[ShownAnchor] = field(default_factory=list)
    contrast: list[ShownAnchor] = field(default_factory=list)


@dataclass
class ShownRecord:
    record: PublishedRecord
    fields: list[tuple[str, str]] = field(default_factory=list)  # the header's verdict, relation, causal scope …
    anchors: list[tuple[str, list[ShownAnchor]]] = field(default_factory=list)  # parallel_anchor, serial_anchor
    header: list[tuple[str, str]] = field(default_factory=list)  # every header and comparative field, in order
    prose: list[tuple[str, str]] = field(default_factory=list)  # (section title, its prose)
    failures: list[ShownDecision] = field(default_factory=list)
    patterns: list[ShownDecision] = field(default_factory=list)
    candidates: list[ShownDecision] = field(default_factory=list)
    retained: int = 0
    rejected: int = 0
    anchor_count: int = 0

    @property
    def kept_as_data(self) -> bool:
        return bool(self.record.data)


def published_records_shown(*, study: Study, run: Run) -> list[ShownRecord]:
    """The study's published records of a run's pair, with what each says: an annotation.md's header,
    comparative fields and failure blocks; a review's retained patterns and every candidate decision;
    an advantage review's verdict. Every anchor is resolved against the pair's stored files — a link
    when it resolves, the reason when not — in a fixed number of queries however many anchors."""
    records = PublishedRecord.objects.filter(study=study, run=run).select_related("imported_by")
    pair = PairAnchors(run)
    shown = []
    for record in records.order_by("imported_at", "pk"):
        item = ShownRecord(record=record)
        if record.data and record.kind == PublishedRecord.Kind.ANNOTATION:
            _show_annotation(item, pair)
        elif record.data and record.kind == PublishedRecord.Kind.REVIEW:
            _show_review(item, pair)
        elif record.data:
            item.fields = [(key, _plain(value)) for key, value in advantage_verdict(record.data).items()]
        shown.append(item)
    return shown


def _show_annotation(item: ShownRecord, pair: PairAnchors) -> None:
    data = item.record.data
    header, comparative = data.get("header", {}), data.get("comparative", {})
    both = {**header, **comparative}
    item.fields = [(key, both[key]) for key in (*HEADER_SHOWN, "causal_scope") if key in both]
    item.anchors = [(key, _anchors(pair, both[key], mode)) for key, mode in ANCHOR_FIELDS.items() if key in both]
    item.header = [(key, _plain(value)) for key, value in (*header.items(), *comparative.items())]
    item.prose = [
        (section["heading"].lstrip("#").strip(), prose)
        for section in data.get("sections", [])
        if (prose := "\n".join(line for line in section["lines"] if isinstance(line, str)).strip())
    ]
    for block in data.get("failures", []):
        fields = block["fields"]
        item.failures.append(
            ShownDecision(
                top_label=fields.get("top_label", ""),
                sub_label=fields.get("sub_label", ""),
                third_label=fields.get("third_label", ""),
                reason=fields.get("reasoning", ""),
                episode_id=fields.get("episode_id", ""),
                comparative_role=fields.get("comparative_role", ""),
                realized_consequence=fields.get("realized_consequence", ""),
                nearest_rejected_label=fields.get("nearest_rejected_label", ""),
                near_match_reason=fields.get("rejection_reason", ""),
                evidence=_anchors(pair, fields.get("parallel_evidence", ""), Run.Mode.CONCURRENT),
                contrast=_anchors(pair, fields.get("serial_contrast", ""), Run.Mode.SEQUENTIAL),
            )
        )


def _show_review(item: ShownRecord, pair: PairAnchors) -> None:
    review = review_from_data(item.record.data, name=item.record.path or item.record.name)
    item.fields = [("outcome_relation", review.outcome_relation)] if review.outcome_relation else []
    explanation = review.document.get("outcome_analysis", {})
    if isinstance(explanation, dict) and isinstance(explanation.get("explanation"), str):
        item.prose = [("Outcome analysis", explanation["explanation"])]
    item.patterns = [_decision(pattern, pair) for pattern in review.patterns]
    item.candidates = [_decision(candidate, pair) for candidate in review.candidates]
    item.retained, item.rejected = len(review.retained), len(review.rejected)
    item.anchor_count = review.anchor_count


def _decision(decided, pair: PairAnchors) -> ShownDecision:
    return ShownDecision(
        top_label=decided.top_label,
        sub_label=decided.sub_label,
        third_label=decided.third_label,
        decision=getattr(decided, "decision", "retain"),
        reason=decided.reason,
        episode_id=decided.episode_id,
        comparative_role=getattr(decided, "comparative_role", ""),
        realized_consequence=decided.realized_consequence,
        nearest_rejected_label=decided.nearest_rejected_label,
        near_match_reason=decided.near_match_reason,
        evidence=[_anchor(pair, a.text, Run.Mode.CONCURRENT) for a in decided.parallel_evidence],
        contrast=[_anchor(pair, a.text, Run.Mode.SEQUENTIAL) for a in decided.serial_contrast],
    )


def _anchors(pair: PairAnchors, value: str, default_mode: str) -> list[ShownAnchor]:
    """The backticked anchors of a record's field, each resolved."""
    return [_anchor(pair, text, default_mode) for text in anchors_in(value)]


def _anchor(pair: PairAnchors, text: str, default_mode: str) -> ShownAnchor:
    try:
        return ShownAnchor(text=text, url=pair.resolve(text, default_mode=default_mode).url)
    except AnchorError as exc:
        return ShownAnchor(text=text, problem=str(exc).removeprefix(f"{text.strip('`').strip()}: "))


def _plain(value) -> str:
    """A value as the page shows it: JSON's words for null and booleans, never Python's."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
