"""Import benchmark (`make bench`): throughput and peak memory against two baselines, in one run.

Data sets (generated once under var/bench/, reused afterwards):
  * paper   — the study corpus: 2,124 runs (354 tasks × 3 agents × 2 modes), Parallax JSONL;
  * giant   — one concurrent run with 320 sub-agents and ~225k events (60 MiB);
  * huge    — one ≥ 1 GiB file (320 sub-agents × 4,000 events, long tool outputs).
Steps, each in its own process so its peak RSS is its own (`wait4` rusage), each timing its own
work (process start-up excluded):
  * parse-only — the same parsers over the same files, no database (the floor);
  * parallax   — `import_paths` (what every entry point calls) into an empty database;
  * naive      — one ORM `save()` per event (60 runs of the corpus), per-event rate.
The paper corpus is also imported as an upload batch (`import_batch_run`, what the web page and
the API run in the worker, progress updates included). Every step runs --repeat times (3),
alternating, and the best time of each counts: the machine is shared, and the best of three is
what the code can do, on both sides of each ratio.
SQLite by default (a fresh file per data set); BENCH_DATABASE_URL=postgres://… for PostgreSQL
(flushed before each data set). Copy the printed table into docs/performance.md.
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
MiB = 2**20


def child(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Run a child process; return (peak RSS in MiB, stdout)."""
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"benchmark step failed: {' '.join(args)}\n{out[-2000:]}")
    return usage.ru_maxrss / 1024, out


def measured(args: list[str], env: dict[str, str]) -> tuple[int, float, float]:
    """(events, seconds of work, peak RSS MiB) of a child printing `<events> <seconds>`."""
    rss, out = child(args, env)
    events, seconds = out.split()[-2:]
    return int(events), float(seconds), rss


def datasets(env: dict[str, str], huge_gib: float) -> dict[str, Path]:
    sets = {"paper": OUT / "corpus-paper", "giant": OUT / "giant-320", "huge": OUT / "huge"}
    if not sets["paper"].exists():
        child(["manage.py", "generate_corpus", "--scale", "paper", "--seed", "1", "--out", str(sets["paper"])], env)
    if not (sets["giant"] / "giant.jsonl").exists():
        child(["bench/make_giant.py", str(sets["giant"] / "giant.jsonl")], env)
    if huge_gib > 0 and not (sets["huge"] / "huge.jsonl").exists():
        per_agent = max(1, int(4000 * huge_gib))
        child(["bench/make_giant.py", str(sets["huge"] / "huge.jsonl"), "--events-per-agent", str(per_agent),
               "--text-bytes", "700"], env)  # fmt: skip
    if huge_gib <= 0:
        del sets["huge"]
    return sets


def fresh_database(env: dict[str, str]) -> None:
    url = env["DATABASE_URL"]
    if url.startswith("sqlite"):
        path = Path(url.removeprefix("sqlite:///"))
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    else:
        child(["manage.py", "flush", "--noinput"], env)
    child(["manage.py", "migrate", "--noinput", "-v0"], env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--huge-gib", type=float, default=1.0, help="size of the huge file (0 to skip it)")
    parser.add_argument("--naive-runs", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=3, help="runs of every step; the best time counts")
    args = parser.parse_args()
    env = {**os.environ, "DEBUG": "0", "SECRET_KEY": "bench-" + "x" * 50, "CELERY_TASK_ALWAYS_EAGER": "1"}
    env["DATABASE_URL"] = os.environ.get("BENCH_DATABASE_URL") or f"sqlite:///{OUT / 'bench.sqlite3'}"
    backend = "PostgreSQL" if env["DATABASE_URL"].startswith("postgres") else "SQLite"
    sets = datasets(env, args.huge_gib)

    sample = OUT / "naive-sample"
    shutil.rmtree(sample, ignore_errors=True)
    sample.mkdir(parents=True)
    for f in sorted(sets["paper"].glob("*.jsonl*"))[: args.naive_runs]:
        shutil.copy(f, sample / f.name)
    naive = []
    for _ in range(args.repeat):
        fresh_database(env)
        naive.append(measured(["bench/naive_import.py", str(sample)], env))
    naive_events, naive_s, naive_rss = min(naive, key=lambda m: m[1])
    naive_rate = naive_events / naive_s

    started = time.strftime("%Y-%m-%d %H:%M")
    steps = [(name, folder, []) for name, folder in sets.items()]
    steps.insert(1, ("paper, as an upload", sets["paper"], ["--batch"]))
    rows = []
    for name, folder, flags in steps:
        size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        runs = sum(1 for f in folder.rglob("*.jsonl*"))
        parses, imports = [], []
        for _ in range(args.repeat):
            parses.append(measured(["bench/parse_only.py", str(folder)], env))
            fresh_database(env)
            imports.append(measured(["bench/timed_import.py", str(folder), *flags], env))
        events = parses[0][0]
        assert all(m[0] == events for m in parses + imports), (name, parses, imports)
        parse_s, import_s = min(m[1] for m in parses), min(m[1] for m in imports)
        parse_rss, import_rss = max(m[2] for m in parses), max(m[2] for m in imports)
        spread = max(m[1] for m in imports) / import_s
        rows.append((name, runs, events, size, parse_s, parse_rss, import_s, import_rss, spread))

    print(
        f"\n{backend}, {started}, {os.cpu_count()} CPUs — work time per process (start-up excluded), "
        f"best of {args.repeat}"
    )
    print(
        "| data set | runs | events | source | parse-only | Parallax import | import ÷ parse | events/s | × naive "
        "| peak RSS (parse / import) | slowest import ÷ best |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, runs, events, size, parse_s, parse_rss, import_s, import_rss, spread in rows:
        rate = events / import_s
        print(
            f"| {name} | {runs:,} | {events:,} | {size / MiB:,.0f} MiB | {parse_s:.2f} s | {import_s:.2f} s | "
            f"**{import_s / parse_s:.2f}×** | {rate:,.0f} | **{rate / naive_rate:.0f}×** | "
            f"{parse_rss:.0f} / {import_rss:.0f} MiB | {spread:.2f} |"
        )
    print(
        f"naive ORM baseline: {naive_events:,} events of {args.naive_runs} corpus runs in {naive_s:.2f} s = "
        f"{naive_rate:,.0f} events/s ({naive_rss:.0f} MiB). Targets: paper corpus import ÷ parse ≤ 5 on SQLite, "
        "≤ 3 on PostgreSQL; × naive ≥ 20; peak RSS < 300 MiB on the ≥ 1 GiB file."
    )


if __name__ == "__main__":
    main()
