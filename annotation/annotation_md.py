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
INDENT = "  "  # a value's continuation line


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
    sections: dict[str, str] = field(default_factory=dict)  # prose: heading -> its text, as written
    text: str = ""  # the record whole, as published

    @property
    def pair_id(self) -> str:
        return self.header.get("pair_id", "")


class PublishedFormatError(ValueError):
    pass


def parse_annotation_md(text: str, *, name: str = "annotation.md") -> PublishedRecord:
    """Every field of the record: the header, the prose sections (kept as written), and each
    `## Failure N` block. A value may run on over the following lines: unindented ones until the
    next `key:` line, heading or blank line; lines indented by two spaces whatever they hold
    (blank ones too — how `render_annotation_md` writes a value of several paragraphs). A
    `# title` before the header is allowed."""
    record = PublishedRecord(name=name, text=text)
    current: PublishedFailure | None = None
    section: str | None = None
    in_header = True
    last: tuple[dict[str, str], str] | None = None  # the field a continuation line extends
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if last is not None and raw.startswith(INDENT) and section is None:
            fields, key = last
            fields[key] += "\n" + raw[len(INDENT) :].rstrip()
            continue
        heading = _FAILURE.match(line)
        if heading:
            current = PublishedFailure(number=int(heading.group(1)), line=lineno)
            record.failures.append(current)
            in_header, section, last = False, None, None
            continue
        if line.startswith("#"):
            if in_header and not record.header:
                continue  # a title above the header
            in_header, current, last = False, None, None
            section = line.lstrip("#").strip()
            record.sections.setdefault(section, "")
            continue
        if section is not None:
            record.sections[section] += raw + "\n"
        match = _KEY_VALUE.match(line)
        target = current.fields if current is not None else record.header if in_header else None
        if match and target is not None:
            target[match.group(1)] = match.group(2).strip()
            last = (target, match.group(1))
        elif line.strip() and last is not None and target is not None:
            fields, key = last
            fields[key] = (fields[key] + "\n" + line.strip()).strip()
        elif not line.strip():
            last = None
    record.sections = {heading: body.strip() for heading, body in record.sections.items()}
    if not record.header.get("pair_id"):
        raise PublishedFormatError(f"{name}: field 'pair_id': the header (the `key: value` lines on top) names none")
    for failure in record.failures:
        for key in ("top_label", "sub_label", "third_label"):
            if not failure.fields.get(key):
                raise PublishedFormatError(f"{name}:{failure.line}: field '{key}': Failure {failure.number} has none")
    return record


FAILURE_KEYS = (
    "top_label",
    "sub_label",
    "third_label",
    "episode_id",
    "comparative_role",
    "parallel_evidence",
    "serial_contrast",
    "realized_consequence",
    "reasoning",
    "nearest_rejected_label",
    "rejection_reason",
)
ANCHOR_KEYS = ("parallel_evidence", "serial_contrast")


def prose_of(text: str) -> str:
    """The prose of a record as published: from the first heading after its header up to its
    first `## Failure` block."""
    lines, out, started = text.splitlines(), [], False
    seen_key = False
    for line in lines:
        if _FAILURE.match(line.rstrip()):
            break
        if _KEY_VALUE.match(line) and not started:
            seen_key = True
            continue
        if line.startswith("#") and seen_key:
            started = True
        if started:
            out.append(line)
    return "\n".join(out).strip()


def render_annotation_md(*, header: dict[str, str], prose: str, failures: list[dict]) -> str:
    """A record in the study's shape: header lines, the prose, then one `## Failure N` block per
    instance (anchors backticked; a value over several lines is written over several lines, as
    the parser reads it back)."""
    out = [f"{key}: {value}" for key, value in header.items()]
    if prose:
        out += ["", prose]
    for number, failure in enumerate(failures, start=1):
        out += ["", f"## Failure {number}"]
        for key in FAILURE_KEYS:
            value = failure.get(key)
            if key in ANCHOR_KEYS:
                value = ", ".join(f"`{anchor}`" for anchor in value or [])
            if value:
                first, *more = str(value).split("\n")
                out.append(f"{key}: {first}")
                out += [INDENT + line for line in more]
    return "\n".join(out) + "\n"
