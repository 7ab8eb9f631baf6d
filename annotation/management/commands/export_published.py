from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from annotation.management.studies import study_from_ref
from annotation.published_files import safe_relative
from annotation.selectors.published import published_export


class Command(BaseCommand):
    help = (
        "Write a study's final labels as the study's published records, under the paths its artifact names "
        "them by: <out>/<benchmark>/<task>/<agent>/annotation.md per run with final labels (header and prose "
        "of the record it was loaded from kept), with the review.json and advantage-review.json loaded with it "
        "written back as published. Says which runs' final labels differ from what review.json retains."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or name.")
        parser.add_argument("--out", type=Path, required=True)

    def handle(self, *args, **options) -> None:
        study = study_from_ref(options["study"])
        exports = published_export(study=study)
        for export in exports:
            folder = options["out"] / safe_relative(export.folder)
            folder.mkdir(parents=True, exist_ok=True)
            for name, text in export.files.items():
                (folder / name).write_bytes(text.encode("utf-8"))  # as published: UTF-8, "\n" line ends
            self.stdout.write(f"run #{export.run.pk}: {export.folder}/ ({', '.join(export.files)})")
            if export.differs:
                self.stdout.write(
                    self.style.WARNING(
                        f"  the final labels differ from {export.folder}/review.json (the published review, not the "
                        f"study's decision): in the final labels only: {', '.join(export.final_only) or 'none'}; "
                        f"retained by review.json only: {', '.join(export.review_only) or 'none'}"
                    )
                )
        self.stdout.write(self.style.SUCCESS(f"wrote {len(exports)} record(s) under {options['out']}"))
