"""Suggestions learned from gold (pure, no ORM): a multi-label classifier of failure modes per run,
trained on a study's final labels and evaluated by cross-validation grouped by task
(docs/suggestions.md).

Features per run: its process metrics (docs/metrics.md), its failure-signature hits counted per
detector and per mode they support (docs/signatures.md), and TF-IDF of a bounded text of the run
(tool names, commands, messages). The model: one-vs-rest, one logistic regression per mode
(liblinear, balanced class weights, seeded), a mode trained only when its positives are enough.
Evaluation: out-of-fold probabilities from GroupKFold by task — a task's runs are never on both
sides of a fold — scored per mode (precision, recall, F1 at the threshold) and pooled into
calibration bins (`sklearn.calibration.calibration_curve`). Same inputs and seed, same result."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy and scikit-learn load when a model is trained, not with every page (tests/test_settings.py)
    import numpy as np
    from sklearn.compose import ColumnTransformer

# The run's process metrics and size, as stored on trajectories.Run. Counts are taken as log(1 + x)
# (their tails are long); positions (0–1) are kept, an empty position (no sub-agent) is −1.
COUNT_METRICS = ("subagents_created", "peak_concurrency", "n_events", "n_contexts", "duration_s", "shell_calls")
POSITION_METRICS = ("first_spawn_pos", "first_overlap_pos", "last_subagent_end_pos")
RATIO_METRICS = ("overlap_ratio", "created_without_overlap")
METRICS = (*COUNT_METRICS, *POSITION_METRICS, *RATIO_METRICS)

TEXT_EVENT_KINDS = ("tool_call", "message", "spawn", "wait", "error")  # what the run's text is made of
TEXT_CHARS_PER_EVENT = 200
TEXT_CHARS_PER_RUN = 20_000


class SuggestionError(ValueError):
    """Training cannot start from these inputs; `field` names what is wrong."""

    def __init__(self, message: str, *, field: str = "labels") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Params:
    seed: int = 0
    folds: int = 5
    min_positives: int = 5  # a mode with fewer runs labelled with it is reported and skipped
    threshold: float = 0.5  # a probability at or above it counts as "suggested"
    C: float = 1.0
    max_features: int = 2000  # TF-IDF vocabulary, the most frequent terms of the training runs
    calibration_bins: int = 10

    def validate(self) -> None:
        checks = {
            "folds": self.folds >= 2,
            "min_positives": self.min_positives >= 2,
            "threshold": 0 < self.threshold < 1,
            "C": self.C > 0 and math.isfinite(self.C),
            "max_features": self.max_features >= 1,
            "calibration_bins": 2 <= self.calibration_bins <= 50,
        }
        for name, ok in checks.items():
            if not ok:
                raise SuggestionError(f"{name}: {getattr(self, name)!r} is out of range", field=name)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class RunInput:
    """What the model sees of one run."""

    run_id: int
    group: str  # its task: cross-validation never splits a group
    metrics: Mapping[str, float | bool | None]
    hits: Sequence[tuple[str, Sequence[str]]] = ()  # (detector, modes it supports) per hit
    text: str = ""


@dataclass
class Result:
    params: dict
    features: dict
    training_run_ids: list[int]
    label_counts: dict[str, int]  # positives per mode among the training runs, every mode
    modes: list[str]  # the modes trained
    skipped: list[dict]  # [{key, positives, reason}] — modes not trained, and why
    folds: list[list[int]]  # the test side of each fold, as run ids
    scores: list[dict]  # per trained mode: key, precision, recall, f1, support, predicted
    summary: dict  # micro and macro F1 over the trained modes
    calibration: list[dict]  # [{low, high, predicted, observed, count}] for the non-empty bins
    predictions: dict[int, dict[str, float]] = field(default_factory=dict)  # run id → mode → p


def run_text(pieces: Sequence[tuple[str, str, str]]) -> str:
    """A run's text for TF-IDF from its events' (kind, tool, text) in order: the tool's name and
    the event's first TEXT_CHARS_PER_EVENT characters, up to TEXT_CHARS_PER_RUN in all."""
    out, size = [], 0
    for kind, tool, text in pieces:
        if kind not in TEXT_EVENT_KINDS:
            continue
        piece = f"{kind} {tool} {text[:TEXT_CHARS_PER_EVENT]}".strip()
        if size + len(piece) > TEXT_CHARS_PER_RUN:
            break
        out.append(piece)
        size += len(piece) + 1
    return "\n".join(out)


def describe_features(*, detectors: Sequence[str], modes: Sequence[str], params: Params) -> dict:
    """The feature columns, as stored with a model."""
    return {
        "metrics": list(METRICS),
        "metric_transform": "log(1 + x) for counts; an empty position is -1; then standardised",
        "detectors": [f"hits:{d}" for d in detectors],
        "supported_modes": [f"supports:{m}" for m in modes],
        "text": {
            "vectorizer": "TF-IDF: sublinear tf, words and tool names, the max_features most frequent in training",
            "event_kinds": list(TEXT_EVENT_KINDS),
            "chars_per_event": TEXT_CHARS_PER_EVENT,
            "chars_per_run": TEXT_CHARS_PER_RUN,
            "max_features": params.max_features,
        },
    }


