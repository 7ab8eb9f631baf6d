"""Import benchmark (`make bench`): throughput and peak memory, with baselines, in one run.

Each measurement runs in its own process so its peak RSS is its own (`wait4` rusage):
  * parse-only  — the same parsers over the same files, no database (the floor);
  * parallax    — `manage.py import_trajectories` into a fresh database (bulk inserts);
  * naive       — one ORM `save()` per event, on a sample of runs, scaled per event.
Set BENCH_DATABASE_URL=postgres://… to import into PostgreSQL instead of a fresh SQLite file.
Figures go to stdout; copy them into docs/performance.md with the date and machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "var" / "bench"


def child(args: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run a child process; return (seconds, peak RSS in MiB, stdout)."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"benchmark step failed: {' '.join(args)}\n{out[-2000:]}")
    return elapsed, usage.ru_maxrss / 1024, out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", default="paper", choices=("demo", "paper"))
    parser.add_argument("--naive-runs", type=int, default=60)
    args = parser.parse_args()
    corpus = OUT / f"corpus-{args.scale}"
    env = {**os.environ, "DEBUG": "1", "CELERY_TASK_ALWAYS_EAGER": "1"}
    if not corpus.exists():
        child(["manage.py", "generate_corpus", "--scale", args.scale, "--seed", "1", "--out", str(corpus)], env)
    files = sorted(corpus.glob("*.jsonl*"))
    size_mb = sum(f.stat().st_size for f in files) / 2**20

    db_url = os.environ.get("BENCH_DATABASE_URL")
    if not db_url:
        db_file = OUT / "bench.sqlite3"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db_file}{suffix}").unlink(missing_ok=True)
        db_url = f"sqlite:///{db_file}"
    env["DATABASE_URL"] = db_url
    if db_url.startswith("postgres"):
        child(["manage.py", "flush", "--noinput"], env)
    child(["manage.py", "migrate", "--noinput", "-v0"], env)

    t_parse, rss_parse, out = child(["bench/parse_only.py", str(corpus)], env)
    events = int(out.split()[0])
    t_import, rss_import, _ = child(["manage.py", "import_trajectories", str(corpus), "--quiet-ok"], env)

    sample = OUT / "naive-sample"
    shutil.rmtree(sample, ignore_errors=True)
    sample.mkdir(parents=True)
    for f in files[: args.naive_runs]:
        shutil.copy(f, sample / f.name)
    child(["manage.py", "flush", "--noinput"], env) if db_url.startswith("postgres") else None
    t_naive, rss_naive, out = child(["bench/naive_import.py", str(sample)], env)
    naive_events = int(out.split()[0])

    giant = OUT / "giant"
    if not (giant / "giant.jsonl").exists():
        child(["bench/make_giant.py", str(giant / "giant.jsonl")], env)
    tg_parse, rg_parse, out = child(["bench/parse_only.py", str(giant)], env)
    giant_events = int(out.split()[0])
    tg_import, rg_import, _ = child(["manage.py", "import_trajectories", str(giant), "--quiet-ok"], env)

    rate_parse = events / t_parse
    rate_import = events / t_import
    rate_naive = naive_events / t_naive
    backend = db_url.split(":", 1)[0]
    print(f"corpus: {len(files)} runs, {events:,} events, {size_mb:.1f} MiB ({args.scale} scale); database: {backend}")
    print(f"{'step':<12}{'events':>12}{'seconds':>10}{'events/s':>12}{'peak RSS MiB':>14}")
    for name, n, t, rss in (
        ("parse-only", events, t_parse, rss_parse),
        ("parallax", events, t_import, rss_import),
        ("naive ORM", naive_events, t_naive, rss_naive),
    ):
        print(f"{name:<12}{n:>12,}{t:>10.1f}{n / t:>12,.0f}{rss:>14.0f}")
    print(
        f"giant run: {giant_events:,} events in one file; parse-only {tg_parse:.1f} s ({rg_parse:.0f} MiB), "
        f"parallax {tg_import:.1f} s ({giant_events / tg_import:,.0f} events/s, {rg_import:.0f} MiB) "
        f"= {tg_import / tg_parse:.1f}x parse-only (process start-up included in both)"
    )
    print(
        f"ratios: parallax / parse-only time = {rate_parse / rate_import:.2f}x (target <= 2), "
        f"parallax / naive speed = {rate_import / rate_naive:.1f}x (target >= 20)"
    )


if __name__ == "__main__":
    main()
