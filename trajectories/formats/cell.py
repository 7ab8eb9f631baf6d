"""The study's corpus layout (ORM-free): `<benchmark>/<task>/<agent>/{parallel,serial}/cell.json`.

Each cell folder is one run. `cell.json` (with the folder names as fallbacks) gives the run's task,
agent, mode and outcomes; the agent's home under `agent/` holds its native logs, read by whichever
format they are in (the runs found there are given to `cell_source`); `cell/` holds what the harness
kept: the evaluation (each test's result, evaluation.py), `status.json` (when the agent ran), and a log
of the agent's main thread, `trajectory.jsonl`, which its format may read in place of the logs under
`agent/` (`Format.cell_stream`: Codex's exec stream when the main rollout is missing). Every file of
the cell is kept with the run.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any

from ..artifacts import artifact_kind, cell_files
from ..evaluation import cell_tests, summary_counts
from . import registry
from .common import first_json_line, load_json_file, parse_timestamp
from .records import MODE_NAMES, FormatError, RunSource, display_name

AGENT_NAMES = {"codex": "Codex", "claude": "Claude Code", "claude_code": "Claude Code", "kimi": "Kimi Code"}
SHELL_TOOL_NAMES = {"exec_command", "shell", "local_shell", "Bash"}


def cell_folders(folder: Path) -> list[Path]:
    """Every cell under `folder`: the folders that hold a cell.json."""
    return sorted({cell.parent for cell in folder.rglob("cell.json")})


def agent_files(cell_dir: Path) -> list[Path]:
    """The files of the agent's home (`agent/`), where its native logs are. A cell whose agent ran in the harness's
    outer loop (LoopsBench) keeps a home per round, `agent/<agent>/round-NN/`, and the harness's own copy of each
    round's home under `cell/evaluation/…/agent-logs/outer-loop/round-NN/<agent>_home/`, each holding part of the
    sessions' files: both are read, a file found in several of them once (the longest copy)."""
    homes = [cell_dir / "agent"]
    evaluation = cell_dir / "cell" / "evaluation"
    if evaluation.is_dir():
        loops = (loop for loop in evaluation.rglob("outer-loop") if loop.is_dir())
        rounds = (r for loop in loops for r in loop.iterdir() if r.is_dir() and _ROUND.match(r.name))
        homes += sorted(home for r in rounds for home in r.iterdir() if home.is_dir() and home.name.endswith("_home"))
    kept: dict[str, Path] = {}
    for home in homes:
        if not home.is_dir():
            continue
        for path in sorted(p for p in home.rglob("*") if p.is_file() and not p.is_symlink()):
            key = _in_home(path, cell_dir)
            if key not in kept or path.stat().st_size > kept[key].stat().st_size:
                kept[key] = path
    return sorted(kept.values())


_ROUND = re.compile(r"^round-\d+$")


def _in_home(path: Path, cell_dir: Path) -> str:
    """Where a file sits in the agent's home: after a round's folder (and its `<agent>_home`) when it is in one,
    so that the copies of a round's home name each file alike; else its path in the cell."""
    parts = path.relative_to(cell_dir).parts
    for i, part in enumerate(parts):
        if _ROUND.match(part):
            rest = parts[i + 1 :]
            return "/".join(rest[1:] if rest and rest[0].endswith("_home") else rest)
    return "/".join(parts)


def _in_rounds(sources: list[RunSource], cell_dir: Path) -> bool:
    return any(_ROUND.match(part) for s in sources for p in s.files for part in p.relative_to(cell_dir).parts)


