"""Anchors (`file:line` in a run of the pair) as a coding or a ruling gives them: how each label's
fields are named on a form, and which anchors do not resolve to a file and line stored with the
pair. Shared by the annotators' coding and the adjudicator's ruling."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

from trajectories.artifacts import AnchorError, AnchorUnchecked
from trajectories.models import Run
from trajectories.selectors import PairAnchors


def numbered(labels: Iterable) -> Iterator[tuple[int, object]]:
    """(instance, label): a Label row's own instance; for LabelInputs, the k-th input of a code is
    its instance k."""
    seen: Counter[int] = Counter()
    for label in labels:
        seen[label.code_id] += 1
        yield getattr(label, "instance", seen[label.code_id]), label


ANCHOR_MAX = 1_000  # characters of one anchor: a path and its lines


def field_key(name: str, code_id: int, instance: int = 1) -> str:
    """The form field (and error key) for a field of one instance: `rationale-7` for the first
    instance of code 7, `rationale-7-2` for its second (the adjudication form has only the first)."""
    return f"{name}-{code_id}" if instance == 1 else f"{name}-{code_id}-{instance}"


def clean_anchors(anchors: list[str]) -> list[str]:
    """Stripped, without blanks or repeats, in the order given."""
    seen, out = set(), []
    for anchor in anchors:
        anchor = anchor.strip()
        if anchor and anchor not in seen:
            seen.add(anchor)
            out.append(anchor)
    return out


def anchor_problems(*, run: Run, labels, unchecked: bool = True) -> dict[str, list[str]]:
    """The anchors of `labels` (Label rows, LabelInputs or Rulings on `run`) that do not resolve
    to a file and line stored with the pair, by form field (`evidence-<code id>[-<instance>]`).
    Evidence without a side cites the coded run, contrast its twin."""
    problems: dict[str, list[str]] = {}
    pair = PairAnchors(run)  # the pair's files read once for all the anchors
    for instance, label in numbered(labels):
        for name, default_mode in (("evidence", run.mode), ("contrast", run.twin_mode)):
            for text in getattr(label, name):
                try:
                    pair.resolve(text, default_mode=default_mode)
                except AnchorUnchecked as exc:
                    if unchecked:
                        problems.setdefault(field_key(name, label.code_id, instance), []).append(str(exc))
                except AnchorError as exc:
                    problems.setdefault(field_key(name, label.code_id, instance), []).append(str(exc))
    return problems
