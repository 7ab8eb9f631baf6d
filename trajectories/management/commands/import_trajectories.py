from __future__ import annotations

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from trajectories.formats import registry
from trajectories.services import import_batch_command_create, import_batch_execute


class Command(BaseCommand):
    help = (
        f"Import trajectories ({registry.described()}), the study's corpus tree, or .zip/.tar.gz bundles of any "
        "of these. Each run imports in one transaction. The import is listed on the Import page as a batch from the "
        "command line, with its report."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path)
        parser.add_argument("--format", default="auto", choices=registry.choices())
        parser.add_argument("--manifest", type=Path, help="CSV/JSON sidecar with task, mode and outcomes.")
        parser.add_argument(
            "--user", help="Username the import is recorded as made by (on the Import page and in the activity log)."
        )
        parser.add_argument("--quiet-ok", action="store_true", help="Only print failures and the summary.")
        parser.add_argument(
            "--replace",
            action="store_true",
            help="Read runs already stored (the same files, or other files of the same task, agent and mode) again, "
            "in place: their agents, events, files, tests and metrics are replaced, the runs and their codings stay.",
        )

    def handle(self, *args, **options) -> None:
        manifest = options["manifest"]
        if manifest is not None and not manifest.is_file():
            raise CommandError(f"manifest not found: {manifest}")
        for path in options["paths"]:
            if not path.exists():
                raise CommandError(f"no such file or folder: {path}")
        user = None
        if options["user"]:
            user = get_user_model().objects.filter(username=options["user"]).first()
            if user is None:
                raise CommandError(f"--user: no user named {options['user']!r}")
        batch = import_batch_command_create(
            paths=options["paths"], user=user, fmt=options["format"], manifest=manifest, replace=options["replace"]
        )
        report = import_batch_execute(
            batch=batch, paths=options["paths"], manifest=manifest, replace=options["replace"]
        )
        for result in report.results:
            if result.status == "failed":
                self.stderr.write(self.style.ERROR(f"FAILED  {result.message}"))
            elif not options["quiet_ok"]:
                self.stdout.write(f"{result.status:9} run #{result.run_id}  {result.source}  ({result.events} events)")
            for warning in result.warnings:
                self.stdout.write(self.style.WARNING(f"  warning: {warning}"))
        replaced = f"{report.count('replaced')} read again, " if options["replace"] else ""
        summary = (
            f"{report.count('imported')} imported, {replaced}{report.count('duplicate')} already present, "
            f"{report.count('failed')} failed; {report.events} events"
        )
        self.stdout.write(self.style.SUCCESS(summary) if not report.count("failed") else summary)
        if report.count("failed"):
            raise CommandError(f"{report.count('failed')} run(s) failed to import (see above)", returncode=2)
