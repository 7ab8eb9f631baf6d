from __future__ import annotations

import orjson
from django.core.management.base import BaseCommand, CommandParser

from trajectories.exports import METRICS_COLUMNS, TEST_COLUMNS, csv_lines, metrics_rows, test_rows
from trajectories.selectors import run_list


class Command(BaseCommand):
    help = (
        "Export one row per run with its identifiers, outcomes and process metrics, or with --tests one row per "
        "run × test (docs/metrics.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", choices=("csv", "json"), default="csv")
        parser.add_argument("--tests", action="store_true", help="one row per run × test of each run's test list")
        parser.add_argument("--mode", choices=("concurrent", "sequential"))
        parser.add_argument("--agent")
        parser.add_argument("--benchmark")

    def handle(self, *args, **options) -> None:
        filters = {k: options[k] for k in ("mode", "agent", "benchmark") if options.get(k)}
        runs = run_list(filters=filters)
        if options["tests"]:
            rows, columns = test_rows(runs), TEST_COLUMNS  # streamed, a few hundred runs and tests at a time
        else:
            rows, columns = metrics_rows(runs.iterator(chunk_size=1000)), METRICS_COLUMNS
        out = self.stdout
        if options["format"] == "csv":
            for chunk in csv_lines(rows, columns):
                out.write(chunk, ending="")
            return
        # A JSON list, written as its rows come (never the whole export in memory).
        written = 0
        out.write("[", ending="")
        for row in rows:
            out.write(("," if written else "") + "\n  " + orjson.dumps(row).decode(), ending="")
            written += 1
        out.write("\n]\n" if written else "]\n", ending="")
