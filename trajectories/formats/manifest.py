"""A manifest: a CSV or JSON sidecar that adds task, mode and outcome fields to native logs
(docs/format.md), matched to runs by a path pattern (ORM-free)."""

from __future__ import annotations

import contextlib
import csv
from pathlib import Path
from typing import Any

from .common import load_json_file
from .parallax_jsonl import validate_outcomes
from .records import MODE_NAMES, FormatError, ParseWarning, RunSource

MANIFEST_TEXT = ("benchmark", "task_id", "difficulty", "agent", "backbone_model", "mode", "prompt_sha256", "run_id")
MANIFEST_INT = ("tests_passed", "tests_total", "shell_calls", "tokens")
MANIFEST_FLOAT = ("test_pass", "duration_s")


def read_manifest(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """Rows of a manifest as (row number, typed fields). Errors name the row and column."""
    display = path.name
    if path.suffix.lower() == ".json":
        data = load_json_file(path, display=display)
        rows = data.get("runs") if isinstance(data, dict) else data
        if not isinstance(rows, list):
            raise FormatError('a JSON manifest is a list of objects (or {"runs": [...]})', file=display)
        numbered = list(enumerate(rows, start=1))
    else:
        try:
            with path.open(newline="", encoding="utf-8") as handle:
                numbered = list(enumerate(csv.DictReader(handle), start=2))
        except UnicodeDecodeError as exc:
            raise FormatError("manifest is not UTF-8", file=display) from exc
    typed = []
    for row_no, row in numbered:
        if not isinstance(row, dict):
            raise FormatError("expected an object", file=display, line=row_no)
        typed.append((row_no, _typed_manifest_row(row, display=display, row_no=row_no)))
    return typed


def _typed_manifest_row(row: dict, *, display: str, row_no: int) -> dict[str, Any]:
    if not str(row.get("path") or "").strip():
        raise FormatError("missing required column", file=display, line=row_no, field="path")
    out: dict[str, Any] = {"path": str(row["path"]).strip()}
    for key in MANIFEST_TEXT:
        value = row.get(key)
        if value not in (None, ""):
            out[key] = str(value).strip()
    if "mode" in out:
        if out["mode"] not in MODE_NAMES:
            raise FormatError(
                f"mode must be concurrent or sequential, got {out['mode']!r}", file=display, line=row_no, field="mode"
            )
        out["mode"] = MODE_NAMES[out["mode"]]
    outcomes: dict[str, Any] = {}
    for key in MANIFEST_INT:
        value = row.get(key)
        if value in (None, ""):
            continue
        try:
            outcomes[key] = int(value) if not isinstance(value, bool) else _bad(key, value, display, row_no)
        except (TypeError, ValueError):
            _bad(key, value, display, row_no)
    for key in MANIFEST_FLOAT:
        value = row.get(key)
        if value in (None, ""):
            continue
        try:
            outcomes[key] = float(value)
        except (TypeError, ValueError):
            _bad(key, value, display, row_no)
    value = row.get("task_pass")
    if value not in (None, ""):
        truthy = {"true", "1", "yes", "pass", "passed"}
        falsy = {"false", "0", "no", "fail", "failed"}
        text = str(value).strip().lower()
        if isinstance(value, bool):
            outcomes["task_pass"] = value
        elif text in truthy | falsy:
            outcomes["task_pass"] = text in truthy
        else:
            _bad("task_pass", value, display, row_no)
    out["outcomes"] = validate_outcomes(outcomes, name=display, line=row_no, prefix="manifest")
    return out


def _bad(key: str, value: Any, display: str, row_no: int) -> Any:
    raise FormatError(f"cannot read {value!r} as {key}", file=display, line=row_no, field=key)


def apply_manifest(sources: list[RunSource], manifest: Path) -> list[ParseWarning]:
    """Each run takes the fields of the first row whose path matches one of its files; a row that
    matches no run is a warning."""
    rows = read_manifest(manifest)
    base = manifest.parent
    used: set[int] = set()
    for source in sources:
        for row_no, row in rows:
            if _manifest_matches(row["path"], source, base):
                used.add(row_no)
                merged = dict(source.header_defaults)
                outcomes = dict(merged.get("outcomes") or {})
                outcomes.update(row["outcomes"])
                merged.update({k: v for k, v in row.items() if k not in ("path", "outcomes")})
                merged["outcomes"] = outcomes
                source.header_defaults = merged
                break
    return [
        ParseWarning(f"manifest row matches no imported file: {row['path']!r}", file=manifest.name, line=row_no)
        for row_no, row in rows
        if row_no not in used
    ]


def _manifest_matches(pattern: str, source: RunSource, base: Path) -> bool:
    for file in source.files:
        candidates = {file.name, source.name, source.display(file)}
        with contextlib.suppress(ValueError):
            candidates.add(str(file.resolve().relative_to(base.resolve())))
        if pattern in candidates or any(Path(c).match(pattern) for c in candidates):
            return True
    return False
