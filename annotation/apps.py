from __future__ import annotations

from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Annotation"

    def ready(self) -> None:
        from trajectories.signals import runs_replaced, signatures_replaced

        from .receivers import statistics_follow_runs

        signatures_replaced.connect(statistics_follow_runs, dispatch_uid="statistics_follow_signatures")
        runs_replaced.connect(statistics_follow_runs, dispatch_uid="statistics_follow_runs")