def _numbers(run: RunInput, detectors: Sequence[str], modes: Sequence[str]) -> list[float]:
    values = []
    for name in METRICS:
        raw = run.metrics.get(name)
        if name in COUNT_METRICS:
            values.append(math.log1p(max(float(raw or 0), 0.0)))
        elif raw is None:
            values.append(-1.0)
        else:
            values.append(float(raw))
    by_detector = dict.fromkeys(detectors, 0)
    by_mode = dict.fromkeys(modes, 0)
    for detector, supported in run.hits:
        if detector in by_detector:
            by_detector[detector] += 1
        for mode in supported:
            if mode in by_mode:
                by_mode[mode] += 1
    return [*values, *by_detector.values(), *by_mode.values()]


def _matrix(runs: Sequence[RunInput], detectors: Sequence[str], modes: Sequence[str]) -> np.ndarray:
    """One row per run: its text in column 0, then its numbers (an object array for the ColumnTransformer)."""
    import numpy as np

    width = 1 + len(METRICS) + len(detectors) + len(modes)
    X = np.empty((len(runs), width), dtype=object)
    for i, run in enumerate(runs):
        X[i, 0] = run.text
        X[i, 1:] = _numbers(run, detectors, modes)
    return X


def _features(width: int, params: Params) -> ColumnTransformer:
    from sklearn.compose import ColumnTransformer
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import StandardScaler

    return ColumnTransformer(
        [
            (
                "text",
                TfidfVectorizer(
                    max_features=params.max_features, sublinear_tf=True, token_pattern=r"(?u)\b[A-Za-z_][\w.-]+\b"
                ),
                0,
            ),  # fmt: skip
            ("numbers", StandardScaler(), list(range(1, width))),
        ]
    )


