"""Process metrics against timelines computed by hand (docs/metrics.md)."""

from __future__ import annotations

import pytest

from trajectories.metrics import process_metrics


def test_no_subagents():
    m = process_metrics([], main=[(0, 100)])
    assert (m.subagents_created, m.peak_concurrency, m.overlap_ratio) == (0, 0, 0.0)
    assert m.first_spawn_pos is None and m.first_overlap_pos is None and m.last_subagent_end_pos is None
    assert m.created_without_overlap is False


def test_one_subagent_never_overlaps():
    # main [0,100), one sub [20,60): positions 0.2 and 0.6
    m = process_metrics([(20, 60)], main=[(0, 100)])
    assert m.subagents_created == 1
    assert m.peak_concurrency == 1
    assert m.first_spawn_pos == pytest.approx(0.2)
    assert m.last_subagent_end_pos == pytest.approx(0.6)
    assert m.first_overlap_pos is None
    assert m.overlap_ratio == 0.0
    assert m.created_without_overlap is True


def test_touching_intervals_do_not_overlap():
    # [10,30) then [30,50): half-open, so never two at once
    m = process_metrics([(10, 30), (30, 50)], main=[(0, 100)])
    assert m.peak_concurrency == 1
    assert m.first_overlap_pos is None
    assert m.overlap_ratio == 0.0
    assert m.created_without_overlap is True


def test_nested_intervals():
    # outer [10,90), inner [30,50), a third [40,45) nested in both: peak 3
    # ≥2 active over [30,50) = 20 s of a 100 s run -> 0.2; first overlap at 30 -> 0.3
    m = process_metrics([(10, 90), (30, 50), (40, 45)], main=[(0, 100)])
    assert m.peak_concurrency == 3
    assert m.first_overlap_pos == pytest.approx(0.3)
    assert m.overlap_ratio == pytest.approx(0.2)
    assert m.first_spawn_pos == pytest.approx(0.1)
    assert m.last_subagent_end_pos == pytest.approx(0.9)
    assert m.created_without_overlap is False


def test_partial_overlap_and_span_from_subagents():
    # main [10,60); subs [0,40) and [30,80): span is [0,80) = 80 s
    # overlap [30,40) = 10 s -> 0.125; first overlap 30/80 = 0.375; last end 80 -> 1.0
    m = process_metrics([(0, 40), (30, 80)], main=[(10, 60)])
    assert m.peak_concurrency == 2
    assert m.overlap_ratio == pytest.approx(0.125)
    assert m.first_overlap_pos == pytest.approx(0.375)
    assert m.first_spawn_pos == 0.0
    assert m.last_subagent_end_pos == 1.0


def test_untimed_subagent_counts_as_created():
    m = process_metrics([None, (10, 20)], main=[(0, 100)])
    assert m.subagents_created == 2
    assert m.peak_concurrency == 1


def test_zero_length_run_does_not_divide_by_zero():
    m = process_metrics([(5, 5)], main=[(5, 5)])
    assert m.first_spawn_pos == 0.0 and m.overlap_ratio == 0.0 and m.peak_concurrency == 0


def test_interval_ending_before_start_is_rejected():
    with pytest.raises(ValueError):
        process_metrics([(10, 5)])
