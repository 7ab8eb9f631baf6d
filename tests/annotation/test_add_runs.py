"""Runs added to a study after it started: assigned at once, continuing the study's balance (one at a
time included), appended to the queues; a run that cannot join is refused by name and nothing is added."""

from __future__ import annotations

from collections import Counter

import pytest
from django.core.management import CommandError, call_command

from annotation.errors import AnnotationError
from annotation.models import Assignment
from annotation.services.studies import study_add_runs
from tests.factories import more_pairs
from trajectories.models import Run

pytestmark = pytest.mark.django_db


def _pairs(study) -> Counter:
    on_run: dict[int, list[int]] = {}
    for run_id, annotator in Assignment.objects.filter(study=study).values_list("run_id", "annotator_id"):
        on_run.setdefault(run_id, []).append(annotator)
    return Counter(tuple(sorted(a)) for a in on_run.values())


def test_runs_added_one_at_a_time_stay_balanced_per_pair(study, tmp_path, trio):
    for run_id in more_pairs(tmp_path, 30):
        assert study_add_runs(study=study, run_ids=[run_id]) == 1
    counts = _pairs(study)
    assert sum(counts.values()) == 36 and max(counts.values()) - min(counts.values()) <= 1
    for user in trio:  # every queue still numbered 1..n without a gap
        mine = list(
            Assignment.objects.filter(study=study, annotator=user)
            .order_by("position")
            .values_list("position", flat=True)
        )
        assert mine == list(range(1, len(mine) + 1))


def test_a_run_that_cannot_join_is_refused_by_name_and_nothing_is_added(study, tmp_path):
    new = more_pairs(tmp_path, 2)
    inside = study.runs.first().pk
    twin = Run.objects.get(task__external_id="late-00", mode="sequential").pk
    before = study.runs.count()
    with pytest.raises(AnnotationError) as refused:
        study_add_runs(study=study, run_ids=[new[0], inside, twin])
    assert f"run {inside} is already in" in str(refused.value) and f"run {twin} is not a concurrent run" in str(
        refused.value
    )
    assert study.runs.count() == before and not Assignment.objects.filter(run_id=new[0]).exists()


def test_the_command_adds_every_new_pair_or_says_why_not(study, tmp_path):
    more_pairs(tmp_path, 3)
    call_command("add_runs", study.name, "--new")
    assert study.runs.count() == 9 and Assignment.objects.filter(study=study).count() == 18
    with pytest.raises(CommandError, match="no runs to add"):
        call_command("add_runs", study.name, "--new")
    with pytest.raises(CommandError, match="is already in"):
        call_command("add_runs", study.name, str(study.runs.first().pk))
