"""Find the runs in a set of files and folders (ORM-free); archives are unpacked by the caller (archives.py).

Each file is offered to the formats (registry.py), which claim it and group the files they claimed
into runs; a folder holding the study's cells (cell.py) gives one run per cell, read from the
native logs under its `agent/`. A manifest (manifest.py) adds task, mode and outcome fields.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from . import cell, registry
from .common import first_json_line, first_line_problem
from .manifest import apply_manifest
from .records import JSONL_SUFFIXES, Format, FormatError, ParseWarning, RunSource, display_name


@dataclass
class Discovery:
    sources: list[RunSource] = field(default_factory=list)
    errors: list[FormatError] = field(default_factory=list)  # files we could not place at all
    warnings: list[ParseWarning] = field(default_factory=list)

    def add(self, more: Discovery) -> None:
        self.sources += more.sources
        self.errors += more.errors


def discover(paths: Iterable[Path], *, fmt: str = "auto", manifest: Path | None = None) -> Discovery:
    """Group the files under `paths` into run sources, each file read as `fmt` (or as what it looks
    like: "auto"). File names in messages are relative to the folder given on the command line (or
    bare names for files given directly)."""
    forced = None if fmt == "auto" else registry.named(fmt)
    found = Discovery()
    loose: list[Path] = []
    for path in paths:
        if path.is_dir():
            cells = cell.cell_folders(path)
            for cell_dir in cells:
                agent = group_files(cell.agent_files(cell_dir), root=path)
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
            found.add(group_files(files, root=path, forced=forced))
        elif path.is_file():
            loose.append(path)
        else:
            found.errors.append(FormatError("no such file or folder", file=str(path)))
    if loose:
        found.add(group_files(loose, root=None, forced=forced))
    if manifest is not None:
        found.warnings += apply_manifest(found.sources, manifest)
    return found


def nothing_found() -> str:
    """What an input without a single run was searched for."""
    return (
        f"no trajectories found (looked for {registry.described()}, and for the study's "
        "<benchmark>/<task>/<agent>/<mode>/cell.json tree)"
    )


def group_files(files: list[Path], *, root: Path | None, forced: Format | None = None) -> Discovery:
    """The runs of `files` (in a folder `root`, or given one by one: None): each file claimed by a
    format (only `forced`, if given), then each format's files grouped into runs, format by format."""
    found = Discovery()
    claimed: dict[str, list[Path]] = {fmt.name: [] for fmt in registry.FORMATS}
    for file in files:
        try:
            fmt = _claim(file, alone=root is None, forced=forced)
        except FormatError as exc:  # this file fails, the rest go on
            found.errors.append(FormatError(exc.message, file=display_name(file, root), line=exc.line))
            continue
        if fmt is not None:
            claimed[fmt.name].append(file)
    for fmt in registry.FORMATS:
        sources, errors = fmt.runs(claimed[fmt.name], root=root)
        found.sources += sources
        found.errors += errors
    return found


def _claim(file: Path, *, alone: bool, forced: Format | None) -> Format | None:
    """The format that reads `file`: the first that claims it by path, else, for a JSON-lines file,
    the first its first JSON line looks like. None for a file in a folder that is no log (cell
    metadata, prompts, patches, manifests …); an error for a file that should be one and is not (a
    file given `alone` must be one)."""
    jsonl = file.name.endswith(JSONL_SUFFIXES)
    fmt = registry.claiming(file)
    first = None
    if fmt is None and jsonl:
        first = first_json_line(file)  # raises over a limit (a bomb, a giant line)
        fmt = registry.sniff(first)
    if forced is not None:
        if fmt is not None and fmt.name != forced.name:
            raise FormatError(
                f"this looks like {fmt.description}, not {forced.description}: import it with the format "
                f"'{fmt.name}' or 'auto'"
            )
        if fmt is None and file.name.endswith(forced.suffixes):
            return forced
    if fmt is not None:
        return fmt
    if jsonl:
        if first is None and file.stat().st_size > 0:
            problem, line = first_line_problem(file)
            raise FormatError(f"{problem or 'first line is not JSON'}; not a trajectory we can read", line=line)
        raise FormatError(
            f"format not recognised: not {registry.described()} (if it is one of these, choose its format explicitly)",
            line=1,
        )
    if alone:
        raise FormatError(
            f"not a trajectory: expected {registry.files_described()}; or a .zip / .tar.gz bundle of them"
        )
    return None
