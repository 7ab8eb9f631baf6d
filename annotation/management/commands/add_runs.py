from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import AnnotationError
from annotation.management.studies import study_from_ref
from annotation.services.studies import study_add_runs
from trajectories.selectors import paired_concurrent_runs


class Command(BaseCommand):
    help = (
        "Add runs to a study that has started and assign them, continuing its balance: the given run ids, or "
        "with --new every concurrent run with a sequential twin not yet in the study."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or name.")
        parser.add_argument("run_ids", nargs="*", type=int, help="Run ids (concurrent runs with a twin).")
        parser.add_argument("--new", action="store_true", help="Every paired concurrent run not in the study yet.")

    def handle(self, *args, **options) -> None:
        study = study_from_ref(options["study"])
        run_ids = list(options["run_ids"])
        if options["new"]:
            run_ids += paired_concurrent_runs().exclude(studies=study).values_list("pk", flat=True)
        if not run_ids:
            raise CommandError("no runs to add: give run ids, or --new")
        try:
            added = study_add_runs(study=study, run_ids=run_ids)
        except AnnotationError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(self.style.SUCCESS(f"{added} runs added to {study} and assigned"))