def cell_source(cell_dir: Path, found: list[RunSource], problems: list[FormatError], *, root: Path | None) -> RunSource:
    """The cell's run: the largest of the runs `found` in its agent's home (`problems`: the files
    there that could not be placed), with the cell's task, agent, mode, outcomes, clock and tests."""
    cell_file = cell_dir / "cell.json"
    display = display_name(cell_file, root)
    cell = load_json_file(cell_file, display=display)
    if not isinstance(cell, dict):
        raise FormatError("cell.json must be a JSON object", file=display)
    parts = cell_dir.parts
    # <benchmark>/<task>/<agent>/<parallel|serial>/cell.json
    path_mode, path_agent, path_task, path_bench = (list(parts[-4:])[::-1] + ["", "", "", ""])[:4]
    mode_raw = str(cell.get("mode") or path_mode)
    mode = MODE_NAMES.get(mode_raw)
    if mode is None:
        raise FormatError(f"mode must be parallel or serial, got {mode_raw!r}", file=display, field="mode")
    agent_raw = str(cell.get("agent") or path_agent)
    defaults: dict[str, Any] = {
        "benchmark": str(cell.get("benchmark") or path_bench),
        "task_id": str(cell.get("task_id") or path_task),
        "agent": AGENT_NAMES.get(agent_raw, agent_raw),
        "mode": mode,
        "difficulty": str(cell.get("difficulty") or ""),
        "prompt_sha256": str(cell.get("prompt_sha256") or ""),
        "backbone_model": str(cell.get("model") or ""),
    }
    outcomes: dict[str, Any] = {}
    if isinstance(cell.get("solution_passed"), bool):
        outcomes["task_pass"] = cell["solution_passed"]
    if isinstance(cell.get("cell_seconds"), (int, float)) and not isinstance(cell.get("cell_seconds"), bool):
        outcomes["duration_s"] = float(cell["cell_seconds"])
    usage = cell.get("usage") if isinstance(cell.get("usage"), dict) else {}
    if isinstance(usage.get("token_total"), int):
        outcomes["tokens"] = usage["token_total"]
    tools = usage.get("tools") if isinstance(usage.get("tools"), dict) else {}
    if tools:
        outcomes["shell_calls"] = sum(v for k, v in tools.items() if k in SHELL_TOOL_NAMES and isinstance(v, int))
    quality = cell.get("quality") if isinstance(cell.get("quality"), dict) else {}
    passed, total = quality.get("passed"), quality.get("total")
    stated = all(isinstance(v, int) and not isinstance(v, bool) for v in (passed, total)) and 0 <= passed <= total
    summary_file = cell_dir / "cell" / "evaluation" / "summary.json"
    if summary_file.is_file():
        outcomes.update(_evaluation_outcomes(load_json_file(summary_file, display=display_name(summary_file, root))))
    files = cell_files(cell_dir)
    # Per-test results and the counts they give: cell.json's quality, else SWE-bench's report, else the
    # official test output, else the summary (evaluation.py; docs/format.md).
    evaluation = [path for path in files if artifact_kind(path.relative_to(cell_dir).as_posix())]
    quality = (passed, total) if stated else None
    read_tests = partial(cell_tests, cell_dir, evaluation, quality=quality, task_pass=outcomes.get("task_pass"))
    tests = read_tests()
    outcomes.update(tests.outcomes())
    defaults["outcomes"] = outcomes
    stream = cell_dir / "cell" / "trajectory.jsonl"
    if stream.is_file():
        # What the harness kept of the agent's log: its format says whether it stands in for what agent/ holds.
        fmt = registry.sniff(first_json_line(stream))
        if fmt is not None and fmt.cell_stream is not None:
            found = fmt.cell_stream(stream, found, where=display_name(cell_dir, root), root=root)
    if not found:
        seen = "; ".join(e.describe() for e in problems[:3]) or "the folder is empty or missing"
        streams = [fmt.description for fmt in registry.FORMATS if fmt.cell_stream is not None]
        raise FormatError(
            f"no agent log found: expected {registry.described()} under agent/"
            + "".join(f", or {stream} in cell/trajectory.jsonl" for stream in streams)
            + f" ({seen})",
            file=display,
        )
    # One cell is one run: an outer loop's rounds joined into one where the format can; else the largest session
    # if the agent's home holds several, saying which were left out.
    best = max(found, key=lambda s: sum(p.stat().st_size for p in s.files))
    fmt = registry.named(best.format)
    rounds = [s for s in found if s.format == best.format]
    if len(rounds) > 1 and fmt.join_rounds is not None and _in_rounds(rounds, cell_dir):
        best = fmt.join_rounds(rounds)
        order = ", ".join(display_name(path, cell_dir) for path in best.files[: best.sessions])
        best.notes.append(
            f"the agent ran in an outer loop: {len(rounds)} sessions (its rounds); their main transcripts read one "
            f"after another as its main agent, in the order they began: {order or 'none is in the cell'}"
        )
        left_out = [s for s in found if all(s is not r for r in rounds)]
        read = f"its {len(rounds)} rounds"
    else:
        left_out = [s for s in found if s is not best]
        read = f"{display_name(best.files[0], cell_dir)} (the largest)"
    if left_out:
        best.notes.append(_sessions_left_out(cell_dir, read, found, left_out))
    best.header_defaults = defaults
    best.name = display_name(cell_dir, root)
    best.base = cell_dir
    best.artifacts = [path for path in files if path not in best.files]
    best.clock = _agent_clock(cell_dir, best, root=root)
    # Every test of every cell held until the import ends would grow with the corpus: its counts and
    # warnings are kept now, and the tests themselves read again when the run is stored.
    best.read_tests = read_tests
    best.notes += tests.warnings
    return best


