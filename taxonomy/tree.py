"""Plain codebook trees (ORM-free): validation, paths, and the CSV row shape."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

LEVELS = ("category", "subcategory", "mode")
PARENT_LEVEL = {"category": None, "subcategory": "category", "mode": "subcategory"}
CSV_COLUMNS = (
    "key",
    "level",
    "parent_key",
    "path",
    "name",
    "definition",
    "inclusion",
    "exclusion",
    "positive_example",
    "negative_example",
    "source",
    "codebook",
    "version",
)
TEXT_FIELDS = ("definition", "inclusion", "exclusion", "positive_example", "negative_example", "source")
SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


@dataclass
class CodeSpec:
    key: str
    level: str
    name: str
    parent_key: str = ""
    definition: str = ""
    inclusion: str = ""
    exclusion: str = ""
    positive_example: str = ""
    negative_example: str = ""
    source: str = ""
    row: int | None = None
    children: list[CodeSpec] = field(default_factory=list)


class TreeError(ValueError):
    def __init__(self, message: str, *, row: int | None = None, column: str = ""):
        self.row, self.column = row, column
        where = f"row {row}" if row is not None else ""
        if column:
            where += f", column '{column}'" if where else f"column '{column}'"
        super().__init__(f"{where}: {message}" if where else message)


def slugify_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def validate(specs: list[CodeSpec]) -> list[CodeSpec]:
    """Check keys, levels and parents; return the specs ordered parents first (stable)."""
    by_key: dict[str, CodeSpec] = {}
    for spec in specs:
        if not spec.key or not SLUG.match(spec.key):
            raise TreeError(
                f"key {spec.key!r} must be lowercase letters, digits and hyphens", row=spec.row, column="key"
            )
        if spec.key in by_key:
            raise TreeError(f"duplicate key {spec.key!r}", row=spec.row, column="key")
        if spec.level not in LEVELS:
            raise TreeError(
                f"level must be one of {', '.join(LEVELS)}, got {spec.level!r}", row=spec.row, column="level"
            )
        if not spec.name.strip():
            raise TreeError("name is empty", row=spec.row, column="name")
        by_key[spec.key] = spec
    for spec in specs:
        expected = PARENT_LEVEL[spec.level]
        if expected is None:
            if spec.parent_key:
                raise TreeError("a category has no parent", row=spec.row, column="parent_key")
            continue
        parent = by_key.get(spec.parent_key)
        if parent is None:
            raise TreeError(
                f"parent {spec.parent_key!r} is not a key in this codebook", row=spec.row, column="parent_key"
            )
        if parent.level != expected:
            raise TreeError(
                f"the parent of a {spec.level} must be a {expected}, {spec.parent_key!r} is a {parent.level}",
                row=spec.row,
                column="parent_key",
            )
    order = {level: i for i, level in enumerate(LEVELS)}
    return sorted(specs, key=lambda s: order[s.level])


def parse_parts(text: str) -> list[tuple[str, str]]:
    """Lines `key: Name` (or just `Name`, keyed from the name) → [(key, name)]."""
    parts = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        key, sep, name = line.partition(":")
        key, name = (key.strip(), name.strip()) if sep else (slugify_key(line), line.strip())
        if not name:
            raise TreeError(f"line {number} ({line.strip()!r}): write `key: Name`", column="parts")
        parts.append((key, name))
    return parts


def parse_key_map(text: str, *, column: str = "key_map") -> dict[str, list[str]]:
    """Lines `old -> new` (rename), `old -> new-a, new-b` (split); several lines with one target
    are a merge. Blank lines and `#` comments are skipped; a key given twice is an error."""
    mapping: dict[str, list[str]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        old, sep, new = line.partition("->")
        targets = [t.strip() for t in new.replace(" ", ",").split(",") if t.strip()]
        if not sep or not old.strip() or not targets:
            raise TreeError(f"line {number} ({line!r}): write `old-key -> new-key[, new-key…]`", column=column)
        if old.strip() in mapping:
            raise TreeError(f"line {number}: {old.strip()!r} is mapped twice", column=column)
        mapping[old.strip()] = targets
    return mapping
