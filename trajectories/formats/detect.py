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

from . import cell, claude_code, codex, codex_exec, kimi, openhands, parallax_jsonl, swe_agent
from .common import first_json_line, load_json_file
from .manifest import apply_manifest
from .records import FormatError, Parser, ParseWarning, RunSource, display_name

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
            cells = cell.cell_folders(path)
            for cell_dir in cells:
                agent = Discovery()
                _group_native(cell.agent_files(cell_dir), agent, root=path, forced=None)
                try:
                    found.sources.append(cell.cell_source(cell_dir, agent.sources, agent.errors, root=path))
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
            found.errors.append(FormatError(exc.message, file=display_name(file, root), line=exc.line))
            continue
        sniffed = document or _sniff(first)
        if forced is not None and sniffed is not None and sniffed != forced:
            found.errors.append(
                FormatError(
                    f"this looks like {FORMAT_NAMES[sniffed]}, not {FORMAT_NAMES[forced]}: import it with the "
                    f"format '{sniffed}' or 'auto'",
                    file=display_name(file, root),
                )
            )
            continue
        if (forced or document) in ("swe_agent", "openhands"):
            found.sources.append(
                RunSource(name=display_name(file, root), format=forced or document, files=[file], root=root)
            )
            continue
        if not name.endswith(_JSONL):
            if root is None:  # a file given on its own must be a run
                found.errors.append(
                    FormatError(
                        "not a trajectory: expected a JSONL log (.jsonl, .jsonl.gz), a SWE-agent .traj, an "
                        "OpenHands event list (.json), or a .zip / .tar.gz bundle of them",
                        file=display_name(file, root),
                    )
                )
            continue  # in a folder: cell metadata, prompts, patches, manifests ... are not runs
        kind = forced or sniffed
        if kind == "parallax":
            found.sources.append(RunSource(name=display_name(file, root), format="parallax", files=[file], root=root))
        elif kind == "claude_code":
            if name.startswith(("agent-", "journal")) or (isinstance(first, dict) and first.get("agentId")):
                claude_extras.append(file)
            else:
                claude_sessions.setdefault(_claude_session_id(file, first), []).insert(0, file)
        elif kind == "codex":
            codex_files.append(file)
        elif kind == "codex_exec":
            found.sources.append(RunSource(name=display_name(file, root), format="codex_exec", files=[file], root=root))
        elif kind == "kimi":
            kimi_events.append(file)
        elif isinstance(first, dict) and first.get("type") == "started" and "agentId" in first:
            claude_extras.append(file)  # a Claude workflow journal: which agents retried a slot
        elif kimi.is_session_index(first):
            continue  # Kimi's session index: the state.json files say the same
        elif first is None and file.stat().st_size > 0:
            found.errors.append(
                FormatError(
                    "first line is not JSON; not a trajectory we can read", file=display_name(file, root), line=1
                )
            )
        else:
            found.errors.append(
                FormatError(
                    "format not recognised: not Parallax JSONL, a Claude Code, Codex or Kimi Code log, a SWE-agent "
                    "trajectory or an OpenHands event list (if it is one of these, choose its format explicitly)",
                    file=display_name(file, root),
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
            RunSource(name=display_name(main, root), format="claude_code", files=ordered, root=root, notes=notes)
        )
    for group in codex.group_rollouts(codex_files):
        paths = [m.path for m in group]
        found.sources.append(RunSource(name=display_name(paths[0], root), format="codex", files=paths, root=root))
    for events in kimi_events:
        session = kimi.session_id_of(events)
        files_for_run = [events]
        if session in kimi_states:
            files_for_run.append(kimi_states.pop(session))
        files_for_run += sorted(kimi_wires.pop(session, []))  # the agents' own words, beside the journal
        found.sources.append(RunSource(name=display_name(events, root), format="kimi", files=files_for_run, root=root))
    for session, wires in kimi_wires.items():
        files_for_run = sorted(wires) + ([kimi_states.pop(session)] if session in kimi_states else [])
        name = display_name(wires[0].parent.parent.parent, root)
        found.sources.append(RunSource(name=name, format="kimi", files=files_for_run, root=root))
    for session, state in kimi_states.items():
        found.errors.append(
            FormatError(
                f"Kimi Code session {session}: its state.json is here but not its server event journal "
                f"(server/events/{session}.jsonl) nor its agents' wire files (agents/<agent>/wire.jsonl), "
                "which hold the events: nothing to import",
                file=display_name(state, root),
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
