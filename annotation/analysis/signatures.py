"""Failure signatures measured against gold: the detectors' hits on a study's runs against the runs'
gold, per detector × mode, per detector and per mode (docs/signatures.md, *Measured against gold
labels*, has the definitions). Pure: plain data in and out, no ORM.

A run counts when it has gold — a final coding, or the study's published review of it — and its
signatures were computed by the current detectors; runs with gold whose signatures were not computed
are left out and counted. A run's gold is the set of mode keys it has; where the study's published
review (`review.json`) decides a mode, its decision is the gold for that mode: retained is a positive,
rejected an *explicit* negative (counted apart: `rejected`, and `fp_rejected` for a hit the study ruled
out). Precision or recall is None when its denominator is 0 (nothing predicted, nothing in gold), never a
made-up 0."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

TABLES = ("detector × mode", "detector", "mode")
COLUMNS = (
    "table",
    "detector",
    "mode",
    "name",
    "in_codebook",
    "runs",
    "gold_positive",
    "predicted_positive",
    "tp",
    "fp",
    "fn",
    "tn",
    "precision",
    "recall",
    "rejected",  # runs whose published review explicitly rejects the mode (all of the detector's modes)
    "fp_rejected",  # false positives on those runs: hits the study ruled out
    # the same over the runs whose gold was reached with no hint seen (compute.signatures)
    *(f"{name}_hint_free" for name in ("tp", "fp", "fn", "tn", "precision", "recall")),
)


@dataclass(frozen=True, slots=True)
class RunSignatures:
    """One run of the study with gold: the mode keys it has (`gold`) and, when the study's published
    review decides its modes, those it explicitly rejects (`rejected`); its stored hits as (detector,
    modes the hit supports), whether its signatures were computed, and whether its gold was reached
    with no hint seen."""

    run_id: int
    gold: frozenset[str]
    hits: tuple[tuple[str, tuple[str, ...]], ...] = ()
    checked: bool = True
    hint_free: bool = True  # its gold was reached with no hint seen (inputs.hint_free_runs)
    rejected: frozenset[str] = frozenset()  # modes its published review rejects: explicit negatives
    reviewed: bool = False  # its gold comes (for the modes the review decides) from a published review


@dataclass(frozen=True, slots=True)
class Counts:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None


def confusion(pairs: Iterable[tuple[bool, bool]]) -> Counts:
    """TP/FP/FN/TN of (predicted, gold) pairs, one per run."""
    tp = fp = fn = tn = 0
    for predicted, gold in pairs:
        if predicted and gold:
            tp += 1
        elif predicted:
            fp += 1
        elif gold:
            fn += 1
        else:
            tn += 1
    return Counts(tp, fp, fn, tn)


def _explicit(triples: Iterable[tuple[bool, bool, bool]]) -> dict[str, int]:
    """Of (predicted, gold, explicitly rejected) per run: the runs whose negative is explicit, and the
    false positives among them."""
    rejected = fp_rejected = 0
    for predicted, gold, refused in triples:
        if refused and not gold:
            rejected += 1
            fp_rejected += predicted
    return {"rejected": rejected, "fp_rejected": fp_rejected}


def _row(
    table: str, detector: str, mode: str, name: str, in_codebook: bool, counts: Counts, explicit: dict[str, int]
) -> dict:
    # A mode the study's codebook does not have cannot be in its gold: its precision and recall
    # would measure the codebook, not the detector.
    return {
        "table": table,
        "detector": detector,
        "mode": mode,
        "name": name,
        "in_codebook": in_codebook,
        "runs": counts.tp + counts.fp + counts.fn + counts.tn,
        "gold_positive": counts.tp + counts.fn,
        "predicted_positive": counts.tp + counts.fp,
        "tp": counts.tp,
        "fp": counts.fp,
        "fn": counts.fn,
        "tn": counts.tn,
        "precision": counts.precision if in_codebook else None,
        "recall": counts.recall if in_codebook else None,
        **explicit,
    }


def evaluate_signatures(
    runs: Iterable[RunSignatures],
    *,
    detector_modes: Mapping[str, Sequence[str]],
    codebook_modes: Mapping[str, str] | None = None,
) -> dict:
    """The three tables and the run counts.

    `detector_modes`: every detector and the modes its hits can support (trajectories.signatures.
    DETECTOR_MODES), in the order the tables list them. `codebook_modes`: the study codebook's mode
    keys and names (None: every mode counts as in the codebook, named by its key). Hits of a detector
    not in `detector_modes`, and modes a detector does not support, are ignored.

    * detector × mode: predicted = a hit of the detector lists the mode; gold = the mode is in gold.
    * detector: predicted = any hit of the detector; gold = any of the detector's modes is in gold.
    * mode: predicted = any hit (of any detector) lists the mode; gold = the mode is in gold.

    Each row also counts its explicit negatives (`rejected`: runs whose published review rejects the
    mode; for a detector, every one of its modes) and the false positives among them (`fp_rejected`).
    """
    runs = list(runs)
    names = dict(codebook_modes) if codebook_modes is not None else None
    evaluated = [r for r in runs if r.checked]
    # per run: detector -> the modes its hits list (a detector that fired with no listed mode: empty set)
    fired: list[dict[str, set[str]]] = []
    for run in evaluated:
        by_detector: dict[str, set[str]] = {}
        for detector, modes in run.hits:
            if detector in detector_modes:
                supported = set(detector_modes[detector])
                by_detector.setdefault(detector, set()).update(m for m in modes if m in supported)
        fired.append(by_detector)

    all_modes = list(dict.fromkeys(m for modes in detector_modes.values() for m in modes))

    def known(mode: str) -> tuple[str, bool]:
        if names is None:
            return mode, True
        return names.get(mode, mode), mode in names

    detector_mode_rows, detector_rows, mode_rows = [], [], []
    for detector, modes in detector_modes.items():
        for mode in modes:
            triples = [
                (mode in f.get(detector, ()), mode in r.gold, mode in r.rejected)
                for r, f in zip(evaluated, fired, strict=True)
            ]
            counts = confusion((p, g) for p, g, _ in triples)
            detector_mode_rows.append(_row(TABLES[0], detector, mode, *known(mode), counts, _explicit(triples)))
        supported = frozenset(modes)
        triples = [
            (detector in f, not r.gold.isdisjoint(supported), supported <= r.rejected)
            for r, f in zip(evaluated, fired, strict=True)
        ]
        counts = confusion((p, g) for p, g, _ in triples)
        in_codebook = names is None or any(m in names for m in modes)
        detector_rows.append(_row(TABLES[1], detector, "", "", in_codebook, counts, _explicit(triples)))
    listed_by_any = [set().union(*f.values()) for f in fired]
    for mode in all_modes:
        triples = [
            (mode in listed, mode in r.gold, mode in r.rejected)
            for r, listed in zip(evaluated, listed_by_any, strict=True)
        ]
        counts = confusion((p, g) for p, g, _ in triples)
        mode_rows.append(_row(TABLES[2], "", mode, *known(mode), counts, _explicit(triples)))

    gold_pairs = sum(len(r.gold) for r in evaluated)
    covered = sum(len(r.gold & frozenset(all_modes)) for r in evaluated)
    return {
        "runs": {
            "with_final": len(runs),
            "evaluated": len(evaluated),
            "unchecked": len(runs) - len(evaluated),
        },
        # evaluated runs whose gold comes (for the modes it decides) from the study's published review
        "reviewed_runs": sum(1 for r in evaluated if r.reviewed),
        # (run, mode) pairs in gold, and how many are of a mode some detector supports
        "gold_pairs": gold_pairs,
        "gold_pairs_covered": covered,
        "detector_modes": detector_mode_rows,
        "detectors": detector_rows,
        "modes": mode_rows,
    }


def evaluation_rows(evaluation: dict) -> list[dict]:
    """The three tables as one list of rows with COLUMNS (the CSV export and the command); a row's
    figures over the hint-free runs (when computed) as the `…_hint_free` columns."""
    rows = [*evaluation["detector_modes"], *evaluation["detectors"], *evaluation["modes"]]
    return [{**row, **{f"{k}_hint_free": v for k, v in (row.get("hint_free") or {}).items()}} for row in rows]
