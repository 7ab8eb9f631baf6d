from __future__ import annotations

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.management.studies import study_from_ref
from annotation.published_files import FORMAT_ERRORS, read_pair
from annotation.services.published import PublishedImportError, published_check, published_import


class Command(BaseCommand):
    help = (
        "Load the study's published records (annotation.md, one per pair, with the review.json and "
        "advantage-review.json beside it) as one annotator's submitted labels (--as-annotator USER) or as "
        "final labels (--as-gold). Folders are searched. All or nothing: every record is checked first, and "
        "if one cannot be loaded nothing is stored."
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
        if not files:
            raise CommandError("no annotation.md found under " + ", ".join(map(str, options["paths"])))
        pairs, problems = [], []
        for file in files:
            try:
                pairs.append(read_pair(file))
            except FORMAT_ERRORS as exc:
                problems.append(str(exc))
        try:
            if problems:  # nothing is stored; the records that do parse are checked too, to say everything at once
                published_check(study=study, pairs=pairs, annotator=annotator)
            else:
                results = published_import(study=study, pairs=pairs, annotator=annotator)
        except PublishedImportError as exc:
            problems += exc.problems
        if problems:
            for problem in problems:
                self.stderr.write(self.style.ERROR(f"FAILED {problem}"))
            raise CommandError(f"{len(problems)} of {len(files)} record(s) cannot be loaded: nothing was stored")
        for result in results:
            labels = ", ".join(result.imported) or ("no label in the codebook" if result.unknown else "no failure mode")
            self.stdout.write(f"run #{result.run_id}: {labels}  ({result.source})")
            for unknown in result.unknown:
                self.stdout.write(self.style.WARNING(f"  unknown label (kept in notes): {unknown}"))
            for anchor in result.unresolved:
                self.stdout.write(self.style.WARNING(f"  anchor not in the imported files (kept): {anchor}"))
            for contradiction in result.contradictions:
                self.stdout.write(self.style.WARNING(f"  outcome contradicted: {contradiction}"))
            for line in result.reviews:
                self.stdout.write(f"  {line}")
            if result.error:
                self.stdout.write(self.style.WARNING(f"  {result.error}"))
        self.stdout.write(self.style.SUCCESS(f"loaded {len(results)} record(s) into {study}"))
