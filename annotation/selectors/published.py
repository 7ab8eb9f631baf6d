"""A study's published records, for export and for the run-history page.

Export (`export_published`): per run with final labels, the files of its pair folder as the study's
artifact names them — `annotation.md` rendered from the stored record's header and prose with the
study's final labels as its failure blocks, and the stored `review.json` / `advantage-review.json`
written back from their data as the study writes them — so that import → export gives the same
files, byte for byte, while the final labels are the published ones."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath

from trajectories.models import Run
from trajectories.selectors import twins

from ..annotation_md import render_annotation_md
from ..models import FinalCoding, FinalLabel, PublishedRecord, Study
from ..published_files import KIND_FILES, cell_pair_folder, safe_relative
from ..review_json import review_from_data, serialize_review


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
        export.files["annotation.md"] = render_annotation_md(data=data, failures=[_failure(fl) for fl in final_labels])
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


def _failure(label: FinalLabel) -> dict:
    code = label.code
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
        "nearest_rejected_label": label.nearest_rejected.name if label.nearest_rejected else "",
        "rejection_reason": label.rejection_reason,
    }


def _flag(value: bool | None) -> str:
    return "" if value is None else str(value).lower()
