from __future__ import annotations

from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Annotation"

    def ready(self) -> None:
        from trajectories.access import rule_install
        from trajectories.signals import runs_replaced, signatures_replaced

        from .access import RUN_ACCESS
        from .receivers import statistics_follow_runs

        signatures_replaced.connect(statistics_follow_runs, dispatch_uid="statistics_follow_signatures")
        runs_replaced.connect(statistics_follow_runs, dispatch_uid="statistics_follow_runs")
        # The run list, run page, its files and the API ask this app who sees which runs and hints.
        rule_install(RUN_ACCESS)
