"""The formats Parallax reads, in the order a file is offered to them (ORM-free; docs/format.md).

Each is a module of this package that exports `FORMAT` (records.Format): its `--format` name, how
messages describe it, its parser, which files it claims and how it groups them into runs. Adding a
format is that module and a line in FORMATS: finding runs (detect.py), the `--format` choices of the
command, the upload page and the API, the accepted file names and every message that lists the
formats read this list.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import claude_code, codex, codex_exec, gemini_cli, kimi, openhands, otel_genai, parallax_jsonl, swe_agent
from .records import Format, FormatError, Parser

FORMATS: list[Format] = [
    parallax_jsonl.FORMAT,
    claude_code.FORMAT,
    codex.FORMAT,
    codex_exec.FORMAT,
    kimi.FORMAT,
    swe_agent.FORMAT,
    openhands.FORMAT,
    otel_genai.FORMAT,
    gemini_cli.FORMAT,
]


def choices() -> tuple[str, ...]:
    """The `--format` values: `auto` (each file by what it looks like), then each format's name."""
    return ("auto", *(fmt.name for fmt in FORMATS))


def named(name: str) -> Format:
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    raise FormatError(f"unknown format {name!r}; one of {', '.join(choices())}")


def parser_for(name: str) -> Parser:
    return named(name).parser()


def claiming(path: Path) -> Format | None:
    """The first format that claims the file by its path or first bytes."""
    return next((fmt for fmt in FORMATS if fmt.claims(path)), None)


def sniff(first_line: Any) -> Format | None:
    """The first format a JSON-lines file whose first JSON line is `first_line` looks like."""
    return next((fmt for fmt in FORMATS if fmt.looks_like(first_line)), None)


def suffixes() -> tuple[str, ...]:
    """Every file name ending a format is read from."""
    return tuple(dict.fromkeys(suffix for fmt in FORMATS for suffix in fmt.suffixes))


def described(last: str = "or") -> str:
    """Every format as messages name them: "Parallax JSONL, a Claude Code session, … or an OpenHands event list"."""
    return _listed([fmt.description for fmt in FORMATS], last)


def files_described() -> str:
    """Every format with the file names it is read from: "Parallax JSONL, … or a Kimi Code session (.jsonl, …);
    a SWE-agent trajectory (.traj, .traj.gz); …"."""
    by_suffixes: dict[tuple[str, ...], list[str]] = {}
    for fmt in FORMATS:
        by_suffixes.setdefault(fmt.suffixes, []).append(fmt.description)
    return "; ".join(f"{_listed(names, 'or')} ({', '.join(ends)})" for ends, names in by_suffixes.items())


def _listed(items: list[str], last: str) -> str:
    return f" {last} ".join([", ".join(items[:-1]), items[-1]]) if len(items) > 1 else "".join(items)
