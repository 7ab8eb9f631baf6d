"""The real importer over a folder, into the database of DATABASE_URL: `import_paths` (what the
command line calls) or, with --batch, `import_batch_run` (what an upload through the web page or
the API runs in the Celery worker, progress updates included) on a copy of the folder.
Prints `<events> <seconds>` (work only, without process start-up)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from trajectories.models import ImportBatch  # noqa: E402
from trajectories.services import import_batch_run, import_paths  # noqa: E402


def main(folder: str, *, batch: bool) -> None:
    if not batch:
        start = time.perf_counter()
        report = import_paths(paths=[Path(folder)])
        elapsed = time.perf_counter() - start
        failed = [r for r in report.results if r.status != "imported"]
        if failed:
            raise SystemExit(f"{len(failed)} run(s) not imported, e.g. {failed[0].source}: {failed[0].message}")
        print(report.events, elapsed)
        return
    with tempfile.TemporaryDirectory(prefix="parallax-bench-") as scratch:
        upload = Path(scratch) / "upload" / Path(folder).name  # the batch deletes its upload's folder
        shutil.copytree(folder, upload)
        pk = ImportBatch.objects.create(source_name=upload.name, upload_path=str(upload)).pk
        start = time.perf_counter()
        done = import_batch_run(batch_id=pk)
        elapsed = time.perf_counter() - start
    if (done.status, done.failed, done.duplicates) != ("done", 0, 0):
        raise SystemExit(f"batch {done.status}: {done.failed} failed, {done.duplicates} duplicates")
    print(done.events, elapsed)


if __name__ == "__main__":
    main(sys.argv[1], batch="--batch" in sys.argv[2:])
