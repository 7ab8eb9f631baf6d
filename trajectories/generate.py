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


# -- planted failure signatures (docs/signatures.md) ---------------------------------------

PLANTS = (
    "same_file_collision",
    "unisolated_workspace_writes",
    "unfinished_children",
    "parent_idle_wait",
    "fanout_budget",
    "serial_subagents",
    "duplicated_reads",
    "checkpoint_free_retry",
    "verification_order",
)
# The codebook modes a careful annotator would give each plant (what it was built to show): the
# gold that `evaluate_signatures` measures the detectors against on this corpus (docs/signatures.md).
PLANTED_MODES: dict[str, tuple[str, ...]] = {
    "same_file_collision": ("same-file-collision",),
    "unisolated_workspace_writes": ("unisolated-workspace-writes",),
    "unfinished_children": ("early-child-termination",),
    "parent_idle_wait": ("blind-timeout-wait",),
    "fanout_budget": ("fan-out-budget-exhaustion",),
    "serial_subagents": ("serial-investigation",),
    "duplicated_reads": ("serial-investigation",),  # the codebook's mode for duplicated investigation
    "checkpoint_free_retry": ("checkpoint-free-retry",),
    "verification_order": ("merge-after-verification",),
}
PLANTED_BENCHMARK = "Planted signatures"
MANIFEST_NAME = "manifest.json"


def generate_planted(out: Path, *, seed: int = 0, copies: int = 2, twins: bool = False) -> list[Path]:
    """A corpus where each run has exactly the signatures the manifest says: `copies` clean runs
    (a disciplined fan-out that no detector fires on) and `copies` runs per entry of PLANTS, each
    the clean run with that one failure planted. Writes one Parallax JSONL file per run and
    `manifest.json` ({file name: [planted detectors]}); returns the run files. With `twins`, also
    each run's sequential twin (one agent, no signature) under `twins/`, so that the runs can be
    put in a study. Same seed, same bytes. The clean shape and every plant are described in
    docs/signatures.md."""
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, list[str]] = {}
    written = []
    for plant in (None, *PLANTS):
        for copy in range(copies):
            rng = random.Random(f"{seed}:planted:{plant}:{copy}")
            agent = AGENTS[copy % len(AGENTS)]
            task_id = f"planted-{(plant or 'clean').replace('_', '-')}-{copy:02d}"
            lines = _planted_lines(rng, task_id, agent, plant)
            path = out / f"{task_id}.jsonl"
            path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
            manifest[path.name] = [plant] if plant else []
            written.append(path)
            if twins:
                (out / "twins").mkdir(exist_ok=True)
                twin = _planted_twin(random.Random(f"{seed}:planted-twin:{plant}:{copy}"), task_id, agent)
                (out / "twins" / f"{task_id}-sequential.jsonl").write_bytes(
                    b"".join(orjson.dumps(line) + b"\n" for line in twin)
                )
    (out / MANIFEST_NAME).write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    return written


def _planted_twin(rng: random.Random, task_id: str, agent: AgentProfile) -> list[dict]:
    """The sequential twin of a planted run: the main agent alone reads, edits, tests and is done."""
    start = datetime(2026, 9, 1, tzinfo=UTC) + timedelta(minutes=rng.randrange(0, 60 * 24 * 30))
    end = 500.0
    steps = [
        (0.0, "message", {"tool": "user", "text": f"Solve {task_id}."}),
        (5.0, "tool_call", {"tool": "Read", "text": "read the plan", "files": ["docs/plan.md"]}),
        *(
            (30.0 + 60 * i, "file_write", {"tool": "Edit", "text": "edit", "files": [f"src/mod_{i}.py"]})
            for i in range(3)
        ),
        (300.0, "tool_call", {"tool": "Bash", "text": "pytest -q"}),
        (end, "message", {"tool": "assistant", "text": "Done."}),
    ]
    return [
        {
            "type": "run",
            "format": "parallax/1",
            "run_id": f"{task_id}/{agent.name}/sequential",
            "task": {"benchmark": PLANTED_BENCHMARK, "id": task_id, "difficulty": "medium"},
            "agent": {"system": agent.name, "model": agent.model},
            "mode": "sequential",
            "outcomes": {"task_pass": rng.random() < 0.5, "duration_s": end},
        },
        {
            "type": "context",
            "id": "main",
            "role": "main",
            "label": "main agent",
            "started_at": _iso(start),
            "ended_at": _iso(start + timedelta(seconds=end)),
        },  # fmt: skip
        *(
            {
                "type": "event",
                "context": "main",
                "seq": seq,
                "ts": _iso(start + timedelta(seconds=t)),
                "kind": kind,
                **extra,
            }  # fmt: skip
            for seq, (t, kind, extra) in enumerate(steps)
        ),
    ]


