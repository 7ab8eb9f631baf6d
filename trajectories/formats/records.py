"""Plain records every format parser yields, and what a format module exports; nothing here touches the ORM.

A parser turns one *run source* (a file, or a group of files for native logs) into a
stream: one `RunHeader` first, then `ContextRecord` and `EventRecord` items in any
interleaving (an event's context must have been announced earlier). A context may be
announced again later with more information (e.g. its end time); the importer merges.
A format module exports `FORMAT` (`Format`): its parser, the files it claims and how it
groups them into run sources (formats/registry.py lists the formats).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..evaluation import CellTests

CONCURRENT = "concurrent"
SEQUENTIAL = "sequential"
MODES = (CONCURRENT, SEQUENTIAL)
# How a manifest or a study cell may spell a mode.
MODE_NAMES = {"parallel": CONCURRENT, "concurrent": CONCURRENT, "serial": SEQUENTIAL, "sequential": SEQUENTIAL}

MAIN = "main"
SUB = "sub"

# Event kinds (docs/format.md lists them with their meaning).
EVENT_KINDS = (
    "message",
    "reasoning",
    "tool_call",
    "tool_result",
    "spawn",
    "wait",
    "join",
    "file_write",
    "error",
    "other",
)

OUTCOME_FIELDS = (
    "task_pass",
    "tests_passed",
    "tests_total",
    "test_pass",
    "duration_s",
    "shell_calls",
    "tokens",
)


class FormatError(Exception):
    """Bad input, located precisely: `file:line: field: message`."""

    def __init__(self, message: str, *, file: str = "", line: int | None = None, field: str = ""):
        self.message = message
        self.file = file
        self.line = line
        self.field = field
        super().__init__(self.describe())

    def describe(self) -> str:
        where = self.file or "<input>"
        if self.line is not None:
            where += f":{self.line}"
        if self.field:
            where += f": field '{self.field}'"
        return f"{where}: {self.message}"


@dataclass(slots=True)
class RunHeader:
    benchmark: str
    task_id: str
    agent: str
    mode: str
    difficulty: str = ""
    backbone_model: str = ""
    prompt_sha256: str = ""
    run_id: str = ""
    outcomes: dict[str, object] = field(default_factory=dict)
    extra: dict[str, object] = field(default_factory=dict)


@dataclass(slots=True)
class ContextRecord:
    id: str
    role: str = SUB
    parent: str | None = None
    label: str = ""
    started_at: datetime | None = None
    ended_at: datetime | None = None
    status: str = ""
    line: int | None = None
    file: str = ""  # the source file its events are read from (RunSource.relative), for evidence anchors
    # A workflow's agents (Claude Code workflows): the workflow's id, the slot the agent fills, and
    # which attempt of that slot it is (a slot is retried under a new agent id).
    workflow: str = ""
    slot: str = ""
    attempt: int | None = None
    attempts: int | None = None


@dataclass(slots=True)
class EventRecord:
    context: str
    seq: int
    kind: str
    timestamp: datetime | None = None
    tool: str = ""
    text: str = ""
    files: list[str] = field(default_factory=list)
    target: str = ""  # the sub-agent a spawn/wait/join refers to
    line: int | None = None
    file: str = ""  # the file `line` is in, when not its agent's (ContextRecord.file): a later round's transcript


@dataclass(slots=True)
class ParseWarning:
    message: str
    file: str = ""
    line: int | None = None

    def describe(self) -> str:
        where = self.file + (f":{self.line}" if self.line is not None else "")
        return f"{where}: {self.message}" if where else self.message


def display_name(path: Path, root: Path | None) -> str:
    """A file as messages name it: relative to the folder given (`root`), else its bare name."""
    if root is not None:
        try:
            return str(path.relative_to(root))
        except ValueError:
            pass
    return path.name


@dataclass(slots=True)
class RunSource:
    """What one run is read from: its files, the format, and header defaults."""

    name: str  # shown in reports, e.g. the main file's relative path
    format: str
    files: list[Path]
    header_defaults: dict[str, object] = field(default_factory=dict)
    root: Path | None = None  # file names in errors are shown relative to this
    notes: list[str] = field(default_factory=list)  # warnings found while grouping files into this run
    base: Path | None = None  # the run's own folder (a study cell): stored file paths are relative to it
    artifacts: list[Path] = field(default_factory=list)  # files kept beside the logs (patch, final answer …)
    # When the harness ran the agent (a study cell's status.json): times the main agent of a log
    # that carries none of its own (Codex's exec stream).
    clock: tuple[datetime | None, datetime | None] | None = None
    # Reads a cell's per-test results from its evaluation (evaluation.py) when the run is stored.
    read_tests: Callable[[], CellTests] | None = None
    # How many main transcripts lead `files`, read one after another as the main agent: the rounds of a harness's
    # outer loop, a session each (cell.py); 1 for every other run.
    sessions: int = 1

    def display(self, path: Path) -> str:
        if self.root is not None:
            root, text = str(self.root), str(path)
            if text.startswith(root) and text[len(root) : len(root) + 1] == os.sep:
                return text[len(root) + 1 :]  # what relative_to gives, without its cost per call
            try:
                return str(path.relative_to(self.root))
            except ValueError:
                pass
        return path.name

    def relative(self, path: Path) -> str:
        """The path a run's file is stored and cited under: relative to the run's own folder for a
        study cell (`agent/codex/sessions/…`, `cell/model.patch`), else as shown in messages."""
        if self.base is not None:
            try:
                return path.relative_to(self.base).as_posix()
            except ValueError:
                pass
        return Path(self.display(path)).as_posix()


class Parser:
    """Interface: `parse(source)` yields records."""

    def parse(self, source: RunSource) -> Iterator[Record]:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(slots=True)
class DerivedOutcomes:
    """Totals a native log lets us count (shell calls, tokens); used where the header
    (manifest/cell.json) gives none. Yielded last, after every event."""

    shell_calls: int | None = None
    tokens: int | None = None
    duration_s: float | None = None  # when the log has durations but no wall-clock timestamps


def header_from_defaults(source: RunSource, *, fallback_task: str, agent: str) -> RunHeader:
    """Header for a native log: manifest/cell.json values, else labelled fallbacks.

    An empty `mode` means "not stated": the importer infers it from the sub-agents and
    says so in a warning.
    """
    defaults = dict(source.header_defaults)
    text = {
        key: str(defaults.pop(key, "") or "")
        for key in ("benchmark", "task_id", "agent", "mode", "difficulty", "backbone_model", "prompt_sha256", "run_id")
    }
    return RunHeader(
        benchmark=text["benchmark"] or "unlabelled",
        task_id=text["task_id"] or fallback_task,
        agent=text["agent"] or agent,
        mode=text["mode"],
        difficulty=text["difficulty"],
        backbone_model=text["backbone_model"],
        prompt_sha256=text["prompt_sha256"],
        run_id=text["run_id"],
        outcomes=dict(defaults.pop("outcomes", {}) or {}),
        extra=defaults,
    )


Record = RunHeader | ContextRecord | EventRecord | ParseWarning | DerivedOutcomes


# Files read line by line (JSON lines, possibly gzipped): their first JSON line tells their format.
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".json.gz", ".ndjson")

Grouped = tuple[list[RunSource], list[FormatError]]  # the runs of a format's files, and the files that make none


def _no(_: Any) -> bool:
    return False


@dataclass(frozen=True)
class Format:
    """What a format module exports as `FORMAT`: all that finding runs (formats/detect.py) asks of it.

    A file is claimed by the first format (in formats/registry.py's order) that `claims` it by its
    path or first bytes, else, for a JSON-lines file, by the first whose `looks_like` accepts its first
    JSON line. Each format then groups the files it claimed into runs: `group`, or one run per file.
    """

    name: str  # the `--format` value, stored as the run's source format
    description: str  # what a file of it is, in messages: "a Claude Code session"
    parser: type[Parser]
    suffixes: tuple[str, ...] = JSONL_SUFFIXES  # the file names it is read from (uploads, a forced format)
    looks_like: Callable[[Any], bool] = _no  # the first JSON line of a JSON-lines file is one of its
    claims: Callable[[Path], bool] = _no  # a file of its by path or first bytes, whatever else it looks like
    group: Callable[[list[Path], Path | None], Grouped] | None = None  # its files (in walk order) into runs
    # A study cell's `cell/trajectory.jsonl` in this format, given the runs found under the cell's
    # `agent/`: the runs the cell is read from (formats/cell.py), e.g. the stream standing in for a
    # missing main log. Called as cell_stream(stream, runs, where=the cell's name, root=root).
    cell_stream: Callable[..., list[RunSource]] | None = None
    # A study cell whose agent ran in a harness's outer loop of rounds, a session each (formats/cell.py): the runs
    # found there joined into one (RunSource.sessions main transcripts first). None: the largest is read, the
    # others named in a warning.
    join_rounds: Callable[[list[RunSource]], RunSource] | None = None

    def runs(self, files: list[Path], *, root: Path | None) -> Grouped:
        """The runs of the files this format claimed (named relative to `root`)."""
        if self.group is not None:
            return self.group(files, root)
        return [RunSource(name=display_name(f, root), format=self.name, files=[f], root=root) for f in files], []
