from __future__ import annotations

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import AnnotationError
from annotation.management.studies import study_from_ref
from annotation.services.codebook_move import study_move_codebook
from taxonomy.models import Codebook
from taxonomy.tree import TreeError, parse_key_map


class Command(BaseCommand):
    help = (
        "Move a study to another frozen codebook version with a key map file (one `old -> new[, new…]` per line; "
        "the study's codebook page does the same)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or name.")
        parser.add_argument("--to", type=int, required=True, help="Id of the frozen codebook version to move to.")
        parser.add_argument("--map", type=Path, required=True, help="The key map file.")
        parser.add_argument("--as", dest="actor", help="Username recorded as who moved it.")
        parser.add_argument("--note", default="")

    def handle(self, *args, **options) -> None:
        study = study_from_ref(options["study"])
        codebook = Codebook.objects.filter(pk=options["to"]).first()
        if codebook is None:
            raise CommandError(f"no codebook with id {options['to']}")
        actor = None
        if options["actor"]:
            actor = get_user_model().objects.filter(username=options["actor"]).first()
            if actor is None:
                raise CommandError(f"no user {options['actor']!r}")
        try:
            key_map = parse_key_map(options["map"].read_text(encoding="utf-8"))
            move = study_move_codebook(study=study, codebook=codebook, key_map=key_map, actor=actor,
                                       note=options["note"])  # fmt: skip
        except (AnnotationError, TreeError, OSError) as exc:
            raise CommandError(f"{exc} — nothing was changed") from exc
        self.stdout.write(
            self.style.SUCCESS(
                f"{study} now codes against {move.to_codebook}: {move.mapped_labels} label(s) carried over, "
                f"{move.reopened} coding(s) reopened for re-coding"
            )
        )
