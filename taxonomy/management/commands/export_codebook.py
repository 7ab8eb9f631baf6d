from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from taxonomy.models import Codebook
from taxonomy.services import codebook_csv


class Command(BaseCommand):
    help = "Write a codebook as CSV (one row per code) to standard output."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("codebook_id", type=int)

    def handle(self, *args, **options) -> None:
        try:
            codebook = Codebook.objects.get(pk=options["codebook_id"])
        except Codebook.DoesNotExist as exc:
            raise CommandError(f"no codebook with id {options['codebook_id']}") from exc
        self.stdout.write(codebook_csv(codebook), ending="")
