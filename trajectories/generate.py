"""Synthetic Parallax JSONL corpora with the study's shape (ORM-free, deterministic).

`paper` scale = 354 tasks × 3 agent systems × 2 modes = 2,124 runs over 5 benchmarks and
3 difficulty groups. Sub-agent counts follow the study's pattern: on hard LoopsBench tasks
one system fans out to ≈134 sub-agents, another to ≈67 with higher peaks, the third keeps
1–3 active at once. Everything else is plausible noise; it is test data, not a result.
"""

from __future__ import annotations

import gzip
import hashlib
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

BENCHMARKS = {  # name -> tasks at paper scale (sums to 354)
    "SWE-bench Verified": 100,
    "RepoZero": 64,
    "NL2Repo": 70,
    "ProgramBench": 60,
    "LoopsBench": 60,
}
DIFFICULTIES = ("easy", "medium", "hard")
SCALES = {"demo": 0.04, "paper": 1.0}


@dataclass(frozen=True)
class AgentProfile:
    name: str
    model: str
    fanout: float  # mean sub-agents on a hard LoopsBench task
    max_parallel: int  # how many it runs at once
    duration_factor: float


AGENTS = (
    AgentProfile("Codex", "gpt-5-codex", fanout=134, max_parallel=6, duration_factor=1.0),
    AgentProfile("Claude Code", "claude-opus-5", fanout=67, max_parallel=16, duration_factor=1.2),
    AgentProfile("Kimi Code", "kimi-k3", fanout=4, max_parallel=3, duration_factor=0.9),
)
BENCH_WEIGHT = {"SWE-bench Verified": 0.05, "RepoZero": 0.3, "NL2Repo": 0.35, "ProgramBench": 0.4, "LoopsBench": 1.0}
DIFF_WEIGHT = {"easy": 0.1, "medium": 0.35, "hard": 1.0}
TOOLS = ("Bash", "Read", "Grep", "Edit", "Write")
FILES = ("src/core.py", "src/api.py", "src/util.py", "tests/test_core.py", "README.md", "setup.py")


def task_list(scale: str) -> list[tuple[str, str, str]]:
    factor = SCALES[scale]
    tasks = []
    for bench, count in BENCHMARKS.items():
        n = max(len(DIFFICULTIES), round(count * factor))  # every difficulty group, even at demo scale
        slug = bench.lower().replace(" ", "-").replace("_", "-")
        for i in range(n):
            tasks.append((bench, f"{slug}-{i:03d}", DIFFICULTIES[i % 3]))
    return tasks


def generate_corpus(
    out: Path,
    *,
    scale: str = "demo",
    seed: int = 0,
    compress: bool = False,
    events_per_agent: int = 8,
    cells: bool = False,
) -> list[Path]:
    """Write one file per run; returns the paths. Same seed, same bytes. With `cells`, each run is
    a folder of the study's layout instead (`<benchmark>/<task>/<agent>/<parallel|serial>/`: cell.json,
    the log under agent/, and demo artifacts under cell/), and the paths are those folders."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(SCALES)}")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for bench, task_id, difficulty in task_list(scale):
        for agent in AGENTS:
            for mode in ("concurrent", "sequential"):
                rng = random.Random(f"{seed}:{bench}:{task_id}:{agent.name}:{mode}")
                lines = list(_run_lines(rng, bench, task_id, difficulty, agent, mode, events_per_agent))
                data = b"".join(orjson.dumps(line) + b"\n" for line in lines)
                if cells:
                    written.append(_write_cell(out, lines, data, rng))
                    continue
                name = f"{task_id}__{agent.name.replace(' ', '-').lower()}__{mode}.jsonl"
                path = out / (name + (".gz" if compress else ""))
                if compress:
                    with gzip.GzipFile(path, "wb", mtime=0) as handle:
                        handle.write(data)
                else:
                    path.write_bytes(data)
                written.append(path)
    return written


def _write_cell(out: Path, lines: list[dict], data: bytes, rng: random.Random) -> Path:
    """One run in the study's cell layout, with artifacts that say they are demo data."""
    header = lines[0]
    outcomes = header["outcomes"]
    mode = "parallel" if header["mode"] == "concurrent" else "serial"
    slug = header["agent"]["system"].replace(" ", "-").lower()
    cell = out / header["task"]["benchmark"].lower().replace(" ", "-") / header["task"]["id"] / slug / mode
    (cell / "agent").mkdir(parents=True, exist_ok=True)
    (cell / "cell" / "evaluation").mkdir(parents=True, exist_ok=True)
    (cell / "agent" / "trajectory.jsonl").write_bytes(data)
    passed, total = outcomes["tests_passed"], outcomes["tests_total"]
    record = {"mode": mode, "agent": header["agent"]["system"], "solution_passed": outcomes["task_pass"]}
    record["quality"] = {"passed": passed, "total": total}
    (cell / "cell.json").write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2) + b"\n")
    written = sorted({f for line in lines if line.get("kind") == "file_write" for f in line.get("files", [])})
    (cell / "cell" / "final.txt").write_text(
        f"[demo data] Finished {header['task']['id']}: changed {', '.join(written) or 'nothing'}; "
        f"{passed} of {total} tests pass locally.\n"
    )
    patch = []
    for path in written:
        patch += [f"diff --git a/{path} b/{path}", f"--- a/{path}", f"+++ b/{path}", "@@ -1,3 +1,4 @@", " # demo data"]
        patch += [f"-value = {rng.randrange(10)}", f"+value = {rng.randrange(10, 20)}", f"+# changed by {slug}", " "]
    (cell / "cell" / "model.patch").write_text("\n".join(patch) + ("\n" if patch else ""))
    failing = set(rng.sample(range(total), total - passed))
    results = [f"tests/test_core.py::test_case_{i:03d} {'FAILED' if i in failing else 'PASSED'}" for i in range(total)]
    (cell / "cell" / "evaluation" / "test_output.txt").write_text("\n".join(results) + "\n")
    summary = {"kind": "demo data", "counts": {"passed": passed, "failed": total - passed, "total": total}}
    summary["solution_passed"] = outcomes["task_pass"]
    (cell / "cell" / "evaluation" / "summary.json").write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    return cell


