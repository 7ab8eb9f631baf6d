"""Baseline: the format parsers over a folder, no database. Prints `<events> <seconds>` (work only)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from trajectories.formats.detect import discover  # noqa: E402
from trajectories.formats.records import EventRecord  # noqa: E402
from trajectories.formats.registry import parser_for  # noqa: E402


def main(folder: str) -> None:
    start = time.perf_counter()
    events = 0
    for source in discover([Path(folder)]).sources:
        for record in parser_for(source.format).parse(source):
            if type(record) is EventRecord:
                events += 1
    print(events, time.perf_counter() - start)


if __name__ == "__main__":
    main(sys.argv[1])
