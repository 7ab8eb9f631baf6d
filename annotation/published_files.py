"""The study's published files of a pair: where they sit in its artifact, and reading them (ORM-free).

The artifact keeps a pair's records in the pair's own folder, beside its two cells::

    <benchmark folder>/<task>/<agent folder>/annotation.md, review.json, advantage-review.json
                                            /parallel/cell.json …   /serial/cell.json …

e.g. `swebench_verified/django__django-10999/claude/`. Parallax stores each record with that path
and writes it back there (`export_published`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .annotation_md import PublishedFormatError, PublishedRecord, parse_annotation_md
from .review_json import ReviewFormatError, parse_advantage_review, parse_review

FILE_KINDS = {"annotation.md": "annotation", "review.json": "review", "advantage-review.json": "advantage-review"}
KIND_FILES = {kind: file for file, kind in FILE_KINDS.items()}
REVIEW_FILES = ("review.json", "advantage-review.json")  # read beside an annotation.md when there
MODE_FOLDERS = ("parallel", "serial")


def kind_of(name: str) -> str:
    """A record's kind by its file name (anything else is an annotation record)."""
    return FILE_KINDS.get(PurePosixPath(name.replace("\\", "/")).name, "annotation")


def pair_folder(parts: Sequence[str], *, task_id: str, agent: str) -> str:
    """The pair's folder as the artifact names it, from the folders a record was read in (`parts`:
    the path's folders, outermost first): `…/swebench_verified/django__django-10999/claude` →
    `swebench_verified/django__django-10999/claude`, and a folder flattened as
    `nl2repo__dictdatabase__codex` → `nl2repo/dictdatabase/codex`. "" when the folders say neither."""
    parts = [part for part in parts if part not in ("", "/", ".")]
    if len(parts) >= 3 and parts[-1] == agent and parts[-2] == task_id:
        return "/".join(parts[-3:])
    if parts:
        benchmark, sep, rest = parts[-1].partition("__")
        if sep and benchmark and rest == f"{task_id}__{agent}":
            return f"{benchmark}/{task_id}/{agent}"
    return ""


def cell_pair_folder(source_name: str, *, task_id: str) -> str:
    """The pair's folder of a run imported from the artifact's cell (its source name is the cell's
    folder, `swebench_verified/django__django-10999/claude/parallel`): the cell's folder without the
    mode folder. "" for a run imported otherwise."""
    parts = PurePosixPath(source_name).parts
    if len(parts) >= 4 and parts[-1] in MODE_FOLDERS and parts[-3] == task_id:
        return "/".join(parts[-4:-1])
    return ""


def safe_relative(path: str) -> PurePosixPath:
    """A stored path made safe to write under an output folder: relative, no `..`."""
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise ValueError(f"{path!r}: not a relative path inside the output folder")
    return pure


@dataclass
class PublishedFile:
    """A review beside an annotation.md, read and checked."""

    kind: str  # review | advantage-review
    name: str  # the file as read
    path: str  # as the artifact names it ("" when unknown)
    text: str
    data: dict  # the whole document

    @property
    def display(self) -> str:
        return self.path or self.name


@dataclass
class PublishedPair:
    """One pair's published files: its annotation.md and the reviews beside it."""

    record: PublishedRecord
    folder: str = ""  # the pair's folder as the artifact names it ("" when unknown)
    reviews: list[PublishedFile] = field(default_factory=list)

    @property
    def path(self) -> str:
        return f"{self.folder}/annotation.md" if self.folder else ""

    @property
    def display(self) -> str:
        return self.path or self.record.name

    @property
    def task_id(self) -> str:
        return self.record.header.get("task_id") or self.record.pair_id.split("/")[0]

    @property
    def agent(self) -> str:
        return self.record.header.get("agent") or self.record.pair_id.split("/")[-1]

    @property
    def benchmark_hint(self) -> str:
        """The benchmark its folder names (`swebench_verified`), to tell apart one task id in two benchmarks."""
        return self.folder.split("/")[0] if self.folder else ""


def pair_from_text(text: str, *, name: str = "annotation.md") -> PublishedPair:
    """A pair from an annotation.md's text alone (no folder, no reviews)."""
    return PublishedPair(record=parse_annotation_md(text, name=name))


def read_pair(file: Path) -> PublishedPair:
    """An annotation.md and the reviews beside it, read and checked. PublishedFormatError,
    ReviewFormatError and OSError say what is wrong, naming the file."""
    record = parse_annotation_md(_read(file), name=str(file))
    pair = PublishedPair(record=record)
    pair.folder = pair_folder(file.parent.parts, task_id=pair.task_id, agent=pair.agent)
    for review_name in REVIEW_FILES:
        review_file = file.parent / review_name
        if not review_file.is_file():
            continue
        path = f"{pair.folder}/{review_name}" if pair.folder else ""
        text = _read(review_file)
        shown = path or str(review_file)
        if review_name == "review.json":
            data = parse_review(text, name=shown).document
        else:
            data = parse_advantage_review(text, name=shown)
        pair.reviews.append(PublishedFile(kind=FILE_KINDS[review_name], name=str(review_file), path=path, text=text,
                                          data=data))  # fmt: skip
    return pair


def _read(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise PublishedFormatError(f"{file}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


FORMAT_ERRORS = (PublishedFormatError, ReviewFormatError, OSError)
