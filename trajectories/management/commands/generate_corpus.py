from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from trajectories.generate import MANIFEST_NAME, SCALES, generate_corpus, generate_planted


class Command(BaseCommand):
    help = "Write a synthetic Parallax JSONL corpus with the study's shape (demo or paper scale)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--scale", choices=sorted(SCALES), default="demo")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--out", type=Path, required=True)
        parser.add_argument("--gzip", action="store_true")
        parser.add_argument(
            "--cells",
            action="store_true",
            help="Write the study's cell layout (cell.json, agent/ log, demo patch, final answer and evaluation).",
        )

        parser.add_argument(
            "--plant",
            action="store_true",
            help=f"Write the planted-signatures corpus instead (docs/signatures.md), with {MANIFEST_NAME} "
            "naming the signatures planted in each run.",
        )
        parser.add_argument("--copies", type=int, default=2, help="With --plant: runs per planted signature.")
        parser.add_argument(
            "--twins",
            action="store_true",
            help="With --plant: also each run's sequential twin (under twins/), so that the runs can be in a study.",
        )

    def handle(self, *args, **options) -> None:
        if options["plant"]:
            paths = generate_planted(
                Path(options["out"]), seed=options["seed"], copies=options["copies"], twins=options["twins"]
            )
            self.stdout.write(self.style.SUCCESS(f"wrote {len(paths)} runs and {MANIFEST_NAME} to {options['out']}"))
            return
        paths = generate_corpus(
            Path(options["out"]),
            scale=options["scale"],
            seed=options["seed"],
            compress=options["gzip"],
            cells=options["cells"],
        )
        self.stdout.write(self.style.SUCCESS(f"wrote {len(paths)} runs to {options['out']}"))
