"""The study's structured reviews beside each annotation.md (ORM-free).

`review.json` decides every candidate leaf label of the codebook for the pair — retained or
rejected, with a reason, evidence and contrast anchors (`{"path": "parallel/cell/model.patch",
"line": 14}`: the path names the side), the realized consequence, the nearest rejected label and
why it was only a near match — and lists the `retained_patterns`, each with all its anchors. Beside
those it holds the study's reconstruction of both runs (modes, strategies, comparison dimensions,
outcome analysis, cardinality audit): the whole document is kept as data, in its order, so that
`serialize_review(document)` writes the file back byte for byte.

`advantage-review.json` says whether concurrency had an advantage in the pair.

Every error names the file and the JSON field: `claude/review.json: field
'taxonomy_decisions[3].candidates[1].decision': expected retain or reject, got 'maybe'`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

DECISIONS = ("retain", "reject")


class ReviewFormatError(ValueError):
    pass


@dataclass(frozen=True)
class ReviewAnchor:
    path: str  # as the review writes it, side first: parallel/cell/model.patch
    line: int

    @property
    def text(self) -> str:
        """The anchor as a coding writes it (`parallel/cell/model.patch:14`)."""
        return f"{self.path}:{self.line}"


@dataclass
class Candidate:
    top_label: str
    sub_label: str
    third_label: str
    decision: str
    reason: str
    episode_id: str = ""
    parallel_evidence: list[ReviewAnchor] = field(default_factory=list)
    serial_contrast: list[ReviewAnchor] = field(default_factory=list)
    realized_consequence: str = ""
    nearest_rejected_label: str = ""
    near_match_reason: str = ""
    where: str = ""  # its JSON path in the file


@dataclass
class RetainedPattern:
    top_label: str
    sub_label: str
    third_label: str
    episode_id: str = ""
    comparative_role: str = ""
    reason: str = ""
    parallel_evidence: list[ReviewAnchor] = field(default_factory=list)
    serial_contrast: list[ReviewAnchor] = field(default_factory=list)
    realized_consequence: str = ""
    nearest_rejected_label: str = ""
    near_match_reason: str = ""
    where: str = ""


@dataclass
class Review:
    name: str
    pair_id: str
    task_id: str = ""
    agent: str = ""
    outcome_relation: str = ""
    candidates: list[Candidate] = field(default_factory=list)
    patterns: list[RetainedPattern] = field(default_factory=list)
    document: dict = field(default_factory=dict)  # the whole file, as data, in its order

    @property
    def retained(self) -> list[Candidate]:
        return [c for c in self.candidates if c.decision == "retain"]

    @property
    def rejected(self) -> list[Candidate]:
        return [c for c in self.candidates if c.decision == "reject"]

    @property
    def anchor_count(self) -> int:
        """Evidence and contrast anchors of the candidate decisions."""
        return sum(len(c.parallel_evidence) + len(c.serial_contrast) for c in self.candidates)


def _load(text: str, name: str) -> dict:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReviewFormatError(f"{name}:{exc.lineno}: not valid JSON ({exc.msg})") from exc
    if not isinstance(data, dict):
        raise ReviewFormatError(f"{name}: expected a JSON object, got {_kind(data)}")
    return data


class _Fields:
    """Typed reads of one JSON object, each error naming the file and the field's path."""

    def __init__(self, name: str, where: str, data: Any):
        if not isinstance(data, dict):
            raise ReviewFormatError(f"{name}: field '{where}': expected an object, got {_kind(data)}")
        self.name, self.where, self.data = name, where, data

    def at(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def error(self, key: str, message: str) -> ReviewFormatError:
        return ReviewFormatError(f"{self.name}: field '{self.at(key)}': {message}")

    def text(self, key: str, *, required: bool = False) -> str:
        value = self.data.get(key)
        if value is None or value == "":
            if required:
                raise self.error(key, "missing" if value is None else "empty")
            return ""
        if not isinstance(value, str):
            raise self.error(key, f"expected text, got {_kind(value)}")
        return value

    def items(self, key: str, *, required: bool = False) -> list:
        value = self.data.get(key)
        if value is None and not required:
            return []
        if not isinstance(value, list):
            raise self.error(key, f"expected a list, got {_kind(value)}")
        return value

    def anchors(self, key: str) -> list[ReviewAnchor]:
        found = []
        for i, item in enumerate(self.items(key)):
            anchor = _Fields(self.name, f"{self.at(key)}[{i}]", item)
            path = anchor.text("path", required=True)
            line = item.get("line")
            if isinstance(line, bool) or not isinstance(line, int) or line < 1:
                raise anchor.error("line", f"expected a line number (1 or more), got {json.dumps(line)}")
            found.append(ReviewAnchor(path=path, line=line))
        return found


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def parse_review(text: str, *, name: str = "review.json") -> Review:
    return review_from_data(_load(text, name), name=name)


def review_from_data(data: dict, *, name: str = "review.json") -> Review:
    """A review document (the file's JSON) read and checked: its candidate decisions, with their
    anchors and reasons, and its retained patterns, which must be the retained candidates."""
    top = _Fields(name, "", data)
    review = Review(
        name=name,
        pair_id=top.text("pair_id"),
        task_id=top.text("task_id"),
        agent=top.text("agent"),
        outcome_relation=top.text("outcome_relation"),
        document=data,
    )
    for i, raw_group in enumerate(top.items("taxonomy_decisions", required=True)):
        group = _Fields(name, f"taxonomy_decisions[{i}]", raw_group)
        labels = group.text("top_label", required=True), group.text("sub_label", required=True)
        for j, raw in enumerate(group.items("candidates", required=True)):
            candidate = _Fields(name, f"{group.where}.candidates[{j}]", raw)
            decision = candidate.text("decision", required=True)
            if decision not in DECISIONS:
                raise candidate.error("decision", f"expected retain or reject, got {decision!r}")
            review.candidates.append(
                Candidate(
                    *labels,
                    third_label=candidate.text("third_label", required=True),
                    decision=decision,
                    reason=candidate.text("reason"),
                    episode_id=candidate.text("episode_id"),
                    parallel_evidence=candidate.anchors("parallel_evidence"),
                    serial_contrast=candidate.anchors("serial_contrast"),
                    realized_consequence=candidate.text("realized_consequence"),
                    nearest_rejected_label=candidate.text("nearest_rejected_label"),
                    near_match_reason=candidate.text("near_match_reason"),
                    where=candidate.where,
                )
            )
    for i, raw in enumerate(top.items("retained_patterns")):
        pattern = _Fields(name, f"retained_patterns[{i}]", raw)
        review.patterns.append(
            RetainedPattern(
                top_label=pattern.text("top_label", required=True),
                sub_label=pattern.text("sub_label", required=True),
                third_label=pattern.text("third_label", required=True),
                episode_id=pattern.text("episode_id"),
                comparative_role=pattern.text("comparative_role"),
                reason=pattern.text("reason"),
                parallel_evidence=pattern.anchors("parallel_evidence"),
                serial_contrast=pattern.anchors("serial_contrast"),
                realized_consequence=pattern.text("realized_consequence"),
                nearest_rejected_label=pattern.text("nearest_rejected_label"),
                near_match_reason=pattern.text("near_match_reason"),
                where=pattern.where,
            )
        )
    retained = {c.third_label for c in review.retained}
    for pattern in review.patterns:
        if pattern.third_label not in retained:
            raise ReviewFormatError(
                f"{name}: field '{pattern.where}.third_label': {pattern.third_label!r} is not retained in "
                "taxonomy_decisions"
            )
    unlisted = retained - {p.third_label for p in review.patterns}
    if "retained_patterns" in data and unlisted:
        raise ReviewFormatError(
            f"{name}: field 'retained_patterns': no pattern for the retained {', '.join(sorted(unlisted))}"
        )
    return review


def serialize_review(document: dict) -> str:
    """A review document written the way the study writes its files."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


ADVANTAGE_KEYS = ("pair_id", "phase", "decision", "exclusion_code", "advantage", "confidence")


def parse_advantage_review(text: str, *, name: str = "advantage-review.json") -> dict:
    """The whole document (kept as data); its verdict fields are ADVANTAGE_KEYS."""
    data = _load(text, name)
    fields = _Fields(name, "", data)
    for key in ("pair_id", "phase", "decision", "exclusion_code"):
        fields.text(key)
    return data


def advantage_verdict(document: dict) -> dict:
    return {key: document.get(key) for key in ADVANTAGE_KEYS if key in document}
