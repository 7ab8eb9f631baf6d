from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Q

from trajectories import signatures
from trajectories.models import Run
from trajectories.services import run_signatures_store

CHUNK = 50  # runs read and written together


class Command(BaseCommand):
    help = "Recompute the failure signatures of runs (docs/signatures.md), replacing their stored hits."

    def add_arguments(self, parser: CommandParser) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--run", type=int, nargs="+", dest="runs", metavar="ID", help="Run ids.")
        which.add_argument("--all", action="store_true", help="Every stored run.")
        which.add_argument(
            "--stale",
            action="store_true",
            help="The runs whose hits these detectors did not compute: never checked, or by older rules "
            "(after DETECTOR_VERSION was bumped).",
        )

    def handle(self, *args, **options) -> None:
        if options["all"]:
            ids = list(Run.objects.order_by("pk").values_list("pk", flat=True))
        elif options["stale"]:
            current = Q(signatures_version=signatures.DETECTOR_VERSION)
            ids = list(Run.objects.exclude(current).order_by("pk").values_list("pk", flat=True))
        else:
            wanted = sorted(set(options["runs"]))
            ids = list(Run.objects.filter(pk__in=wanted).order_by("pk").values_list("pk", flat=True))
            missing = sorted(set(wanted) - set(ids))
            if missing:
                raise CommandError(f"no run with id {', '.join(map(str, missing))}")
        hits = 0
        for start in range(0, len(ids), CHUNK):
            hits += run_signatures_store(run_ids=ids[start : start + CHUNK])
        self.stdout.write(self.style.SUCCESS(f"{len(ids)} runs checked, {hits} signature hits stored"))
