from __future__ import annotations

from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Annotation"

    def ready(self) -> None:
        from trajectories.signals import signatures_replaced

        from .receivers import statistics_follow_signatures

        signatures_replaced.connect(statistics_follow_signatures, dispatch_uid="statistics_follow_signatures")
