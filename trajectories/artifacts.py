"""A study cell's artifacts beside its logs, and evidence anchors into a pair's files (ORM-free).

The study's artifact keeps, for each run (`<benchmark>/<task>/<agent>/<parallel|serial>/`), the
agent's own logs under `agent/` and what the harness wrote under `cell/`: the final answer, the
prompt, the patch, the evaluation summary and the official test output. Anchors cite them by path
and line from the pair's folder: `serial/cell/model.patch:12`, `parallel/agent/…/rollout.jsonl:268`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# What is kept of a cell besides its logs, by path relative to the cell's folder.
ARTIFACT_KINDS = {
    "cell.json": "cell",
    "cell/model.patch": "patch",
    "cell/final.txt": "final",
    "cell/prompt.txt": "prompt",
    "cell/status.json": "status",
    "cell/agent-run-status.json": "status",
    "cell/evaluation/summary.json": "evaluation",
}
TEST_OUTPUT_SUFFIXES = (".txt", ".log", ".out")


def artifact_kind(relative: str) -> str | None:
    """The kind of a cell file worth keeping, or None. Under `cell/evaluation/` the official test
    output (text and log files) and SWE-bench's `report.json` are kept; the copies of the agent's
    home the harness leaves there are not (they are the logs under `agent/` again)."""
    if relative in ARTIFACT_KINDS:
        return ARTIFACT_KINDS[relative]
    if relative.startswith("cell/") and relative.endswith((".patch", ".diff")) and relative.count("/") == 1:
        return "patch"
    if relative.startswith("cell/evaluation/") and relative.endswith(TEST_OUTPUT_SUFFIXES):
        return "test_output"
    if relative.startswith("cell/evaluation/") and relative.endswith("/report.json"):
        return "evaluation"  # SWE-bench's per-test report (evaluation.swebench_report)
    return None


# Folders under `cell/evaluation/` that hold the harness's copies of the agent's home: the same logs
# as under `agent/`, not kept twice.
HOME_COPIES = frozenset({"agent", ".claude", ".codex", ".kimi", "home"})


def cell_files(cell_dir: Path) -> list[Path]:
    """Every file of one study cell that an anchor may cite, in path order: the cell's record, its
    artifacts and official evaluation, and every file of the agent's home (logs, workflow scripts,
    state, the agent's own log). Left out: symlinks, and the agent homes the harness copied again
    under `cell/evaluation/`."""
    found = []
    for path in sorted(cell_dir.rglob("*")):
        if path.is_file() and not path.is_symlink():
            parts = path.relative_to(cell_dir).parts
            if parts[:2] == ("cell", "evaluation") and HOME_COPIES.intersection(parts[2:-1]):
                continue
            found.append(path)
    return found


def read_text(path: Path, *, limit: int) -> tuple[str, bool]:
    """A file's text, at most `limit` bytes of it (then True): invalid UTF-8 is replaced, and NUL
    characters, which PostgreSQL cannot store in text, become U+FFFD."""
    with path.open("rb") as handle:
        data = handle.read(limit + 1)
    truncated = len(data) > limit
    text = data[:limit].decode("utf-8", errors="replace")
    return text.replace("\x00", "\ufffd"), truncated


# -- patches ------------------------------------------------------------------------------------


@dataclass
class DiffFile:
    header: str  # the file's path as the diff names it
    lines: list[tuple[int, str, str]]  # (line in the patch, kind: meta|hunk|add|del|ctx, text)
    added: int = 0
    removed: int = 0
    has_hunk: bool = False


def diff_files(patch: str) -> list[DiffFile]:
    """A unified diff split by file, every line kept with its line number in the patch (which
    is what an anchor `cell/model.patch:12` cites)."""
    files: list[DiffFile] = []
    current: DiffFile | None = None
    lines = patch.splitlines()
    for number, line in enumerate(lines, start=1):
        # A file starts at `diff --git`, or (plain diff) at a `---` line followed by `+++`.
        starts_file = line.startswith("diff --git ") or (
            line.startswith("--- ")
            and number < len(lines)
            and lines[number].startswith("+++ ")
            and (current is None or current.has_hunk)
        )
        if starts_file or current is None:
            current = DiffFile(header=_diff_path(line) if starts_file else "", lines=[])
            files.append(current)
        if line.startswith("+++ ") and not current.has_hunk:
            path = _diff_path(line)
            if path and path != "/dev/null":
                current.header = path
            kind = "meta"
        elif line.startswith("@@"):
            kind, current.has_hunk = "hunk", True
        elif not current.has_hunk:
            kind = "meta"
        elif line.startswith("+"):
            kind, current.added = "add", current.added + 1
        elif line.startswith("-"):
            kind, current.removed = "del", current.removed + 1
        else:
            kind = "ctx"
        current.lines.append((number, kind, line))
    return files


def _diff_path(line: str) -> str:
    if line.startswith("diff --git "):
        parts = line.split(" ")
        return parts[-1][2:] if parts[-1].startswith("b/") else parts[-1]
    path = line[4:].split("\t")[0].strip()
    return path[2:] if path.startswith(("a/", "b/")) else path


# -- anchors ------------------------------------------------------------------------------------

SIDES = {"parallel": "concurrent", "concurrent": "concurrent", "serial": "sequential", "sequential": "sequential"}
SIDE_FOLDERS = {"concurrent": "parallel", "sequential": "serial"}
ANCHOR = re.compile(
    r"^(?:(?P<side>parallel|serial|concurrent|sequential)/)?(?P<path>.+?):(?P<start>\d+)(?:-(?P<end>\d+))?$"
)


class AnchorError(ValueError):
    pass


class AnchorUnchecked(AnchorError):
    """The run has no stored files (imported by an older Parallax): the anchor can be neither
    confirmed nor refused."""


@dataclass(frozen=True)
class Anchor:
    text: str  # as written
    mode: str  # concurrent | sequential: the side of the pair it cites
    path: str
    start: int
    end: int


def parse_anchor(text: str, *, default_mode: str) -> Anchor:
    """`[parallel|serial/]path:line[-line]`; without a side, the field's own (evidence cites the
    concurrent run, contrast its sequential twin)."""
    cleaned = text.strip().strip("`").strip()
    match = ANCHOR.match(cleaned)
    if not match:
        raise AnchorError(f"{text!r} is not an anchor: write path:line, e.g. parallel/cell/model.patch:12")
    start = int(match["start"])
    end = int(match["end"] or start)
    if start < 1 or end < start:
        raise AnchorError(f"{text!r}: lines are numbered from 1, and a range goes forward")
    mode = SIDES[match["side"]] if match["side"] else default_mode
    return Anchor(text=cleaned, mode=mode, path=match["path"], start=start, end=end)


def anchor_text(mode: str, path: str, line: int) -> str:
    """How Parallax writes an anchor (the study's own form)."""
    return f"{SIDE_FOLDERS[mode]}/{path}:{line}"
