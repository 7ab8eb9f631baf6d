"""Reads for pilot open coding: the open codes grouped by their normalised wording."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..models import PilotRound


@dataclass
class OpenCodeGroup:
    key: str  # normalised text
    texts: list[str] = field(default_factory=list)
    runs: set[int] = field(default_factory=set)
    annotators: set[str] = field(default_factory=set)
    count: int = 0
    promoted_to: str = ""


def pilot_groups(*, pilot: PilotRound) -> list[OpenCodeGroup]:
    groups: dict[str, OpenCodeGroup] = {}
    for code in pilot.open_codes.select_related("annotator", "promoted_to"):
        group = groups.setdefault(code.group_key, OpenCodeGroup(key=code.group_key))
        if code.text not in group.texts:
            group.texts.append(code.text)
        group.runs.add(code.run_id)
        group.annotators.add(code.annotator.get_username())
        group.count += 1
        if code.promoted_to:
            group.promoted_to = code.promoted_to.name
    return sorted(groups.values(), key=lambda g: (-g.count, g.key))
