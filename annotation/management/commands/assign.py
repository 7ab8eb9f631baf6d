from __future__ import annotations

from collections import Counter

from django.core.management.base import BaseCommand, CommandParser

from annotation.management.studies import study_from_ref
from annotation.models import Assignment
from annotation.services.studies import study_assign


class Command(BaseCommand):
    help = "Assign each run of a study to k of its annotators (balanced, deterministic, idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or name.")

    def handle(self, *args, **options) -> None:
        study = study_from_ref(options["study"])
        created = study_assign(study=study)
        per_annotator = Counter(Assignment.objects.filter(study=study).values_list("annotator__username", flat=True))
        self.stdout.write(self.style.SUCCESS(f"{created} assignments created for {study}"))
        for username, count in sorted(per_annotator.items()):
            self.stdout.write(f"  {username}: {count} runs")
