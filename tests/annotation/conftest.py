"""Fixtures several annotation test modules share; their builders are in tests/factories.py."""

from __future__ import annotations

import pytest

from tests.factories import code_study
from tests.factories import dictdb_study as build_dictdb_study


@pytest.fixture
def coded_study(study, codebook, adjudicator, django_capture_on_commit_callbacks):
    """Every run coded twice: runs 1–3 agree on lossy-handoff (on run 1 one annotator saw it in two
    episodes), the rest disagree, one adjudicated; then the worker's refresh of the statistics runs
    (on commit, as in production; Celery runs eagerly in tests)."""
    with django_capture_on_commit_callbacks(execute=True):
        code_study(study, codebook, adjudicator)
    return study


@pytest.fixture
def dictdb_study(db, tmp_path, codebook, trio, adjudicator):
    """A study of the published sample's pair (tests.factories.dictdb_study)."""
    return build_dictdb_study(tmp_path / "d", codebook, trio, adjudicator)
