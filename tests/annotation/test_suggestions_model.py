"""The suggestions classifier on plain data (annotation/classifier.py): grouped cross-validation
that never splits a task, determinism from the seed, modes skipped with their reason, calibration
bins as scikit-learn computes them, bad input named."""

from __future__ import annotations

import random

import numpy as np
import pytest
from sklearn.calibration import calibration_curve

from annotation.classifier import (
    TEXT_CHARS_PER_RUN,
    Params,
    RunInput,
    SuggestionError,
    calibration_bins,
    run_text,
    train,
    uncertainty,
)

MODES = ["same-file-collision", "lossy-handoff", "never-seen"]
DETECTORS = ["same_file_collision", "parent_idle_wait"]


def corpus(tasks: int = 30, agents: int = 3, seed: int = 7) -> tuple[list[RunInput], dict[int, set[str]]]:
    """Runs of `tasks` tasks by `agents` agents; a collision hit makes same-file-collision likely;
    the last task's runs are left unlabelled."""
    rng = random.Random(seed)
    runs, gold = [], {}
    for task in range(tasks):
        for agent in range(agents):
            run_id = task * agents + agent + 1
            collides = rng.random() < 0.4
            hits = [("same_file_collision", ["same-file-collision", "source-overwrite"])] if collides else []
            text = "tool_call Edit src/shared.py\nspawn Task worker" if collides else "message done\ntool_call Bash ls"
            runs.append(
                RunInput(
                    run_id=run_id,
                    group=f"task-{task}",
                    metrics={
                        "subagents_created": rng.randint(0, 8),
                        "overlap_ratio": rng.random(),
                        "first_spawn_pos": None if rng.random() < 0.2 else rng.random(),
                    },  # fmt: skip
                    hits=hits,
                    text=text,
                )
            )
            if task < tasks - 1:
                modes = set()
                if collides and rng.random() < 0.9:
                    modes.add("same-file-collision")
                if rng.random() < 0.25:
                    modes.add("lossy-handoff")
                gold[run_id] = modes
    return runs, gold


def _train(params: Params, **kwargs):
    runs, gold = corpus(**kwargs)
    return runs, gold, train(runs, gold, modes=MODES, detectors=DETECTORS, params=params)


def test_cross_validation_never_puts_a_tasks_runs_on_both_sides():
    runs, gold, result = _train(Params(seed=3, folds=5))
    group_of = {run.run_id: run.group for run in runs}
    assert len(result.folds) == 5
    tested = [run_id for fold in result.folds for run_id in fold]
    assert sorted(tested) == sorted(gold)  # every labelled run is tested exactly once
    fold_of_group: dict[str, int] = {}
    for index, fold in enumerate(result.folds):
        for run_id in fold:
            assert fold_of_group.setdefault(group_of[run_id], index) == index, f"{group_of[run_id]} split"
    # and a group's runs are all in the one fold that holds it (none left on the training side)
    for group, index in fold_of_group.items():
        members = {r.run_id for r in runs if r.group == group and r.run_id in gold}
        assert members <= set(result.folds[index])


def test_same_inputs_and_seed_give_the_same_model_and_another_seed_other_folds():
    _, _, first = _train(Params(seed=11))
    _, _, again = _train(Params(seed=11))
    assert first == again  # scores, calibration, folds and every prediction
    _, _, other = _train(Params(seed=12))
    assert other.folds != first.folds


def test_scores_are_reported_per_trained_mode_and_rare_modes_skipped_with_their_counts():
    runs, gold, result = _train(Params(seed=0))
    assert result.modes == ["same-file-collision", "lossy-handoff"]
    assert result.skipped == [{"key": "never-seen", "positives": 0, "reason": "fewer than 5 runs with this mode"}]
    assert result.label_counts["same-file-collision"] == sum("same-file-collision" in m for m in gold.values())
    for row in result.scores:
        assert 0 <= row["f1"] <= 1 and 0 <= row["precision"] <= 1 and 0 <= row["recall"] <= 1
        assert row["support"] == result.label_counts[row["key"]]
    assert result.training_run_ids == [run.run_id for run in runs if run.run_id in gold]
    # every run is predicted, the unlabelled ones too, for each trained mode
    assert set(result.predictions) == {run.run_id for run in runs}
    assert all(set(p) == set(result.modes) for p in result.predictions.values())


def test_a_signal_in_the_features_is_learned():
    """Not a fixed score: only that a mode the hits announce is found better than chance."""
    _, _, result = _train(Params(seed=1))
    collision = next(row for row in result.scores if row["key"] == "same-file-collision")
    assert collision["recall"] > 0.5 and collision["precision"] > 0.5


def test_progress_is_reported_after_each_fold_and_the_final_fit():
    runs, gold = corpus()
    seen = []
    train(
        runs, gold, modes=MODES, detectors=DETECTORS, params=Params(folds=4), progress=lambda d, t: seen.append((d, t))
    )
    assert seen == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]


def test_calibration_bins_are_sklearns_with_their_counts():
    rng = np.random.default_rng(0)
    p = rng.random(400)
    y = (rng.random(400) < p).astype(int)
    bins = calibration_bins(y, p, n_bins=10)
    observed, predicted = calibration_curve(y, p, n_bins=10)
    assert [b["observed"] for b in bins] == pytest.approx(list(observed))
    assert [b["predicted"] for b in bins] == pytest.approx(list(predicted))
    assert sum(b["count"] for b in bins) == 400
    assert all(b["low"] <= b["predicted"] <= b["high"] for b in bins)
    assert calibration_bins(np.zeros(5, dtype=int), np.full(5, 0.2), n_bins=10) == []  # no positive: no bins


