"""Run page server time: the giant run (134 sub-agents, ~190k events) vs a 3-agent run, in one
fresh SQLite database. Target: largest ÷ smallest ≤ 1.5 with the same number of queries."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
scratch = tempfile.mkdtemp(prefix="parallax-page-bench-")
os.environ.update(DEBUG="1", DJANGO_SETTINGS_MODULE="config.settings", DATABASE_URL=f"sqlite:///{scratch}/db.sqlite3")

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from trajectories.models import Run  # noqa: E402
from trajectories.services import import_paths  # noqa: E402


def main() -> None:
    call_command("migrate", verbosity=0)
    giant = ROOT / "var" / "bench" / "giant" / "giant.jsonl"
    if not giant.exists():
        from bench.make_giant import main as make_giant

        make_giant(str(giant))
    import_paths(paths=[giant, ROOT / "tests" / "fixtures" / "real" / "kimi"])
    user = User.objects.create_user("bench", is_staff=True)
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    results = []
    for run in Run.objects.order_by("-n_events"):
        url = f"/trajectories/runs/{run.pk}/"
        client.get(url)
        start = time.perf_counter()
        for _ in range(50):
            with CaptureQueriesContext(connection) as queries:
                client.get(url)
        results.append((run, (time.perf_counter() - start) / 50, len(queries)))
    for run, seconds, queries in results:
        print(
            f"run page, {run.n_contexts:>4} agents, {run.n_events:>7,} events: {seconds * 1000:6.1f} ms, "
            f"{queries} queries"
        )
    print(f"ratio largest / smallest: {results[0][1] / results[-1][1]:.2f} (target ≤ 1.5)")


if __name__ == "__main__":
    main()
