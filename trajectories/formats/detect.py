"""Find the runs in a set of paths and pick a parser for each (ORM-free).

Accepts files and folders (archives are unpacked by the caller, see archives.py):
* Parallax JSONL files (one run each, optionally .gz);
* Claude Code session transcripts with their `subagents/` and `workflows/` folders;
* Codex rollout files, grouped into runs by thread parentage;
* Kimi Code server event journals with their session `state.json`;
* the study's corpus layout `<benchmark>/<task>/<agent>/{parallel,serial}/cell.json`,
  where each cell is one run whose native logs live under `agent/`.
A manifest (CSV or JSON, docs/format.md) adds task/mode/outcome fields to native logs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts import artifact_kind, cell_files
from ..evaluation import cell_tests, summary_counts
from . import claude_code, codex, codex_exec, kimi, openhands, parallax_jsonl, swe_agent
from .common import first_json_line, load_json_file, parse_timestamp
from .manifest import apply_manifest
from .records import MODE_NAMES, FormatError, Parser, ParseWarning, RunSource

PARSERS: dict[str, type[Parser]] = {
    "parallax": parallax_jsonl.ParallaxJsonlParser,
    "claude_code": claude_code.ClaudeCodeParser,
    "codex": codex.CodexParser,
    "codex_exec": codex_exec.CodexExecParser,
    "kimi": kimi.KimiParser,
    "swe_agent": swe_agent.SweAgentParser,
    "openhands": openhands.OpenHandsParser,
}
FORMAT_CHOICES = ("auto", *PARSERS)
FORMAT_NAMES = {
    "parallax": "Parallax JSONL",
    "claude_code": "a Claude Code session",
    "codex": "a Codex rollout",
    "codex_exec": "a Codex exec --json stream",
    "kimi": "a Kimi Code event journal",
    "swe_agent": "a SWE-agent trajectory",
    "openhands": "an OpenHands event list",
}

AGENT_NAMES = {"codex": "Codex", "claude": "Claude Code", "claude_code": "Claude Code", "kimi": "Kimi Code"}
SHELL_TOOL_NAMES = {"exec_command", "shell", "local_shell", "Bash"}
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_JSONL = (".jsonl", ".jsonl.gz", ".json.gz", ".ndjson")


@dataclass
class Discovery:
    sources: list[RunSource] = field(default_factory=list)
    errors: list[FormatError] = field(default_factory=list)  # files we could not place at all
    warnings: list[ParseWarning] = field(default_factory=list)


def parser_for(format_name: str) -> Parser:
    try:
        return PARSERS[format_name]()
    except KeyError as exc:
        raise FormatError(f"unknown format {format_name!r}; one of {', '.join(PARSERS)}") from exc


def discover(paths: Iterable[Path], *, fmt: str = "auto", manifest: Path | None = None) -> Discovery:
    """Group the files under `paths` into run sources. File names in messages are relative to
    the folder given on the command line (or bare names for files given directly)."""
    if fmt != "auto" and fmt not in PARSERS:
        raise FormatError(f"unknown format {fmt!r}; one of {', '.join(FORMAT_CHOICES)}")
    forced = None if fmt == "auto" else fmt
    found = Discovery()
    loose: list[Path] = []
    for path in paths:
        if path.is_dir():
            cells = sorted({cell.parent for cell in path.rglob("cell.json")})
            for cell in cells:
                try:
                    found.sources.append(_cell_source(cell, root=path))
                except FormatError as exc:
                    found.errors.append(exc)
            in_cells = set(cells)
            files = [
                p
                for p in sorted(path.rglob("*"))
                if p.is_file() and not p.is_symlink() and in_cells.isdisjoint(p.parents)
            ]
            _group_native(files, found, root=path, forced=forced)
        elif path.is_file():
            loose.append(path)
        else:
            found.errors.append(FormatError("no such file or folder", file=str(path)))
    if loose:
        _group_native(loose, found, root=None, forced=forced)
    if manifest is not None:
        found.warnings += apply_manifest(found.sources, manifest)
    return found


def _display(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return str(path.relative_to(root))
        except ValueError:
            pass
    return path.name


def _group_native(files: list[Path], found: Discovery, *, root: Path | None, forced: str | None) -> None:
    claude_sessions: dict[str, list[Path]] = {}
    claude_extras: list[Path] = []
    codex_files: list[Path] = []
    kimi_events: list[Path] = []
    kimi_states: dict[str, Path] = {}
    kimi_wires: dict[str, list[Path]] = {}
    for file in files:
        name = file.name
        wire_session = kimi.wire_session_id(file)
        if wire_session is not None:
            kimi_wires.setdefault(wire_session, []).append(file)
            continue
        if name == "state.json":
            session = kimi.state_session_id(file)
            if session:
                kimi_states[session] = file
            continue
        if name.startswith("wf_") and name.endswith(".json"):
            claude_extras.append(file)
            continue
        document = "swe_agent" if swe_agent.looks_like(file) else "openhands" if openhands.looks_like(file) else None
        try:
            first = first_json_line(file) if name.endswith(_JSONL) else None
        except FormatError as exc:  # over a limit (a bomb, a giant line): this file fails, the rest go on
            found.errors.append(FormatError(exc.message, file=_display(file, root), line=exc.line))
            continue
        sniffed = document or _sniff(first)
        if forced is not None and sniffed is not None and sniffed != forced:
            found.errors.append(
                FormatError(
                    f"this looks like {FORMAT_NAMES[sniffed]}, not {FORMAT_NAMES[forced]}: import it with the "
                    f"format '{sniffed}' or 'auto'",
                    file=_display(file, root),
                )
            )
            continue
        if (forced or document) in ("swe_agent", "openhands"):
            found.sources.append(
                RunSource(name=_display(file, root), format=forced or document, files=[file], root=root)
            )
            continue
        if not name.endswith(_JSONL):
            if root is None:  # a file given on its own must be a run
                found.errors.append(
                    FormatError(
                        "not a trajectory: expected a JSONL log (.jsonl, .jsonl.gz), a SWE-agent .traj, an "
                        "OpenHands event list (.json), or a .zip / .tar.gz bundle of them",
                        file=_display(file, root),
                    )
                )
            continue  # in a folder: cell metadata, prompts, patches, manifests ... are not runs
        kind = forced or sniffed
        if kind == "parallax":
            found.sources.append(RunSource(name=_display(file, root), format="parallax", files=[file], root=root))
        elif kind == "claude_code":
            if name.startswith(("agent-", "journal")) or (isinstance(first, dict) and first.get("agentId")):
                claude_extras.append(file)
            else:
                claude_sessions.setdefault(_claude_session_id(file, first), []).insert(0, file)
        elif kind == "codex":
            codex_files.append(file)
        elif kind == "codex_exec":
            found.sources.append(RunSource(name=_display(file, root), format="codex_exec", files=[file], root=root))
        elif kind == "kimi":
            kimi_events.append(file)
        elif isinstance(first, dict) and first.get("type") == "started" and "agentId" in first:
            claude_extras.append(file)  # a Claude workflow journal: which agents retried a slot
        elif kimi.is_session_index(first):
            continue  # Kimi's session index: the state.json files say the same
        elif first is None and file.stat().st_size > 0:
            found.errors.append(
                FormatError("first line is not JSON; not a trajectory we can read", file=_display(file, root), line=1)
            )
        else:
            found.errors.append(
                FormatError(
                    "format not recognised: not Parallax JSONL, a Claude Code, Codex or Kimi Code log, a SWE-agent "
                    "trajectory or an OpenHands event list (if it is one of these, choose its format explicitly)",
                    file=_display(file, root),
                    line=1,
                )
            )
    for extra in claude_extras:
        session = _claude_session_id(extra, first_json_line(extra) if extra.suffix != ".json" else None)
        if session not in claude_sessions and len(claude_sessions) == 1 and not _UUID.match(session or ""):
            session = next(iter(claude_sessions))
        claude_sessions.setdefault(session, []).append(extra)
    for session, group in claude_sessions.items():
        main = next((p for p in group if not p.name.startswith(("agent-", "wf_", "journal"))), None)
        notes = []
        if main is None:
            notes.append(
                f"Claude Code session {session}: main transcript not in the bundle; "
                "sub-agent files imported under an empty main agent"
            )
            main = group[0]
        ordered = [main] + [p for p in group if p is not main]
        found.sources.append(
            RunSource(name=_display(main, root), format="claude_code", files=ordered, root=root, notes=notes)
        )
    for group in codex.group_rollouts(codex_files):
        paths = [m.path for m in group]
        found.sources.append(RunSource(name=_display(paths[0], root), format="codex", files=paths, root=root))
    for events in kimi_events:
        session = kimi.session_id_of(events)
        files_for_run = [events]
        if session in kimi_states:
            files_for_run.append(kimi_states.pop(session))
        files_for_run += sorted(kimi_wires.pop(session, []))  # the agents' own words, beside the journal
        found.sources.append(RunSource(name=_display(events, root), format="kimi", files=files_for_run, root=root))
    for session, wires in kimi_wires.items():
        files_for_run = sorted(wires) + ([kimi_states.pop(session)] if session in kimi_states else [])
        name = _display(wires[0].parent.parent.parent, root)
        found.sources.append(RunSource(name=name, format="kimi", files=files_for_run, root=root))
    for session, state in kimi_states.items():
        found.errors.append(
            FormatError(
                f"Kimi Code session {session}: its state.json is here but not its server event journal "
                f"(server/events/{session}.jsonl) nor its agents' wire files (agents/<agent>/wire.jsonl), "
                "which hold the events: nothing to import",
                file=_display(state, root),
            )
        )


def _sniff(first: Any) -> str | None:
    for name, module in (
        ("parallax", parallax_jsonl),
        ("codex", codex),
        ("codex_exec", codex_exec),
        ("kimi", kimi),
        ("claude_code", claude_code),
    ):
        if module.looks_like(first):
            return name
    return None


def _claude_session_id(path: Path, first: Any) -> str:
    """The session a Claude Code file belongs to: its `sessionId`, else a UUID folder above it."""
    if path.name.startswith(("agent-", "wf_", "journal")):
        for parent in path.parents:
            if _UUID.match(parent.name):
                return parent.name
    if path.name.startswith("wf_") and path.suffix == ".json":
        try:
            state = load_json_file(path)
        except FormatError:
            state = None
        script = state.get("scriptPath") if isinstance(state, dict) else None
        for part in Path(str(script or "")).parts:
            if _UUID.match(part):
                return part
    if isinstance(first, dict) and isinstance(first.get("sessionId"), str):
        return first["sessionId"]
    if _UUID.match(path.stem):
        return path.stem
    return path.stem


# -- the study's corpus layout -----------------------------------------------------------


def _cell_source(cell_dir: Path, *, root: Path | None) -> RunSource:
    cell_file = cell_dir / "cell.json"
    display = _display(cell_file, root)
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
        outcomes.update(_evaluation_outcomes(load_json_file(summary_file, display=_display(summary_file, root))))
    files = cell_files(cell_dir)
    # Per-test results and the counts they give: cell.json's quality, else SWE-bench's report, else the
    # official test output, else the summary (evaluation.py; docs/format.md).
    evaluation = [path for path in files if artifact_kind(path.relative_to(cell_dir).as_posix())]
    tests = cell_tests(
        cell_dir, evaluation, quality=(passed, total) if stated else None, task_pass=outcomes.get("task_pass")
    )
    outcomes.update(tests.outcomes())
    defaults["outcomes"] = outcomes
    sub = Discovery()
    _group_native(_cell_native_files(cell_dir), sub, root=root, forced=None)
    stream = cell_dir / "cell" / "trajectory.jsonl"
    if stream.is_file() and codex_exec.looks_like(first_json_line(stream)):
        # The harness kept the main thread's exec stream: it stands in for a missing main rollout.
        rollouts = [s for s in sub.sources if s.format == "codex"]
        orphans = [s for s in rollouts if not any(m and not m.parent_id for m in map(codex.thread_meta, s.files))]
        if not sub.sources or (orphans and len(orphans) == len(rollouts)):
            where = _display(cell_dir, root)
            note = (
                f"{where}: the main thread's rollout is not under agent/; its events read from cell/trajectory.jsonl"
                if orphans
                else f"{where}: no rollouts under agent/; read cell/trajectory.jsonl instead"
            )
            children = [path for s in orphans for path in s.files]
            sub.sources = [RunSource(name="", format="codex_exec", files=[stream, *children], root=root, notes=[note])]
    if not sub.sources:
        found = "; ".join(e.describe() for e in sub.errors[:3]) or "the folder is empty or missing"
        raise FormatError(
            "no agent log found: expected Codex rollouts, a Claude Code project transcript or a Kimi Code session "
            f"under agent/, or Codex's cell/trajectory.jsonl ({found})",
            file=display,
        )
    # One cell is one run: take the largest session if the agent's home holds several.
    best = max(sub.sources, key=lambda s: sum(p.stat().st_size for p in s.files))
    best.header_defaults = defaults
    best.name = _display(cell_dir, root)
    best.base = cell_dir
    best.artifacts = [path for path in files if path not in best.files]
    best.clock = _agent_clock(cell_dir, best, root=root)
    best.tests = tests
    best.notes += tests.warnings
    return best


def _agent_clock(cell_dir: Path, source: RunSource, *, root: Path | None) -> tuple | None:
    """When the harness ran the agent, from the cell's status.json (`agent_run.started_at_utc` ..
    `finished_at_utc`); None when it does not say. A status.json that cannot be read is noted, not
    fatal: it is the harness's record, not the trajectory."""
    path = cell_dir / "cell" / "status.json"
    if not path.is_file():
        return None
    display = _display(path, root)
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


def _cell_native_files(cell_dir: Path) -> list[Path]:
    agent_home = cell_dir / "agent"
    if not agent_home.is_dir():
        return []
    return sorted(p for p in agent_home.rglob("*") if p.is_file() and not p.is_symlink())


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