def test_no_final_labels_is_refused_by_name():
    runs, _ = corpus()
    with pytest.raises(SuggestionError, match="no final labels") as caught:
        train(runs, {}, modes=MODES, detectors=DETECTORS, params=Params())
    assert caught.value.field == "labels"


def test_too_few_tasks_for_the_folds_is_refused_by_name():
    runs, gold = corpus(tasks=4)
    with pytest.raises(SuggestionError, match="at least 5 tasks") as caught:
        train(runs, gold, modes=MODES, detectors=DETECTORS, params=Params(folds=5))
    assert caught.value.field == "folds"


def test_no_mode_with_enough_positives_is_refused_by_name():
    runs, gold = corpus()
    with pytest.raises(SuggestionError, match="nothing to learn") as caught:
        train(runs, gold, modes=MODES, detectors=DETECTORS, params=Params(min_positives=1000))
    assert caught.value.field == "min_positives"


@pytest.mark.parametrize(
    ("name", "value"), [("folds", 1), ("threshold", 1.0), ("C", 0.0), ("min_positives", 1), ("calibration_bins", 1)]
)
def test_parameters_out_of_range_are_named(name, value):
    with pytest.raises(SuggestionError) as caught:
        Params(**{name: value}).validate()
    assert caught.value.field == name


def test_a_runs_text_is_bounded_and_keeps_tool_calls_and_messages():
    pieces = [("tool_result", "Bash", "x" * 500), ("tool_call", "Bash", "pytest -q " + "y" * 500)] * 200
    text = run_text(pieces)
    assert len(text) <= TEXT_CHARS_PER_RUN
    assert "tool_result" not in text and text.startswith("tool_call Bash pytest -q")
    assert max(len(line) for line in text.splitlines()) <= len("tool_call Bash ") + 200


def test_uncertainty_is_highest_at_a_coin_toss():
    assert uncertainty({"a": 0.5}) == 1
    assert uncertainty({"a": 0.0, "b": 1.0}) == 0
    assert uncertainty({"a": 0.9, "b": 0.3}) == pytest.approx(0.6)
    assert uncertainty({}) == 0


def test_with_one_trained_mode_the_scores_are_the_modes_own_not_the_absent_class():
    """One mode trained (the other too rare): its scores are the positive class's — support is its gold
    positives, and precision, recall and F1 follow from its TP, FP and FN; micro F1 is that F1, not accuracy."""
    runs, gold = corpus()
    many = sum("same-file-collision" in m for m in gold.values())
    result = train(runs, gold, modes=MODES, detectors=DETECTORS, params=Params(seed=0, min_positives=many))
    assert result.modes == ["same-file-collision"]
    [row] = result.scores
    assert row["support"] == many == row["tp"] + row["fn"]
    assert row["predicted"] == row["tp"] + row["fp"]
    assert row["precision"] == pytest.approx(row["tp"] / (row["tp"] + row["fp"]))
    assert row["recall"] == pytest.approx(row["tp"] / many)
    assert row["f1"] == pytest.approx(2 * row["tp"] / (2 * row["tp"] + row["fp"] + row["fn"]))
    assert result.summary["micro_f1"] == pytest.approx(row["f1"]) == pytest.approx(result.summary["macro_f1"])


def test_the_positive_class_scores_are_scikit_learns_binary_ones():
    from sklearn.metrics import precision_recall_fscore_support

    from annotation.classifier import positive_class_scores

    rng = np.random.default_rng(4)
    truth, predicted = rng.integers(0, 2, 200), rng.integers(0, 2, 200)
    p, r, f, _ = precision_recall_fscore_support(truth, predicted, average="binary", pos_label=1)
    got = positive_class_scores(truth, predicted)
    assert (got["precision"], got["recall"], got["f1"]) == pytest.approx((p, r, f))
    assert got["support"] == int(truth.sum())


def test_scores_are_also_given_over_the_runs_whose_gold_saw_no_hint():
    """Incorporation bias: the same out-of-fold predictions scored over the hint-free runs only, beside
    the scores over every labelled run; the hint-free set changes no prediction."""
    from annotation.classifier import positive_class_scores

    runs, gold = corpus()
    free = {run_id for run_id in gold if run_id % 3}  # two runs in three
    plain = train(runs, gold, modes=MODES, detectors=DETECTORS, params=Params(seed=0, min_positives=3))
    result = train(runs, gold, modes=MODES, detectors=DETECTORS, params=Params(seed=0, min_positives=3), hint_free=free)
    assert result.predictions == plain.predictions and "hint_free" not in plain.summary
    assert result.summary["hint_free"]["runs"] == len(free)
    # Each mode's hint-free scores count the hint-free runs only, a part of the scores over every run.
    labelled = result.training_run_ids
    for row in result.scores:
        whole = row["tp"], row["fp"], row["fn"]
        part = row["hint_free"]
        assert part["support"] == sum(1 for run_id in labelled if run_id in free and row["key"] in gold[run_id])
        assert part["tp"] + part["fn"] == part["support"] and part["tp"] <= whole[0] and part["fp"] <= whole[1]
    macro = np.mean([row["hint_free"]["f1"] for row in result.scores])
    assert result.summary["hint_free"]["macro_f1"] == pytest.approx(macro)
    pooled = {name: sum(row["hint_free"][name] for row in result.scores) for name in ("tp", "fp", "fn")}
    expected = positive_class_scores([1] * pooled["tp"] + [0] * pooled["fp"] + [1] * pooled["fn"],
                                     [1] * pooled["tp"] + [1] * pooled["fp"] + [0] * pooled["fn"])  # fmt: skip
    assert result.summary["hint_free"]["micro_f1"] == pytest.approx(expected["f1"])