def _planted_lines(rng: random.Random, task_id: str, agent: AgentProfile, plant: str | None) -> list[dict]:
    start = datetime(2026, 9, 1, tzinfo=UTC) + timedelta(minutes=rng.randrange(0, 60 * 24 * 30))

    def at(seconds: float) -> str:
        return _iso(start + timedelta(seconds=seconds))

    seq: dict[str, int] = {}
    events: list[dict] = []

    def event(ctx: str, t: float, kind: str, **extra) -> None:
        seq[ctx] = seq.get(ctx, -1) + 1
        events.append({"type": "event", "context": ctx, "seq": seq[ctx], "ts": at(t), "kind": kind, **extra})

    end = 600.0
    header = {
        "type": "run",
        "format": "parallax/1",
        "run_id": f"{task_id}/{agent.name}/concurrent",
        "task": {"benchmark": PLANTED_BENCHMARK, "id": task_id, "difficulty": "medium"},
        "agent": {"system": agent.name, "model": agent.model},
        "mode": "concurrent",
        "outcomes": {"task_pass": rng.random() < 0.5, "duration_s": end},
    }
    contexts = [
        {
            "type": "context",
            "id": "main",
            "role": "main",
            "label": "main agent",
            "started_at": at(0),
            "ended_at": at(end),
        }
    ]
    # Three workers, each on its own module in its own worktree, overlapping; or one after another.
    if plant == "serial_subagents":
        windows = [(10.0, 70.0), (80.0, 140.0), (150.0, 210.0)]
    else:
        windows = [(10.0 + i, 200.0 + 20 * i) for i in range(3)]
    if plant == "unfinished_children":
        windows[2] = (windows[2][0], 700.0)  # still running when the main agent says it is done
    workers = [(f"w{i}", i, s, e) for i, (s, e) in enumerate(windows)]
    if plant == "checkpoint_free_retry":
        workers[2] = ("w2", 2, windows[2][0], 100.0)
        workers.append(("w2b", 2, 110.0, 230.0))

    event("main", 0, "message", tool="user", text=f"Solve {task_id}.")
    event("main", 5, "tool_call", tool="Read", text="read the plan", files=["docs/plan.md"])
    if plant == "verification_order":
        event("main", 8, "tool_call", tool="Bash", text="pytest -q")  # before any worker wrote
    for ctx, _slot, s, _e in workers:
        event("main", s, "spawn", tool="spawn_agent", text=f"spawn {ctx}", target=ctx)
    if plant == "fanout_budget":
        event("main", 13, "spawn", tool="spawn_agent", text="spawn w3", target="w3")
        event("main", 13.5, "tool_result", tool="spawn_agent", text="[error] spawn refused: at most 3 sub-agents")
    for ctx, slot, s, e in workers:
        label = f"worker {slot}: implement src/mod_{slot}.py"
        if plant == "checkpoint_free_retry" and slot == 2:
            label += f" · attempt {1 if ctx == 'w2' else 2} of 2"
        status = "failed" if ctx == "w2" and plant == "checkpoint_free_retry" else "completed"
        contexts.append(
            {"type": "context", "id": ctx, "parent": "main", "role": "sub", "label": label, "started_at": at(s),
             "ended_at": at(e), "status": status}
        )  # fmt: skip
        brief = (
            f"You own src/mod_{slot}.py and nothing else. Implement the parser described in docs/plan.md, "
            f"section {slot + 1}, keep the public names, add no dependency, and report the functions you "
            "changed and how you checked them. Do not edit other modules; the main agent integrates."
        )
        event(ctx, s, "message", tool="user", text=brief)
        if plant != "unisolated_workspace_writes":
            event(ctx, s + 1, "tool_call", tool="Bash", text=f"git worktree add ../wt-{ctx} -b {ctx}")
        event(ctx, s + 5, "tool_call", tool="Read", text="read", files=[f"src/mod_{slot}.py"])
        if plant == "duplicated_reads" and ctx == "w1":
            event(ctx, s + 6, "tool_call", tool="Read", text="read", files=["src/mod_0.py"])
        event(ctx, s + 30, "file_write", tool="Edit", text="edit", files=[f"src/mod_{slot}.py"])
        if plant == "same_file_collision" and ctx == "w1":
            event(ctx, s + 40, "file_write", tool="Edit", text="edit", files=["src/mod_0.py"])
        event(ctx, s + 45, "tool_call", tool="Bash", text=f"python -m compileall src/mod_{slot}.py")
        event(ctx, min(s + 50, e), "message", tool="assistant", text=f"{ctx} done")
    busy_end = max(e for *_, e in workers if e < end)
    if plant == "parent_idle_wait":  # the parent only waits on its workers, until its wait times out
        event("main", 13, "wait", tool="wait_agent", text="wait_agent w0,w1,w2 timeout_ms=180000", target="w0,w1,w2")
        event("main", 193, "tool_result", tool="wait_agent", text='{"status": {}, "timed_out": true}')
    else:  # the parent keeps working while its workers run
        for k in range(int(15 + rng.random()), int(busy_end) + 10, 10):
            event("main", k, "tool_call", tool="Read", text="review notes", files=["docs/notes.md"])
    for ctx, _slot, _s, e in workers:
        if e < end:
            event("main", e, "join", tool="wait", text=f"{ctx} done", target=ctx)
    event("main", busy_end + 20, "file_write", tool="Edit", text="integrate", files=["src/__init__.py"])
    if plant != "verification_order":
        event("main", busy_end + 30, "tool_call", tool="Bash", text="pytest -q")
    event("main", end, "message", tool="assistant", text="Done.")
    events.sort(key=lambda line: line["ts"])
    return [header, *contexts, *events]
