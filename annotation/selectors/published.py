"""A study's final labels written back in the shape of its published records (`annotation.md`),
so that import → export → import gives the same record."""

from __future__ import annotations

from trajectories.models import Run
from trajectories.selectors import run_twin

from ..annotation_md import prose_of, render_annotation_md
from ..models import FinalCoding, PublishedRecord, Study


def published_record_text(*, study: Study, run: Run) -> str:
    final = FinalCoding.objects.filter(study=study, run=run).first()
    stored = PublishedRecord.objects.filter(study=study, run=run).order_by("-imported_at").first()
    if stored is not None:
        header, prose = dict(stored.header), prose_of(stored.text)
    else:
        twin = run_twin(run=run)
        header = {
            "pair_id": f"{run.task.external_id}/{run.agent.name}",
            "task_id": run.task.external_id,
            "agent": run.agent.name,
            "parallel_solution_passed": _flag(run.task_pass),
            "serial_solution_passed": _flag(twin.task_pass if twin else None),
        }
        header = {key: value for key, value in header.items() if value != ""}
        prose = ""
    failures = []
    labels = final.labels.select_related("code__parent__parent", "nearest_rejected") if final else []
    for label in sorted(labels, key=lambda fl: fl.code.position):
        code = label.code
        failures.append(
            {
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
        )
    return render_annotation_md(header=header, prose=prose, failures=failures)


def _flag(value: bool | None) -> str:
    return "" if value is None else str(value).lower()
