from __future__ import annotations

from collections import Counter

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Assignment, Study
from annotation.services.studies import study_assign


class Command(BaseCommand):
    help = "Assign each run of a study to two of its three annotators (balanced, deterministic, idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or name.")

    def handle(self, *args, **options) -> None:
        ref = options["study"]
        study = Study.objects.filter(pk=int(ref)).first() if ref.isdigit() else Study.objects.filter(name=ref).first()
        if study is None:
            raise CommandError(f"no study {ref!r}")
        created = study_assign(study=study)
        per_annotator = Counter(Assignment.objects.filter(study=study).values_list("annotator__username", flat=True))
        self.stdout.write(self.style.SUCCESS(f"{created} assignments created for {study}"))
        for username, count in sorted(per_annotator.items()):
            self.stdout.write(f"  {username}: {count} runs")
