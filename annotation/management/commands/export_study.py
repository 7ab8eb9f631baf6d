from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Study
from annotation.selectors.bundle import study_bundle


class Command(BaseCommand):
    help = (
        "Write a study's reproducibility bundle (zip): independent and revised codings, final labels, the run × "
        "mode matrix, the pairs, the codebook, study.json, dashboard.json and datapackage.json, as CSV and Parquet."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or name.")
        parser.add_argument("--out", type=Path, required=True, help="The zip file to write.")

    def handle(self, *args, **options) -> None:
        ref = options["study"]
        study = Study.objects.filter(**({"pk": int(ref)} if ref.isdigit() else {"name": ref})).first()
        if study is None:
            raise CommandError(f"no study {ref!r}")
        out: Path = options["out"]
        try:
            out.write_bytes(study_bundle(study))
        except OSError as exc:
            raise CommandError(f"{out}: cannot write ({exc})") from exc
        self.stdout.write(self.style.SUCCESS(f"wrote {out} for study {study.name!r}"))
