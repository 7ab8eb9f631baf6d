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
    "example",
    "codebook",
    "version",
)
_SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


@dataclass
class CodeSpec:
    key: str
    level: str
    name: str
    parent_key: str = ""
    definition: str = ""
    inclusion: str = ""
    exclusion: str = ""
    example: str = ""
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
        if not spec.key or not _SLUG.match(spec.key):
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
