from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from taxonomy.services import PRESETS, codebook_import_csv, codebook_load_default, codebook_load_preset
from taxonomy.tree import TreeError


class Command(BaseCommand):
    help = (
        "Load the study's default codebook (frozen), a shipped preset (--preset mast: the MAST taxonomy, frozen) "
        "or a codebook CSV as a new draft (--csv FILE)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        source = parser.add_mutually_exclusive_group()
        source.add_argument("--csv", type=Path)
        source.add_argument("--preset", choices=sorted(PRESETS), help="A codebook Parallax ships (default: study).")
        parser.add_argument("--name", help="Codebook name for --csv (default: the CSV's 'codebook' column).")

    def handle(self, *args, **options) -> None:
        if options["csv"]:
            try:
                codebook = codebook_import_csv(text=options["csv"].read_text(encoding="utf-8"), name=options["name"])
            except (TreeError, OSError, UnicodeDecodeError) as exc:
                raise CommandError(f"{options['csv']}: {exc}") from exc
        elif options["preset"]:
            codebook = codebook_load_preset(preset=options["preset"])
        else:
            codebook = codebook_load_default()
        counts = {level: codebook.codes.filter(level=level).count() for level in ("category", "subcategory", "mode")}
        self.stdout.write(
            self.style.SUCCESS(
                f"{codebook}: {counts['category']} categories, {counts['subcategory']} subcategories, "
                f"{counts['mode']} modes"
            )
        )
