"""Baseline: run the format parsers over a folder with no database; prints the event count."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from trajectories.formats.detect import discover, parser_for  # noqa: E402
from trajectories.formats.records import EventRecord  # noqa: E402


def main(folder: str) -> None:
    events = 0
    for source in discover([Path(folder)]).sources:
        for record in parser_for(source.format).parse(source):
            if isinstance(record, EventRecord):
                events += 1
    print(events)


if __name__ == "__main__":
    main(sys.argv[1])
