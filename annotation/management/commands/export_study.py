from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.analysis.store import analysis_refresh
from annotation.management.studies import study_from_ref
from annotation.selectors.bundle import write_bundle


class Command(BaseCommand):
    help = (
        "Write a study's reproducibility bundle (zip): independent and revised codings, final labels, the run × "
        "mode matrix, the pairs, the codebook, study.json, dashboard.json and datapackage.json, as CSV and Parquet."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or name.")
        parser.add_argument("--out", type=Path, required=True, help="The zip file to write.")

    def handle(self, *args, **options) -> None:
        study = study_from_ref(options["study"])
        out: Path = options["out"]
        analysis_refresh(study_id=study.pk)  # in the foreground: the figures it carries are the study's now
        try:
            with out.open("wb") as file:
                write_bundle(study, file)
        except OSError as exc:
            out.unlink(missing_ok=True)
            raise CommandError(f"{out}: cannot write ({exc})") from exc
        self.stdout.write(self.style.SUCCESS(f"wrote {out} for study {study.name!r}"))
