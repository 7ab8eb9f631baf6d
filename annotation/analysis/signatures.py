"""Failure signatures measured against gold: the detectors' hits on a study's runs against the runs'
final labels, per detector × mode, per detector and per mode (docs/signatures.md, *Measured against
gold labels*, has the definitions). Pure: plain data in and out, no ORM.

A run counts when it has a final coding (its gold: the set of mode keys of its final labels, empty for
"no failure") and its signatures were computed by the current detectors; runs with a final coding whose
signatures were not computed are left out and counted. Precision or recall is None when its denominator
is 0 (nothing predicted, nothing in gold), never a made-up 0."""

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
    # the same over the runs whose gold was reached with no hint seen (compute.signatures)
    *(f"{name}_hint_free" for name in ("tp", "fp", "fn", "tn", "precision", "recall")),
)


@dataclass(frozen=True, slots=True)
class RunSignatures:
    """One run of the study with a final coding: the mode keys of its final labels, its stored hits
    as (detector, modes the hit supports), whether its signatures were computed, and whether its final
    labels were reached with no hint seen."""

    run_id: int
    gold: frozenset[str]
    hits: tuple[tuple[str, tuple[str, ...]], ...] = ()
    checked: bool = True
    hint_free: bool = True  # its gold was reached with no hint seen (inputs.hint_free_runs)


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


def _row(table: str, detector: str, mode: str, name: str, in_codebook: bool, counts: Counts) -> dict:
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
            counts = confusion(
                (mode in f.get(detector, ()), mode in r.gold) for r, f in zip(evaluated, fired, strict=True)
            )
            detector_mode_rows.append(_row(TABLES[0], detector, mode, *known(mode), counts))
        supported = frozenset(modes)
        counts = confusion(
            (detector in f, not r.gold.isdisjoint(supported)) for r, f in zip(evaluated, fired, strict=True)
        )
        in_codebook = names is None or any(m in names for m in modes)
        detector_rows.append(_row(TABLES[1], detector, "", "", in_codebook, counts))
    listed_by_any = [set().union(*f.values()) for f in fired]
    for mode in all_modes:
        counts = confusion((mode in listed, mode in r.gold) for r, listed in zip(evaluated, listed_by_any, strict=True))
        mode_rows.append(_row(TABLES[2], "", mode, *known(mode), counts))

    gold_pairs = sum(len(r.gold) for r in evaluated)
    covered = sum(len(r.gold & frozenset(all_modes)) for r in evaluated)
    return {
        "runs": {
            "with_final": len(runs),
            "evaluated": len(evaluated),
            "unchecked": len(runs) - len(evaluated),
        },
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
