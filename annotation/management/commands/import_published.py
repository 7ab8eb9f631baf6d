from __future__ import annotations

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.annotation_md import PublishedFormatError, parse_annotation_md
from annotation.errors import AnnotationError
from annotation.management.studies import study_from_ref
from annotation.review_json import ReviewFormatError
from annotation.services.published import published_import, published_reviews_import


class Command(BaseCommand):
    help = (
        "Load the study's published annotation records (annotation.md, one per pair) as one annotator's "
        "submitted labels (--as-annotator USER) or as final labels (--as-gold). Folders are searched."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or name.")
        parser.add_argument("paths", nargs="+", type=Path)
        who = parser.add_mutually_exclusive_group(required=True)
        who.add_argument("--as-annotator")
        who.add_argument("--as-gold", action="store_true")

    def handle(self, *args, **options) -> None:
        study = study_from_ref(options["study"])
        annotator = None
        if options["as_annotator"]:
            annotator = get_user_model().objects.filter(username=options["as_annotator"]).first()
            if annotator is None:
                raise CommandError(f"unknown user {options['as_annotator']!r}")
        files = []
        for path in options["paths"]:
            files.extend(sorted(path.rglob("annotation.md")) if path.is_dir() else [path])
        failed = 0
        for file in files:
            hint = file.parent.name.split("__")[0] if "__" in file.parent.name else ""
            try:
                record = parse_annotation_md(file.read_text(encoding="utf-8"), name=str(file))
                result = published_import(study=study, record=record, annotator=annotator, benchmark_hint=hint)
            except (PublishedFormatError, AnnotationError, OSError, UnicodeDecodeError) as exc:
                failed += 1
                self.stderr.write(self.style.ERROR(f"FAILED {exc}"))
                continue
            self.stdout.write(f"run #{result.run_id}: {', '.join(result.imported) or 'no known label'}")
            for unknown in result.unknown:
                self.stdout.write(self.style.WARNING(f"  unknown label (kept in notes): {unknown}"))
            for anchor in result.unresolved:
                self.stdout.write(self.style.WARNING(f"  anchor not in the imported files (kept): {anchor}"))
            for contradiction in result.contradictions:
                self.stdout.write(self.style.WARNING(f"  outcome contradicted: {contradiction}"))
            reviews = {
                str(path): path.read_text(encoding="utf-8")
                for path in (file.parent / "review.json", file.parent / "advantage-review.json")
                if path.is_file()
            }
            if reviews and result.run_id is not None:
                try:
                    said = published_reviews_import(study=study, run_id=result.run_id, files=reviews)
                except ReviewFormatError as exc:
                    failed += 1
                    self.stderr.write(self.style.ERROR(f"FAILED {exc}"))
                    continue
                for line in said:
                    self.stdout.write(f"  {line}")
            if result.error:
                self.stdout.write(self.style.WARNING(f"  {result.error}"))
        if failed:
            raise CommandError(f"{failed} record(s) failed")
