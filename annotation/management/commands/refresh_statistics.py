from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser

from annotation.analysis.store import analysis_refresh
from annotation.management.studies import study_from_ref


class Command(BaseCommand):
    help = (
        "Compute a study's statistics now, in the foreground (what the worker does after each change), "
        "unless the stored ones are current."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or name.")

    def handle(self, *args, **options) -> None:
        study = study_from_ref(options["study"])
        stored = analysis_refresh(study_id=study.pk)
        self.stdout.write(
            self.style.SUCCESS(
                f"statistics of {study} are current: version {stored.version}, computed "
                f"{stored.computed_at:%Y-%m-%d %H:%M:%S} in {stored.seconds:.2f} s"
            )
        )
