"""Write one giant concurrent run and its sequential twin, as Parallax JSONL.

    python bench/make_giant.py OUT.jsonl [--subagents 320] [--events-per-agent 700] [--text-bytes 120]

Sub-agents are spawned over the run with up to 12 alive at once and their events interleave
in time order, as in a real multi-agent log.
Event texts are drawn from a pool of tool outputs whose length averages `--text-bytes`
(raise it to reach a given file size: ~1 GiB is 320 × 4,000 events at 700 bytes). Contexts
declare no end time: each ends at its last event (docs/format.md).
The twin (`OUT-sequential.jsonl`) is a small sequential run of the same task.
"""

from __future__ import annotations

import argparse
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

TOOLS = ("Bash", "Read", "Edit", "Grep", "Write", "Glob")
FILES = [f"src/module_{i:02d}/file_{j}.py" for i in range(20) for j in range(5)]
MAX_ALIVE = 12


def _texts(rng: random.Random, mean_bytes: int) -> list[str]:
    words = [
        "def",
        "class",
        "return",
        "import",
        "self",
        "value",
        "test",
        "assert",
        "error",
        "path",
        "file",
        "line",
        "output",
        "result",
    ]
    pool = []
    for _ in range(512):
        target = max(8, int(rng.expovariate(1 / mean_bytes)))
        text = []
        size = 0
        while size < target:
            word = rng.choice(words)
            text.append(word)
            size += len(word) + 1
        pool.append(" ".join(text)[:target])
    return pool


def _iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def write_giant(path: Path, *, subagents: int, events_per_agent: int, text_bytes: int, seed: int = 3) -> int:
    rng = random.Random(seed)
    texts = _texts(rng, text_bytes)
    start = datetime(2026, 8, 1, 9, 0, tzinfo=UTC)
    clock = start
    seq: dict[str, int] = {}
    n_events = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:

        def line(obj: dict) -> None:
            out.write(orjson.dumps(obj) + b"\n")

        def event(ctx: str, kind: str, **extra) -> None:
            nonlocal n_events
            seq[ctx] = seq.get(ctx, -1) + 1
            n_events += 1
            line({"type": "event", "context": ctx, "seq": seq[ctx], "ts": _iso(clock), "kind": kind, **extra})

        line(
            {
                "type": "run",
                "format": "parallax/1",
                "run_id": "giant/concurrent",
                "task": {"benchmark": "LoopsBench", "id": "giant-000", "difficulty": "hard"},
                "agent": {"system": "Codex", "model": "gpt-5-codex"},
                "mode": "concurrent",
                "outcomes": {"task_pass": False, "tests_passed": 410, "tests_total": 512},
            }
        )
        line({"type": "context", "id": "main", "role": "main", "label": "main agent", "started_at": _iso(start)})
        event("main", "message", tool="user", text="Solve giant-000 (LoopsBench).")
        alive: dict[str, int] = {}  # context → events still to emit
        spawned = 0
        while spawned < subagents or alive:
            clock += timedelta(milliseconds=rng.randrange(5, 400))
            if spawned < subagents and len(alive) < MAX_ALIVE and rng.random() < 0.02 + 0.3 * (not alive):
                ctx = f"sub-{spawned:03d}"
                event("main", "spawn", tool="spawn_agent", text=f"Spawn worker {spawned}", target=ctx)
                line(
                    {
                        "type": "context",
                        "id": ctx,
                        "parent": "main",
                        "role": "sub",
                        "label": f"worker {spawned}: {rng.choice(('implement', 'test', 'investigate'))} "
                        f"{rng.choice(FILES)}",
                        "started_at": _iso(clock),  # it ends at its last event
                        "status": "failed" if rng.random() < 0.1 else "completed",
                    }
                )
                alive[ctx] = events_per_agent
                spawned += 1
                continue
            if not alive or rng.random() < 0.05:
                tool = rng.choice(TOOLS)
                event("main", "tool_call", tool=tool, text=rng.choice(texts))
                continue
            ctx = rng.choice(list(alive))
            tool = rng.choice(TOOLS)
            kind = "file_write" if tool in ("Edit", "Write") else "tool_call"
            files = [rng.choice(FILES)] if kind == "file_write" or tool == "Read" else []
            event(ctx, kind, tool=tool, text=rng.choice(texts), files=files)
            alive[ctx] -= 1
            if not alive[ctx]:
                del alive[ctx]
                event("main", "join", tool="wait", text=f"{ctx} finished", target=ctx)
        clock += timedelta(seconds=5)
        event("main", "message", tool="assistant", text="Done.")
    twin = path.with_name(path.stem + "-sequential.jsonl")
    with twin.open("wb") as out:
        out.write(orjson.dumps({**_header(), "run_id": "giant/sequential", "mode": "sequential"}) + b"\n")
        out.write(orjson.dumps({"type": "context", "id": "main", "role": "main"}) + b"\n")
        for k in range(50):
            ts = _iso(start + timedelta(seconds=k))
            out.write(
                orjson.dumps({"type": "event", "context": "main", "seq": k, "ts": ts, "kind": "tool_call"}) + b"\n"
            )
    return n_events


def _header() -> dict:
    return {
        "type": "run",
        "format": "parallax/1",
        "task": {"benchmark": "LoopsBench", "id": "giant-000", "difficulty": "hard"},
        "agent": {"system": "Codex", "model": "gpt-5-codex"},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--subagents", type=int, default=320)
    parser.add_argument("--events-per-agent", type=int, default=700)
    parser.add_argument("--text-bytes", type=int, default=120)
    args = parser.parse_args()
    n = write_giant(
        args.out, subagents=args.subagents, events_per_agent=args.events_per_agent, text_bytes=args.text_bytes
    )
    print(f"{args.out}: {n:,} events, {args.out.stat().st_size / 2**20:,.1f} MiB")


if __name__ == "__main__":
    main()
