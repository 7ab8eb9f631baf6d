"""The importer's fast paths give exactly what the general code gives."""

from __future__ import annotations

import re

import pytest

from trajectories.formats.parallax_jsonl import _parse_event_checked, parse_event
from trajectories.formats.records import FormatError

GOOD = {
    "context": "main",
    "seq": 3,
    "kind": "tool_call",
    "ts": "2026-08-01T10:00:00Z",
    "tool": "Bash",
    "text": "ls",
    "files": ["a.py"],
    "target": "",
}


def test_fast_and_checked_event_parsing_agree():
    assert parse_event(dict(GOOD), name="f", line=1) == _parse_event_checked(dict(GOOD), name="f", line=1)
    minimal = {"context": "main", "seq": 0, "kind": "message"}
    assert parse_event(minimal, name="f", line=1) == _parse_event_checked(minimal, name="f", line=1)


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("files", {}, "field 'files'"),
        ("files", ["a", 1], "field 'files[1]'"),
        ("text", 0, "field 'text'"),
        ("tool", False, "field 'tool'"),
        ("seq", True, "field 'seq'"),
        ("seq", -1, "field 'seq'"),
        ("kind", "nap", "field 'kind'"),
        ("context", 7, "field 'context'"),
        ("target", [], "field 'target'"),
    ],
)
def test_bad_values_still_get_the_precise_error(field, value, message):
    with pytest.raises(FormatError, match=re.escape(message)):
        parse_event({**GOOD, field: value}, name="f", line=1)
