from __future__ import annotations

import sys

import orjson
from django.core.management.base import BaseCommand, CommandParser

from trajectories.exports import METRICS_COLUMNS, csv_lines, metrics_rows
from trajectories.selectors import run_list


class Command(BaseCommand):
    help = "Export one row per run with its identifiers, outcomes and process metrics (docs/metrics.md)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", choices=("csv", "json"), default="csv")
        parser.add_argument("--mode", choices=("concurrent", "sequential"))
        parser.add_argument("--agent")
        parser.add_argument("--benchmark")

    def handle(self, *args, **options) -> None:
        filters = {k: options[k] for k in ("mode", "agent", "benchmark") if options.get(k)}
        runs = run_list(filters=filters).iterator(chunk_size=1000)
        out = self.stdout
        if options["format"] == "csv":
            for chunk in csv_lines(metrics_rows(runs), METRICS_COLUMNS):
                out.write(chunk, ending="")
        else:
            sys.stdout.flush()
            rows = list(metrics_rows(runs))
            out.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