def _sessions_left_out(cell_dir: Path, read: str, found: list[RunSource], others: list[RunSource]) -> str:
    """A cell whose agent's home holds several sessions it cannot read as one run (a format that cannot join an
    outer loop's rounds, or a home reused across attempts) is read as one of them: the warning names the others,
    kept as the run's files (each line still citable) but not read into its timeline."""
    names = ", ".join(display_name(s.files[0], cell_dir) for s in others[:5])
    more = f" and {len(others) - 5} more" if len(others) > 5 else ""
    in_rounds = " (an outer loop's rounds: each round a session of its own)" if _in_rounds(found, cell_dir) else ""
    return (
        f"the agent's home holds {len(found)} sessions{in_rounds}; read as this run: {read}; "
        f"not read into its timeline, kept as its files: {names}{more}"
    )


def _agent_clock(cell_dir: Path, source: RunSource, *, root: Path | None) -> tuple | None:
    """When the harness ran the agent, from the cell's status.json (`agent_run.started_at_utc` ..
    `finished_at_utc`); None when it does not say. A status.json that cannot be read is noted, not
    fatal: it is the harness's record, not the trajectory."""
    path = cell_dir / "cell" / "status.json"
    if not path.is_file():
        return None
    display = display_name(path, root)
    try:
        status = load_json_file(path, display=display)
        agent_run = status.get("agent_run") if isinstance(status, dict) else None
        if not isinstance(agent_run, dict):
            return None
        times = tuple(
            parse_timestamp(agent_run.get(key), file=display, field=f"agent_run.{key}")
            for key in ("started_at_utc", "finished_at_utc")
        )
    except FormatError as exc:
        source.notes.append(f"{exc.describe()} (the agent's start and end are not taken from it)")
        return None
    if times[0] and times[1] and times[1] < times[0]:
        source.notes.append(f"{display}: agent_run ends before it starts (not used)")
        return None
    return times if any(times) else None


def _evaluation_outcomes(summary: Any) -> dict[str, Any]:
    """Test counts from cell/evaluation/summary.json (several spellings are accepted)."""
    if not isinstance(summary, dict):
        return {}
    out: dict[str, Any] = {}
    counts = summary_counts(summary)  # the study's harnesses: NL2RepoBench counts, LoopsBench per-test results
    if "passed" in counts and "total" in counts and counts["passed"] <= counts["total"]:
        out.update(tests_passed=counts["passed"], tests_total=counts["total"])
    tests = summary.get("tests") if isinstance(summary.get("tests"), dict) else summary
    for target, keys in (
        ("tests_passed", ("tests_passed", "passed", "num_passed", "n_passed")),
        ("tests_total", ("tests_total", "total", "num_tests", "n_tests", "tests_run")),
    ):
        for key in keys:
            value = tests.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                out[target] = value
                break
    for key in ("test_pass", "pass_rate", "test_pass_rate"):
        value = summary.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1:
            out["test_pass"] = float(value)
            break
    if isinstance(summary.get("solution_passed"), bool):
        out["task_pass"] = summary["solution_passed"]
    return out
