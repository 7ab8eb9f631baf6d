"""Streaming helpers shared by the parsers: line iteration, JSON, timestamps, files."""

from __future__ import annotations

import gzip
import io
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson

from .records import FormatError

# Longest text kept for one event; the rest is cut with a marker (the raw file stays
# the source of truth, and this bounds what one page of the viewer can weigh).
MAX_EVENT_TEXT = 20_000


def _limit(name: str, default: int) -> int:
    from django.conf import settings

    return int(getattr(settings, name, default))


class _Bounded(io.RawIOBase):
    """The decompressed bytes of a `.gz` file, refused as they stream past once they exceed the
    total limit, or a compression ratio no log has (a gzip bomb): memory and disk stay bounded."""

    RATIO_FROM = 16 * 1024 * 1024  # small files may compress very well; a bomb is large

    def __init__(self, path: Path):
        self.inner = gzip.open(path, "rb")  # noqa: SIM115 - closed by close() below, with the stream
        self.name, self.compressed, self.count = path.name, max(path.stat().st_size, 1), 0
        self.max_bytes = _limit("PARALLAX_MAX_ARCHIVE_BYTES", 8 * 1024**3)
        self.max_ratio = _limit("PARALLAX_MAX_COMPRESSION_RATIO", 200)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.inner.readinto(buffer)
        self.count += n
        if self.count > self.max_bytes:
            raise FormatError(f"decompresses to more than {self.max_bytes:,} bytes (limit); refusing", file=self.name)
        if self.count > self.RATIO_FROM and self.count > self.max_ratio * self.compressed:
            raise FormatError(
                f"expands more than {self.max_ratio}x ({self.compressed:,} bytes compressed; gzip bomb?); refusing",
                file=self.name,
            )
        return n

    def close(self) -> None:
        self.inner.close()
        super().close()


def open_binary(path: Path) -> IO[bytes]:
    """Open a file for streaming, transparently un-gzipping `.gz` files within the limits."""
    if path.suffix == ".gz":
        return io.BufferedReader(_Bounded(path), buffer_size=1024 * 1024)
    return path.open("rb")


def read_line(handle: IO[bytes], *, name: str, lineno: int) -> bytes:
    """One line, at most PARALLAX_MAX_LINE_BYTES of it in memory; a longer one is refused."""
    limit = _limit("PARALLAX_MAX_LINE_BYTES", 32 * 1024 * 1024)
    raw = handle.readline(limit + 1)
    if len(raw) > limit and not raw.endswith(b"\n"):
        raise FormatError(f"line is longer than {limit:,} bytes (limit); refusing", file=name, line=lineno)
    return raw


def iter_lines(path: Path, *, display: str = "") -> Iterator[tuple[int, bytes]]:
    """Yield (1-based line number, raw line without newline); never loads the whole file, nor more
    than one line (at most PARALLAX_MAX_LINE_BYTES) of it."""
    name = display or path.name
    try:
        with open_binary(path) as handle:
            lineno = 0
            while raw := read_line(handle, name=name, lineno=lineno + 1):
                lineno += 1
                yield lineno, raw.rstrip(b"\r\n")
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise FormatError(f"cannot read file: {exc}", file=name) from exc


def iter_json_lines(
    path: Path, *, display: str = "", tolerate_truncated_tail: bool = False, warnings: list | None = None
) -> Iterator[tuple[int, Any]]:
    """Yield (line number, decoded object) for each non-blank JSONL line.

    Bad UTF-8 and bad JSON raise FormatError naming file and line. With
    `tolerate_truncated_tail`, an undecodable *last* line (a log cut mid-write, as in
    excerpts of native logs) becomes a warning instead.
    """
    name = display or path.name
    pending: tuple[int, bytes, Exception] | None = None
    for lineno, raw in iter_lines(path, display=name):
        if pending is not None:
            bad_line, _, exc = pending
            raise _line_error(name, bad_line, exc)
        if not raw.strip():
            continue
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(f"invalid UTF-8 at byte {exc.start}", file=name, line=lineno) from exc
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            if tolerate_truncated_tail:
                pending = (lineno, raw, exc)
                continue
            raise _line_error(name, lineno, exc) from exc
        yield lineno, obj
    if pending is not None and warnings is not None:
        from .records import ParseWarning

        warnings.append(
            ParseWarning("last line is incomplete JSON (log cut mid-write); ignored", file=name, line=pending[0])
        )


def _line_error(name: str, lineno: int, exc: Exception) -> FormatError:
    return FormatError(f"not valid JSON ({exc})", file=name, line=lineno)


# Records some agents write before a log's first real line — Claude Code: `summary` (older versions,
# resumed sessions), `queue-operation` (2.x), `file-history-snapshot` — that say nothing about the format.
LEADING_METADATA_TYPES = frozenset({"summary", "queue-operation", "file-history-snapshot"})
_LOOK_AHEAD_LINES = 200


def first_json_line(path: Path) -> Any | None:
    """Decode the first non-blank line of a (possibly gzipped) file that is not a leading metadata
    record (LEADING_METADATA_TYPES; up to _LOOK_AHEAD_LINES are looked past, and a file of nothing
    else gives its first line). None if that line is not JSON or the file cannot be read; a file over
    the limits (a gzip bomb, a giant line) raises FormatError saying so."""
    first = None
    try:
        with open_binary(path) as handle:
            for number in range(_LOOK_AHEAD_LINES + 1):
                raw = read_line(handle, name=path.name, lineno=number + 1)
                if not raw:
                    break
                if not raw.strip():
                    continue
                try:
                    obj = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    return first
                if not (isinstance(obj, dict) and obj.get("type") in LEADING_METADATA_TYPES):
                    return obj
                if first is None:
                    first = obj
                if number >= _LOOK_AHEAD_LINES:
                    break
    except (OSError, EOFError, gzip.BadGzipFile):
        return first
    return first


