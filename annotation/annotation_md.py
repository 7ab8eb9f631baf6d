"""Parser for the study's own annotation records (`annotation.md`, one per pair). ORM-free.

A header of `key: value` lines (pair_id, task_id, agent, outcome_relation, verdict …), prose
sections, then `## Failure N` blocks of `key: value` lines: top_label, sub_label, third_label,
episode_id, comparative_role, parallel_evidence, serial_contrast (backticked `path:line`
anchors), realized_consequence, reasoning, nearest_rejected_label, rejection_reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_KEY_VALUE = re.compile(r"^([a-z_][a-z0-9_]*):\s?(.*)$")
_FAILURE = re.compile(r"^##\s+Failure\s+(\d+)\s*$", re.IGNORECASE)
_ANCHOR = re.compile(r"`([^`]+)`")


@dataclass
class PublishedFailure:
    number: int
    line: int
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def labels(self) -> tuple[str, str, str]:
        return (self.fields.get("top_label", ""), self.fields.get("sub_label", ""), self.fields.get("third_label", ""))

    def anchors(self, key: str) -> list[str]:
        value = self.fields.get(key, "")
        found = _ANCHOR.findall(value)
        return found or ([value.strip()] if value.strip() else [])


@dataclass
class PublishedRecord:
    name: str
    header: dict[str, str] = field(default_factory=dict)
    failures: list[PublishedFailure] = field(default_factory=list)

    @property
    def pair_id(self) -> str:
        return self.header.get("pair_id", "")


class PublishedFormatError(ValueError):
    pass


def parse_annotation_md(text: str, *, name: str = "annotation.md") -> PublishedRecord:
    record = PublishedRecord(name=name)
    current: PublishedFailure | None = None
    in_header = True
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        heading = _FAILURE.match(line)
        if heading:
            current = PublishedFailure(number=int(heading.group(1)), line=lineno)
            record.failures.append(current)
            in_header = False
            continue
        if line.startswith("#"):
            in_header = False
            current = None if line.startswith("## ") else current
            continue
        match = _KEY_VALUE.match(line)
        if match and current is not None:
            current.fields[match.group(1)] = match.group(2).strip()
        elif match and in_header:
            record.header[match.group(1)] = match.group(2).strip()
    if not record.header.get("pair_id"):
        raise PublishedFormatError(f"{name}: no 'pair_id:' line in the header")
    for failure in record.failures:
        for key in ("top_label", "sub_label", "third_label"):
            if not failure.fields.get(key):
                raise PublishedFormatError(f"{name}:{failure.line}: Failure {failure.number} has no '{key}:'")
    return record
