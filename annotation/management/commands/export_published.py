from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from annotation.management.studies import study_from_ref
from annotation.models import FinalCoding
from annotation.selectors.published import published_record_text


class Command(BaseCommand):
    help = (
        "Write a study's final labels as the study's published records: <out>/<benchmark>/<task>/<agent>/"
        "annotation.md per run with final labels (header and prose of an imported record kept)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or name.")
        parser.add_argument("--out", type=Path, required=True)

    def handle(self, *args, **options) -> None:
        study = study_from_ref(options["study"])
        finals = FinalCoding.objects.filter(study=study).select_related("run__task__benchmark", "run__agent")
        written = 0
        for final in finals.order_by("run_id"):
            run = final.run
            folder = options["out"] / run.task.benchmark.name / run.task.external_id / run.agent.name
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "annotation.md").write_text(published_record_text(study=study, run=run), encoding="utf-8")
            written += 1
        self.stdout.write(self.style.SUCCESS(f"wrote {written} record(s) under {options['out']}"))