def first_line_problem(path: Path) -> tuple[str, int | None]:
    """Why `first_json_line` found no JSON in a non-empty file, in words a person can act on, and the line (None for
    the file as a whole): a .gz that is not gzip or is cut short, a NUL byte, text that is not UTF-8 (a lone
    surrogate), or the JSON parser's own complaint."""
    try:
        with open_binary(path) as handle:
            for number in range(1, _LOOK_AHEAD_LINES + 2):
                raw = read_line(handle, name=path.name, lineno=number)
                if not raw:
                    break
                if not raw.strip():
                    continue
                try:
                    orjson.loads(raw)
                except orjson.JSONDecodeError as exc:
                    if b"\x00" in raw:
                        return f"line {number} holds a NUL byte: it is not JSON text", number
                    try:
                        raw.decode("utf-8")
                    except UnicodeDecodeError as bad:
                        return f"line {number} is not UTF-8 text ({bad.reason} at byte {bad.start})", number
                    if "surrogate" in str(exc).lower():
                        return f"line {number} holds a lone surrogate (\\ud800–\\udfff): not valid JSON text", number
                    return f"line {number} is not JSON ({exc})", number
                return "", None
    except gzip.BadGzipFile:
        return "named .gz but not a gzip file", None
    except EOFError:
        return "the .gz file is cut short: it ends before its compressed data does", None
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})", None
    return "", None


_NUMERIC = re.compile(r"^-?\d+(\.\d+)?$")


def parse_timestamp(
    value: Any, *, file: str = "", line: int | None = None, field: str = "timestamp", require_tz: bool = False
) -> datetime | None:
    """ISO-8601 string or Unix epoch (s or ms) → aware UTC datetime; None stays None."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise FormatError("expected a timestamp, got a boolean", file=file, line=line, field=field)
    if isinstance(value, (int, float)):
        return _from_epoch(float(value), file=file, line=line, field=field)
    if not isinstance(value, str):
        raise FormatError(
            f"expected an ISO-8601 timestamp, got {type(value).__name__}", file=file, line=line, field=field
        )
    if _NUMERIC.match(value):
        return _from_epoch(float(value), file=file, line=line, field=field)
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError as exc:
        raise FormatError(f"not an ISO-8601 timestamp: {value[:40]!r}", file=file, line=line, field=field) from exc
    if parsed.tzinfo is None:
        if require_tz:
            raise FormatError(
                f"timestamp has no time zone: {value!r} (add 'Z' or an offset)", file=file, line=line, field=field
            )
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def _from_epoch(value: float, *, file: str, line: int | None, field: str) -> datetime:
    # Anything above ~ year 33658 in seconds is certainly milliseconds.
    seconds = value / 1000.0 if abs(value) > 1e12 else value
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise FormatError(f"timestamp out of range: {value}", file=file, line=line, field=field) from exc


def clip_text(text: str, limit: int = MAX_EVENT_TEXT) -> str:
    """Bound an event's text; NUL characters (which PostgreSQL text cannot hold) become U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… [{len(text) - limit} more characters cut by Parallax]"


def to_text(value: Any) -> str:
    """Render tool input/output payloads (str, list of blocks, dict) as display text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for item in value:
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                parts.append(item["text"])
            elif isinstance(item, dict) and item.get("type") == "image":
                parts.append("[image]")
            else:
                parts.append(to_text(item))
        return "\n".join(p for p in parts if p)
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    except TypeError:
        return str(value)


FILE_ARG_KEYS = ("file_path", "path", "notebook_path", "filepath", "filename", "target_file")


def files_from_args(args: Any) -> list[str]:
    """Paths named by a tool call's arguments (Edit/Write/Read style tools)."""
    if not isinstance(args, dict):
        return []
    found = []
    for key in FILE_ARG_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            found.append(value)
    edits = args.get("edits")
    if isinstance(edits, list):
        for edit in edits:
            if isinstance(edit, dict):
                found.extend(files_from_args(edit))
    return sorted(set(found))


_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)
_PATCH_MOVE = re.compile(r"^\*\*\* Move to: (.+)$", re.MULTILINE)


def files_from_patch(patch: str) -> list[str]:
    """Files named in a Codex `apply_patch` envelope."""
    return sorted(set(_PATCH_FILE.findall(patch)) | set(_PATCH_MOVE.findall(patch)))


def load_json_file(path: Path, *, display: str = "") -> Any:
    """Small metadata files (cell.json, state.json, workflow json, manifests), read whole: at most
    PARALLAX_MAX_LINE_BYTES of them, a larger one is refused naming the file."""
    name = display or path.name
    limit = _limit("PARALLAX_MAX_LINE_BYTES", 32 * 1024 * 1024)
    try:
        with open_binary(path) as handle:
            data = handle.read(limit + 1)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise FormatError(f"cannot read file: {exc}", file=name) from exc
    if len(data) > limit:
        raise FormatError(f"metadata file is larger than {limit:,} bytes (limit); refusing", file=name)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise FormatError(f"not valid JSON ({exc})", file=name) from exc


def read_head(path: Path, size: int = 4096) -> bytes:
    try:
        with open_binary(path) as handle:
            return handle.read(size)
    except (OSError, EOFError, gzip.BadGzipFile):
        return b""
