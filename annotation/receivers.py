"""What the annotation app does when the apps it builds on announce a change (connected in apps.py)."""

from __future__ import annotations

from .analysis.store import analysis_changed
from .models import Study


def statistics_follow_runs(sender, run_ids: list[int], **kwargs) -> None:
    """Hits of some runs were recomputed, or the runs were read again from their files: the figures of
    every study holding them are no longer current (the worker recomputes them; the dashboard says so
    until it has)."""
    for study_id in Study.objects.filter(runs__in=run_ids).values_list("pk", flat=True).distinct():
        analysis_changed(study_id=study_id)
