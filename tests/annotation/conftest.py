"""Fixtures several annotation test modules share; their builders are in tests/factories.py."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.test import TestCase

from accounts.roles import ADJUDICATOR, ANNOTATOR
from tests.factories import assigned_study, code_study, new_user
from tests.factories import dictdb_study as build_dictdb_study


@pytest.fixture
def coded_study(request):
    """Every run coded twice: runs 1–3 agree on lossy-handoff (on run 1 both saw it in two
    episodes), the rest disagree, one adjudicated; then the worker's refresh of the statistics runs
    (on commit, as in production; Celery runs eagerly in tests). Built for each test, or once for a module
    that uses `coded_world`."""
    if "coded_world" in request.fixturenames:
        return request.getfixturevalue("coded_world").study()
    study, codebook, adjudicator = (request.getfixturevalue(name) for name in ("study", "codebook", "adjudicator"))
    with TestCase.captureOnCommitCallbacks(execute=True):
        code_study(study, codebook, adjudicator)
    return study


@dataclass(frozen=True)
class CodedWorld:
    """The rows `coded_world` built, read afresh for each test: a test may change its own instances, and its
    writes are undone with its transaction, so the next test starts from the rows as built."""

    study_id: int
    codebook_id: int
    annotator_ids: tuple[int, ...]
    adjudicator_id: int

    def study(self):
        from annotation.models import Study

        return Study.objects.get(pk=self.study_id)

    def codebook(self):
        from taxonomy.models import Codebook

        return Codebook.objects.get(pk=self.codebook_id)

    def trio(self):
        from django.contrib.auth.models import User

        users = User.objects.in_bulk(self.annotator_ids)
        return [users[pk] for pk in self.annotator_ids]

    def adjudicator(self):
        from django.contrib.auth.models import User

        return User.objects.get(pk=self.adjudicator_id)


@pytest.fixture(scope="module")
def coded_world(module_transaction, django_db_blocker, tmp_path_factory) -> CodedWorld:
    """`coded_study` (with its codebook, annotators coder1–3 and adjudicator) built once for a module that asks
    for it with `pytestmark = pytest.mark.usefixtures("coded_world")`: the statistics' 1,000 bootstrap resamples
    are then computed once, not for each test. Each test still starts from the rows as built (module_transaction);
    the module's `coded_study`, `study`, `codebook`, `trio` and `adjudicator` are these rows."""
    from taxonomy.services import codebook_load_default

    with django_db_blocker.unblock():
        codebook = codebook_load_default()
        trio = [new_user(f"coder{i}", ANNOTATOR) for i in (1, 2, 3)]
        adjudicator = new_user("senior", ADJUDICATOR)
        study = assigned_study(tmp_path_factory.mktemp("coded-study"), codebook, trio, adjudicator)
        with TestCase.captureOnCommitCallbacks(execute=True):
            code_study(study, codebook, adjudicator)
    return CodedWorld(study.pk, codebook.pk, tuple(user.pk for user in trio), adjudicator.pk)


@pytest.fixture
def dictdb_study(db, tmp_path, codebook, trio, adjudicator):
    """A study of the published sample's pair (tests.factories.dictdb_study)."""
    return build_dictdb_study(tmp_path / "d", codebook, trio, adjudicator)
