"""Writing to the activity log: one function every service calls."""

from __future__ import annotations

from typing import Any

from .models import ActivityEntry


def record(
    action: str,
    summary: str,
    *,
    actor=None,
    study_id: int | None = None,
    run_id: int | None = None,
    codebook_id: int | None = None,
    batch_id: int | None = None,
    **detail: Any,
) -> ActivityEntry:
    """Append one entry (inside the caller's transaction: it is kept exactly when the change is)."""
    return ActivityEntry.objects.create(
        action=action,
        summary=summary[:2000],
        actor=actor if getattr(actor, "pk", None) else None,
        study_id=study_id,
        run_id=run_id,
        codebook_id=codebook_id,
        batch_id=batch_id,
        detail=detail,
    )
