"""Shared fixtures: named users per role, logged-in clients, the `study` most tests start from, the artifact's task
folder. The builders they use are in tests/factories.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from accounts.roles import ADJUDICATOR, ADMIN, ANNOTATOR
from tests.factories import assigned_study, client_for, new_user


def _artifact_folder() -> Path:
    """One complete task folder of the study's public artifact (swebench_verified/django__django-10999: three
    agents' parallel and serial cells, annotation.md and review.json). It stays outside the repository (its
    licence is unknown): `shared/data/real-trajectories/artifact-task-folder` beside the checkout (in any folder
    above it), or under $PARALLAX_SHARED_DATA. Tests read it in place and are skipped without it."""
    bases = [Path(os.environ["PARALLAX_SHARED_DATA"])] if os.environ.get("PARALLAX_SHARED_DATA") else []
    bases += [parent / "shared" / "data" for parent in Path(__file__).resolve().parents]
    for base in bases:
        folder = base / "real-trajectories" / "artifact-task-folder"
        if (folder / "swebench_verified" / "django__django-10999").is_dir():
            return folder
    return bases[0] / "real-trajectories" / "artifact-task-folder"  # absent: the tests say where they looked


ARTIFACT = _artifact_folder()
REQUIRE_SERVICES = os.environ.get("PARALLAX_REQUIRE_SERVICES") == "1"


@pytest.fixture(scope="session", autouse=True)
def _own_media_root(tmp_path_factory):
    """Uploads land in this test process's own folder. Test processes (xdist) each have a database whose batch
    numbers start at 1, and an upload is stored under MEDIA_ROOT/imports/<batch number>: sharing var/media, one
    process's finished import removed the upload another process had just stored under the same number. Worker
    processes a test starts inherit it through the environment."""
    from django.test import override_settings

    media = tmp_path_factory.mktemp("media")
    os.environ["MEDIA_ROOT"] = str(media)
    override = override_settings(MEDIA_ROOT=media, IMPORT_UPLOAD_DIR=media / "imports")
    override.enable()
    yield media
    override.disable()


@pytest.fixture(autouse=True)
def _fresh_cache():
    """The cache holds login-throttle counters: tests must not inherit each other's failures."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture(scope="session")
def artifact_root() -> Path:
    """The artifact's task folder (_artifact_folder), or the test is skipped."""
    if not (ARTIFACT / "swebench_verified" / "django__django-10999").is_dir():
        pytest.skip(f"the artifact's task folder is absent ({ARTIFACT})")
    return ARTIFACT


@pytest.fixture
def artifact_runs(db, artifact_root):
    """The six runs of the artifact's task folder (three agents × parallel, serial), imported from it."""
    from trajectories.models import Run
    from trajectories.services import import_paths

    report = import_paths(paths=[artifact_root])
    assert Run.objects.count() == 6, report
    return artifact_root


@pytest.fixture
def artifact_study(artifact_runs, codebook, trio, adjudicator):
    """A 2-of-3 study of the task folder's three pairs, assigned."""
    from annotation.services.studies import study_assign, study_create

    study = study_create(name="Artifact", codebook=codebook, annotators=trio, adjudicator=adjudicator)
    study_assign(study=study)
    return study


def skip_or_fail(reason: str) -> None:
    """CI sets PARALLAX_REQUIRE_SERVICES=1: a missing real service is then a failure, not a skip."""
    if REQUIRE_SERVICES:
        pytest.fail(f"required service unavailable: {reason}")
    pytest.skip(reason)


@pytest.fixture
def annotator(db) -> User:
    return new_user("ann1", ANNOTATOR)


@pytest.fixture
def adjudicator(request, db) -> User:
    if world := module_world(request):
        return world.adjudicator()
    return new_user("senior", ADJUDICATOR)


@pytest.fixture
def admin_user(db) -> User:
    return new_user("boss", ADMIN)


@pytest.fixture
def outsider(db) -> User:
    return new_user("outsider")


@pytest.fixture
def annotator_client(annotator) -> Client:
    return client_for(annotator)


@pytest.fixture
def browser_client(adjudicator) -> Client:
    """A user who may browse the whole corpus (adjudicators and admins may)."""
    return client_for(adjudicator)


@pytest.fixture
def admin_client_(admin_user) -> Client:
    return client_for(admin_user)


# -- studies --------------------------------------------------------------------------------


@pytest.fixture
def codebook(request, db):
    if world := module_world(request):
        return world.codebook()
    from taxonomy.services import codebook_load_default

    return codebook_load_default()


@pytest.fixture
def trio(request, db):
    if world := module_world(request):
        return world.trio()
    return [new_user(f"coder{i}", ANNOTATOR) for i in (1, 2, 3)]


@pytest.fixture
def study(request, db, tmp_path, codebook, trio, adjudicator):
    """Six paired tasks (12 runs) over two agents and two benchmarks, assigned."""
    if world := module_world(request):
        return world.study()
    return assigned_study(tmp_path / "study", codebook, trio, adjudicator)


# -- built once per module ------------------------------------------------------------------


@pytest.fixture(scope="module")
def module_transaction(django_db_setup, django_db_blocker):
    """A transaction around a whole test module, rolled back when the module ends. What a module-scoped fixture
    writes in it is built once per module (once per xdist worker that runs the module's tests) and seen by each
    of its tests; each test still runs in a transaction of its own (pytest-django's `db`, a savepoint inside this
    one) that undoes what the test writes before the next test begins — Django's setUpTestData, for pytest."""
    from django.db import transaction

    with django_db_blocker.unblock():
        module_atomic = transaction.atomic()
        module_atomic.__enter__()
    yield
    with django_db_blocker.unblock():
        transaction.set_rollback(True)
        module_atomic.__exit__(None, None, None)


def module_world(request):
    """The world a module builds once (`coded_world`, tests/annotation/conftest.py), if the module asks for it
    (pytest.mark.usefixtures): then `codebook`, `trio`, `adjudicator` and `study` are its rows, read afresh for
    each test, not new ones."""
    return request.getfixturevalue("coded_world") if "coded_world" in request.fixturenames else None


def pytest_sessionfinish(session, exitstatus):
    """Django removes the SQLite test database file but not its WAL side files."""
    import glob
    import tempfile

    for path in glob.glob(os.path.join(tempfile.gettempdir(), f"parallax-test-{os.getpid()}.sqlite3*")):
        os.remove(path)
