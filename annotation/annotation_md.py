"""Parser and writer for the study's own annotation records (`annotation.md`, one per pair). ORM-free.

A record, as the study writes it::

    schema_version: 2                         the header: `key: value` lines, in order
    pair_id: None/claude
    …
    verdict: patterns_retained

    # Comparative Analysis                    prose sections: a heading and its lines, where a
                                              `key: value` line is a field of the section
    ## Task-Solving Difference
    The parallel run implemented …

    parallel_anchor: `parallel/cell/model.patch:9`
    serial_anchor: `serial/cell/model.patch:12`
    causal_scope: supported comparative contributors, not an exclusive root cause

    ## Failure 1                              one block per failure: top_label, sub_label,
    top_label: Task Orchestration Problems    third_label, episode_id, comparative_role,
    …                                         parallel_evidence, serial_contrast (backticked
                                              `path:line` anchors), realized_consequence,
                                              reasoning, nearest_rejected_label, rejection_reason

`PublishedRecord.data()` is all of it as plain JSON data, in order; `render_annotation_md` writes
that data back with the failure blocks it is given — byte for byte, for a record in the layout above
given its own failures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_KEY_VALUE = re.compile(r"^([a-z_][a-z0-9_]*):\s?(.*)$")
_FAILURE = re.compile(r"^##\s+Failure\s+(\d+)\s*$", re.IGNORECASE)
_ANCHOR = re.compile(r"`([^`]+)`")
INDENT = "  "  # a value's continuation line


def anchors_in(value: str) -> list[str]:
    """The backticked anchors of a value (`a`, `b`), or the value itself if it has none."""
    found = _ANCHOR.findall(value)
    return found or ([value.strip()] if value.strip() else [])


@dataclass
class PublishedFailure:
    number: int
    line: int
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def labels(self) -> tuple[str, str, str]:
        return (self.fields.get("top_label", ""), self.fields.get("sub_label", ""), self.fields.get("third_label", ""))

    def anchors(self, key: str) -> list[str]:
        return anchors_in(self.fields.get(key, ""))


@dataclass
class Section:
    """A prose section: its heading line as written and its lines — text as written, or a
    `[key, value]` field."""

    heading: str
    lines: list[str | list[str]] = field(default_factory=list)

    @property
    def title(self) -> str:
        return self.heading.lstrip("#").strip()

    @property
    def fields(self) -> dict[str, str]:
        return {line[0]: line[1] for line in self.lines if isinstance(line, list)}

    @property
    def prose(self) -> str:
        return "\n".join(line for line in self.lines if isinstance(line, str)).strip()


@dataclass
class PublishedRecord:
    name: str
    header: dict[str, str] = field(default_factory=dict)  # in the record's order
    failures: list[PublishedFailure] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    title: str = ""  # a `# title` line above the header
    text: str = ""  # the record whole, as published

    @property
    def pair_id(self) -> str:
        return self.header.get("pair_id", "")

    @property
    def comparative(self) -> dict[str, str]:
        """Every `key: value` line of the prose (parallel_anchor, serial_anchor, causal_scope, …), in order."""
        return {key: value for section in self.sections for key, value in section.fields.items()}

    def data(self) -> dict:
        """Everything the record says, as JSON data (kept in this order: see PublishedRecord.data in models.py)."""
        return {
            "title": self.title,
            "header": dict(self.header),
            "sections": [
                {"heading": s.heading, "lines": [list(x) if isinstance(x, list) else x for x in s.lines]}
                for s in self.sections
            ],  # fmt: skip
            "comparative": self.comparative,
            "failures": [{"number": f.number, "fields": dict(f.fields)} for f in self.failures],
        }


class PublishedFormatError(ValueError):
    pass


def parse_annotation_md(text: str, *, name: str = "annotation.md") -> PublishedRecord:
    """Every field of the record: the header, the prose sections (their lines as written, a
    `key: value` line as a field), and each `## Failure N` block. A field's value may run on over
    the following lines: lines indented by two spaces whatever they hold (blank ones too — how
    `render_annotation_md` writes a value of several paragraphs), and in the header and failure
    blocks unindented lines until the next `key:` line, heading or blank line. A `# title` before
    the header is allowed. A failure block line that is neither is refused, naming its line."""
    record = PublishedRecord(name=name, text=text)
    failure: PublishedFailure | None = None
    section: Section | None = None
    last: tuple[dict[str, str] | list, str] | None = None  # the field a continuation line extends
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if last is not None and raw.startswith(INDENT):
            _extend(last, raw[len(INDENT) :].rstrip())
            continue
        heading = _FAILURE.match(line)
        if heading:
            failure, section, last = PublishedFailure(number=int(heading.group(1)), line=lineno), None, None
            record.failures.append(failure)
            continue
        if line.startswith("#"):
            if not record.header and not record.sections and not record.title:
                record.title = line  # a title above the header
                continue
            failure, last = None, None
            section = Section(heading=raw)
            record.sections.append(section)
            continue
        match = _KEY_VALUE.match(line)
        if section is not None:  # prose: every line kept as written; a `key: value` line is a field
            if match:
                field_line = [match.group(1), match.group(2).strip()]
                section.lines.append(field_line)
                last = (field_line, match.group(1))
            else:
                section.lines.append(raw)
                last = None
            continue
        target = failure.fields if failure is not None else record.header
        if match:
            target[match.group(1)] = match.group(2).strip()
            last = (target, match.group(1))
        elif not line.strip():
            last = None
        elif last is not None:
            _extend(last, line.strip(), unindented=True)
        else:
            where = f"Failure {failure.number}" if failure is not None else "the header"
            raise PublishedFormatError(
                f"{name}:{lineno}: {where} holds a line that is no `key: value` field: {line[:60]!r}"
            )
    for section in record.sections:
        while section.lines and section.lines[-1] == "":
            section.lines.pop()  # the blank line before the next heading is the layout's
    if not record.header.get("pair_id"):
        raise PublishedFormatError(f"{name}: field 'pair_id': the header (the `key: value` lines on top) names none")
    for failure in record.failures:
        for key in ("top_label", "sub_label", "third_label"):
            if not failure.fields.get(key):
                raise PublishedFormatError(f"{name}:{failure.line}: field '{key}': Failure {failure.number} has none")
    return record


def _extend(last: tuple[dict[str, str] | list, str], more: str, *, unindented: bool = False) -> None:
    target, key = last
    if isinstance(target, list):  # a prose field: [key, value]
        target[1] += "\n" + more
    elif unindented:
        target[key] = (target[key] + "\n" + more).strip()
    else:
        target[key] += "\n" + more


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


def _field_lines(key: str, value: str) -> list[str]:
    first, *more = str(value).split("\n")
    return [f"{key}: {first}" if first else f"{key}:", *(INDENT + line for line in more)]


def render_annotation_md(*, data: dict, failures: list[dict]) -> str:
    """A record in the study's layout: its title and header, its prose sections (their lines as
    stored), then one `## Failure N` block per failure (anchors backticked; empty fields left out;
    a value over several lines written over several lines, as the parser reads it back)."""
    out = [data["title"], ""] if data.get("title") else []
    for key, value in data.get("header", {}).items():
        out += _field_lines(key, value)
    for section in data.get("sections", []):
        out += ["", section["heading"]]
        for line in section["lines"]:
            out += _field_lines(*line) if isinstance(line, list) else [line]
    for number, failure in enumerate(failures, start=1):
        out += ["", f"## Failure {number}"]
        for key in FAILURE_KEYS:
            value = failure.get(key)
            if key in ANCHOR_KEYS:
                value = ", ".join(f"`{anchor}`" for anchor in value or [])
            if value:
                out += _field_lines(key, value)
    return "\n".join(out) + "\n"


def failures_of(record_data: dict) -> list[dict]:
    """The failure blocks of a record's data as `render_annotation_md` takes them (anchors as lists)."""
    return [
        {key: anchors_in(value) if key in ANCHOR_KEYS else value for key, value in failure["fields"].items()}
        for failure in record_data.get("failures", [])
    ]
