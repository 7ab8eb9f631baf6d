"""The real importer (`import_paths`, what every entry point calls) over a folder, into the
database of DATABASE_URL. Prints `<events> <seconds>` (work only, without process start-up)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from trajectories.services import import_paths  # noqa: E402


def main(folder: str) -> None:
    start = time.perf_counter()
    report = import_paths(paths=[Path(folder)])
    elapsed = time.perf_counter() - start
    failed = [r for r in report.results if r.status != "imported"]
    if failed:
        raise SystemExit(f"{len(failed)} run(s) not imported, e.g. {failed[0].source}: {failed[0].message}")
    print(report.events, elapsed)


if __name__ == "__main__":
    main(sys.argv[1])