def _fit_predict(X_train, Y_train, X_test, params: Params) -> np.ndarray:
    """One-vs-rest: the features fitted on the training side only, then one logistic regression per
    mode; a mode constant on the training side (a fold without any of its positives) is predicted
    as that constant."""
    import numpy as np
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    features = _features(X_train.shape[1], params)
    train_matrix = features.fit_transform(X_train)
    test_matrix = features.transform(X_test)
    out = np.zeros((X_test.shape[0], Y_train.shape[1]), dtype=float)
    for j in range(Y_train.shape[1]):
        y = Y_train[:, j]
        if y.min() == y.max():
            out[:, j] = float(y[0])
            continue
        model = LogisticRegression(solver="liblinear", class_weight="balanced", C=params.C, random_state=params.seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(train_matrix, y)
        out[:, j] = model.predict_proba(test_matrix)[:, 1]
    return out


def group_folds(groups: Sequence[str], *, n_splits: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) index arrays: GroupKFold shuffled by the seed, so a group is on one side only."""
    import numpy as np
    from sklearn.model_selection import GroupKFold

    splitter = GroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    return list(splitter.split(np.zeros(len(groups)), groups=list(groups)))


def calibration_bins(y_true: np.ndarray, y_prob: np.ndarray, *, n_bins: int) -> list[dict]:
    """Predicted against observed per probability bin (uniform bins; calibration_curve's own
    binning), with how many (run, mode) cells each holds; empty bins are left out."""
    import numpy as np
    from sklearn.calibration import calibration_curve

    if y_true.size == 0 or len(np.unique(y_true)) < 2:
        return []
    observed, predicted = calibration_curve(y_true, y_prob, n_bins=n_bins, strategy="uniform")
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    counts = np.bincount(np.searchsorted(edges[1:-1], y_prob), minlength=n_bins)
    rows = [
        {"low": round(float(edges[i]), 6), "high": round(float(edges[i + 1]), 6), "count": int(n)}
        for i, n in enumerate(counts)
        if n
    ]
    for row, p, o in zip(rows, predicted, observed, strict=True):
        row["predicted"], row["observed"] = float(p), float(o)
    return rows


def uncertainty(probabilities: Mapping[str, float]) -> float:
    """How unsure the model is about a run: the largest 1 − |2p − 1| over its modes (1 at p = 0.5,
    0 when every mode is certain either way)."""
    return max((1 - abs(2 * p - 1) for p in probabilities.values()), default=0.0)


def positive_class_scores(truth, predicted) -> dict:
    """Precision, recall and F1 of the *positive* class (the mode is there) for one mode's gold and
    predictions (0/1 arrays), with the counts they come from: `support` is the gold positives. Written out,
    not asked of scikit-learn's multi-output average=None — which, for a single trained mode, reads the
    (n, 1) arrays as binary and gives the scores of both classes, the absent class first."""
    import numpy as np

    truth, predicted = np.asarray(truth, dtype=bool), np.asarray(predicted, dtype=bool)
    tp, fp, fn = int((truth & predicted).sum()), int((~truth & predicted).sum()), int((truth & ~predicted).sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "support": tp + fn, "predicted": tp + fp,
            "tp": tp, "fp": fp, "fn": fn}  # fmt: skip


def train(
    runs: Sequence[RunInput],
    gold: Mapping[int, set[str]],
    *,
    modes: Sequence[str],
    detectors: Sequence[str],
    params: Params,
    progress: Callable[[int, int], None] | None = None,
    hint_free: Collection[int] | None = None,
) -> Result:
    """Cross-validate, then fit on every labelled run and predict every run of `runs`.

    `gold` holds the final modes of the labelled runs (an empty set: no failure, a negative for
    every mode); runs not in it are only predicted. `progress(done, total)` is called after each
    fold and after the final fit. `hint_free`: the labelled runs whose gold was reached with no hint
    seen — the scores are given over them too (each mode's `hint_free`, the summary's), beside the
    scores over every labelled run: the hints are detector hits, which are features here."""
    import numpy as np

    params.validate()
    labelled = [run for run in runs if run.run_id in gold]
    if not labelled:
        raise SuggestionError("the study has no final labels yet: adjudicate or agree on some runs first")
    Y_all = np.array([[key in gold[run.run_id] for key in modes] for run in labelled], dtype=int).reshape(
        len(labelled), len(modes)
    )
    counts = {key: int(Y_all[:, j].sum()) for j, key in enumerate(modes)}
    groups = [run.group for run in labelled]
    n_groups = len(set(groups))
    if n_groups < params.folds:
        raise SuggestionError(
            f"{len(labelled)} runs with final labels from {n_groups} task(s): grouped cross-validation in "
            f"{params.folds} folds needs runs of at least {params.folds} tasks",
            field="folds",
        )
    trained, skipped = [], []
    for j, key in enumerate(modes):
        positives = counts[key]
        if positives < params.min_positives:
            skipped.append({"key": key, "positives": positives,
                            "reason": f"fewer than {params.min_positives} runs with this mode"})  # fmt: skip
        elif positives == len(labelled):
            skipped.append({"key": key, "positives": positives, "reason": "every labelled run has this mode"})
        else:
            trained.append(j)
    if not trained:
        raise SuggestionError(
            f"no mode has {params.min_positives} or more runs with it among the {len(labelled)} runs with final "
            "labels: nothing to learn yet",
            field="min_positives",
        )
    trained_keys = [modes[j] for j in trained]
    Y = Y_all[:, trained]
    X = _matrix(labelled, detectors, modes)
    splits = group_folds(groups, n_splits=params.folds, seed=params.seed)
    total = len(splits) + 1
    oof = np.zeros(Y.shape, dtype=float)
    for done, (train_idx, test_idx) in enumerate(splits, start=1):
        oof[test_idx] = _fit_predict(X[train_idx], Y[train_idx], X[test_idx], params)
        if progress:
            progress(done, total)
    predicted = (oof >= params.threshold).astype(int)
    scores = [{"key": key, **positive_class_scores(Y[:, i], predicted[:, i])} for i, key in enumerate(trained_keys)]
    pooled = positive_class_scores(Y.ravel(), predicted.ravel())  # every (run, mode) decision: micro-averaged
    summary = {"micro_f1": pooled["f1"], "macro_f1": float(np.mean([s["f1"] for s in scores])),
               "runs": len(labelled), "tasks": n_groups}  # fmt: skip
    if hint_free is not None:
        free = np.array([run.run_id in hint_free for run in labelled], dtype=bool)
        for i, row in enumerate(scores):
            row["hint_free"] = positive_class_scores(Y[free, i], predicted[free, i])
        pooled_free = positive_class_scores(Y[free].ravel(), predicted[free].ravel())
        summary["hint_free"] = {"runs": int(free.sum()), "micro_f1": pooled_free["f1"],
                                "macro_f1": float(np.mean([s["hint_free"]["f1"] for s in scores]))}  # fmt: skip
    everything = _matrix(runs, detectors, modes)
    probabilities = _fit_predict(X, Y, everything, params)
    if progress:
        progress(total, total)
    predictions = {
        run.run_id: {key: round(float(p), 6) for key, p in zip(trained_keys, row, strict=True)}
        for run, row in zip(runs, probabilities, strict=True)
    }
    return Result(
        params=params.as_dict(),
        features=describe_features(detectors=detectors, modes=modes, params=params),
        training_run_ids=[run.run_id for run in labelled],
        label_counts=counts,
        modes=trained_keys,
        skipped=skipped,
        folds=[[labelled[i].run_id for i in test_idx] for _, test_idx in splits],
        scores=scores,
        summary=summary,
        calibration=calibration_bins(Y.ravel(), oof.ravel(), n_bins=params.calibration_bins),
        predictions=predictions,
    )
