"""Reading the annotate form (checkbox per mode, fields suffixed with the mode id)."""

from __future__ import annotations

from django.http import QueryDict

from .errors import AnnotationError
from .services.coding import LabelInput


def _int(value: str | None, field: str) -> int:
    try:
        return int(value or "")
    except ValueError as exc:
        raise AnnotationError(f"{field} must be a whole number", {field: "not a number"}) from exc


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.replace(",\n", "\n").splitlines() if line.strip()]


def parse_annotation_form(data: QueryDict) -> dict:
    """The annotate form as the keyword arguments of annotation_save / annotation_revise:
    version, no_failure, notes, labels."""
    version = _int(data.get("version"), "version")
    labels = []
    for raw in data.getlist("code"):
        code_id = _int(raw, "code")
        rejected = data.get(f"rejected-{code_id}") or ""
        labels.append(
            LabelInput(
                code_id=code_id,
                rationale=data.get(f"rationale-{code_id}", ""),
                realized_consequence=data.get(f"consequence-{code_id}", ""),
                evidence=_lines(data.get(f"evidence-{code_id}", "")),
                contrast=_lines(data.get(f"contrast-{code_id}", "")),
                nearest_rejected_id=_int(rejected, f"rejected-{code_id}") if rejected else None,
                rejection_reason=data.get(f"rejection-{code_id}", ""),
                episode_id=data.get(f"episode-{code_id}", ""),
                comparative_role=data.get(f"role-{code_id}", ""),
            )
        )
    return {
        "version": version,
        "no_failure": data.get("no_failure") in ("on", "true", "1"),
        "notes": data.get("notes", ""),
        "labels": labels,
    }
