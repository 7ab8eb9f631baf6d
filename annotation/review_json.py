"""The study's structured reviews beside each annotation.md (ORM-free): `review.json` — its
per-candidate taxonomy decisions (every leaf label of the codebook, retained or rejected with a
reason) — and `advantage-review.json` — whether concurrency had an advantage in the pair."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

DECISIONS = ("retain", "reject")


class ReviewFormatError(ValueError):
    pass


@dataclass
class Candidate:
    top_label: str
    sub_label: str
    third_label: str
    decision: str
    reason: str
    episode_id: str = ""


@dataclass
class Review:
    name: str
    pair_id: str
    candidates: list[Candidate] = field(default_factory=list)

    @property
    def retained(self) -> list[Candidate]:
        return [c for c in self.candidates if c.decision == "retain"]


def _load(text: str, name: str) -> dict:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReviewFormatError(f"{name}:{exc.lineno}: not valid JSON ({exc.msg})") from exc
    if not isinstance(data, dict):
        raise ReviewFormatError(f"{name}: expected a JSON object")
    return data


def _text(value: Any, name: str, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ReviewFormatError(f"{name}: field '{where}': expected text, got {type(value).__name__}")
    return value


def parse_review(text: str, *, name: str = "review.json") -> Review:
    data = _load(text, name)
    review = Review(name=name, pair_id=_text(data.get("pair_id"), name, "pair_id"))
    groups = data.get("taxonomy_decisions")
    if not isinstance(groups, list):
        raise ReviewFormatError(f"{name}: field 'taxonomy_decisions': expected a list")
    for i, group in enumerate(groups):
        where = f"taxonomy_decisions[{i}]"
        if not isinstance(group, dict) or not isinstance(group.get("candidates"), list):
            raise ReviewFormatError(f"{name}: field '{where}.candidates': expected a list")
        top, sub = (
            _text(group.get("top_label"), name, f"{where}.top_label"),
            _text(group.get("sub_label"), name, f"{where}.sub_label"),
        )
        for j, candidate in enumerate(group["candidates"]):
            at = f"{where}.candidates[{j}]"
            if not isinstance(candidate, dict):
                raise ReviewFormatError(f"{name}: field '{at}': expected an object")
            decision = _text(candidate.get("decision"), name, f"{at}.decision")
            if decision not in DECISIONS:
                raise ReviewFormatError(f"{name}: field '{at}.decision': expected retain or reject, got {decision!r}")
            review.candidates.append(
                Candidate(
                    top_label=top,
                    sub_label=sub,
                    third_label=_text(candidate.get("third_label"), name, f"{at}.third_label"),
                    decision=decision,
                    reason=_text(candidate.get("reason"), name, f"{at}.reason"),
                    episode_id=_text(candidate.get("episode_id"), name, f"{at}.episode_id"),
                )
            )
    return review


ADVANTAGE_KEYS = ("pair_id", "phase", "decision", "exclusion_code", "advantage", "confidence")


def parse_advantage_review(text: str, *, name: str = "advantage-review.json") -> dict:
    """The review's verdict fields (kept whole beside it)."""
    data = _load(text, name)
    return {key: data.get(key) for key in ADVANTAGE_KEYS if key in data}