def _iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def _run_lines(
    rng: random.Random, bench: str, task_id: str, difficulty: str, agent: AgentProfile, mode: str, events_per_agent: int
):
    start = datetime(2026, 8, 1, tzinfo=UTC) + timedelta(minutes=rng.randrange(0, 60 * 24 * 30))
    base_minutes = {"easy": 6, "medium": 15, "hard": 35}[difficulty] * agent.duration_factor
    if mode == "concurrent":
        fanout = agent.fanout * BENCH_WEIGHT[bench] * DIFF_WEIGHT[difficulty]
        n_sub = max(0, round(rng.gauss(fanout, max(1.0, fanout * 0.15))))
        if agent.name == "Kimi Code":
            n_sub = min(n_sub, 3) if difficulty != "hard" else max(1, min(n_sub, 6))
    else:
        n_sub = 0
    total = timedelta(minutes=base_minutes * rng.uniform(0.6, 1.4) * (0.8 if n_sub else 1.0))
    end = start + total
    tests_total = rng.randrange(20, 600)
    pass_rate = min(1.0, max(0.0, rng.gauss(0.8 if difficulty == "easy" else 0.55, 0.25)))
    tests_passed = round(tests_total * pass_rate)
    yield {
        "type": "run",
        "format": "parallax/1",
        "run_id": f"{task_id}/{agent.name}/{mode}",
        "task": {
            "benchmark": bench,
            "id": task_id,
            "difficulty": difficulty,
            "prompt_sha256": hashlib.sha256(f"{bench}/{task_id}".encode()).hexdigest(),
        },
        "agent": {"system": agent.name, "model": agent.model},
        "mode": mode,
        "outcomes": {
            "task_pass": tests_passed == tests_total,
            "tests_passed": tests_passed,
            "tests_total": tests_total,
            "duration_s": round(total.total_seconds(), 1),
            "shell_calls": rng.randrange(5, 60 + 5 * n_sub),
            "tokens": rng.randrange(100_000, 2_000_000) * (1 + n_sub // 10),
        },
    }
    yield {
        "type": "context",
        "id": "main",
        "role": "main",
        "label": "main agent",
        "started_at": _iso(start),
        "ended_at": _iso(end),
    }
    seq: dict[str, int] = {}

    def event(ctx: str, t: datetime, kind: str, **extra):
        seq[ctx] = seq.get(ctx, -1) + 1
        return {"type": "event", "context": ctx, "seq": seq[ctx], "ts": _iso(t), "kind": kind, **extra}

    yield event("main", start, "message", tool="user", text=f"Solve {task_id} ({bench}).")
    if n_sub:
        window_start = start + total * rng.uniform(0.05, 0.3)
        window = (end - window_start) * 0.85
        slots = [window_start] * agent.max_parallel
        for i in range(n_sub):
            slot = min(range(len(slots)), key=lambda k: slots[k])
            # A worker starts a little after its slot frees up, but never after the run ends (a full
            # slot can free up at `end` itself; starting past it would end the worker before it began).
            s = min(slots[slot] + timedelta(seconds=rng.uniform(0, 20)), end)
            length = window * rng.uniform(0.3, 1.2) * agent.max_parallel / max(n_sub, 1)
            e = min(s + length, end)
            slots[slot] = e
            ctx = f"sub-{i:03d}"
            yield event("main", s, "spawn", tool="spawn_agent", text=f"Spawn worker {i}", target=ctx)
            yield {
                "type": "context",
                "id": ctx,
                "parent": "main",
                "role": "sub",
                "label": f"worker {i}: {rng.choice(('implement', 'test', 'investigate', 'refactor'))} "
                f"{rng.choice(FILES)}",
                "started_at": _iso(s),
                "ended_at": _iso(e),
                "status": rng.choice(("completed", "completed", "completed", "failed")),
            }
            step = (e - s) / max(events_per_agent, 1)
            for k in range(events_per_agent):
                tool = rng.choice(TOOLS)
                kind = "file_write" if tool in ("Edit", "Write") else "tool_call"
                yield event(
                    ctx,
                    s + step * k,
                    kind,
                    tool=tool,
                    text=f"{tool} step {k}",
                    files=[rng.choice(FILES)] if kind == "file_write" or tool == "Read" else [],
                )
            yield event("main", e, "join", tool="wait", text=f"worker {i} done", target=ctx)
    step = total / max(events_per_agent * 2, 1)
    for k in range(events_per_agent * 2):
        tool = rng.choice(TOOLS)
        kind = "file_write" if tool in ("Edit", "Write") else "tool_call"
        yield event(
            "main",
            start + step * k + timedelta(seconds=1),
            kind,
            tool=tool,
            text=f"main {tool} {k}",
            files=[rng.choice(FILES)] if kind == "file_write" else [],
        )
    yield event("main", end, "message", tool="assistant", text="Done.")
