"""A real Celery worker process on a real Redis broker importing into a real PostgreSQL.

Needs DATABASE_URL=postgres://… and CELERY_TEST_BROKER_URL=redis://… (set by .ci/run);
skipped otherwise, and a failure under PARALLAX_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from config.celery import app as celery_app
from tests.conftest import simple_run, skip_or_fail, write_jsonl
from trajectories import services, tasks
from trajectories.models import ImportBatch, Run

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def worker(tmp_path):
    broker = os.environ.get("CELERY_TEST_BROKER_URL", "")
    if connection.vendor != "postgresql":
        skip_or_fail("the worker test needs PostgreSQL (DATABASE_URL=postgres://…) to share the test database")
    if not broker.startswith("redis://"):
        skip_or_fail("CELERY_TEST_BROKER_URL=redis://… is not set")
    db = connection.settings_dict
    url = f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    queue = f"parallax-test-{os.getpid()}"
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "CELERY_BROKER_URL": broker,
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "DEBUG": "1",
    }
    log = (tmp_path / "worker.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--pool=solo",
            "--concurrency=1",
            "-Q",
            queue,
            "--without-gossip",
            "--without-mingle",
            "--loglevel=INFO",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    keys = ("broker_url", "task_always_eager", "task_default_queue")
    saved = {key: celery_app.conf[key] for key in keys}
    celery_app.conf.update(broker_url=broker, task_always_eager=False, task_default_queue=queue)
    try:
        yield proc
    finally:
        celery_app.conf.update(saved)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _wait_done(batch_id: int, timeout: float = 90) -> ImportBatch:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = ImportBatch.objects.get(pk=batch_id)
        if batch.is_finished:
            return batch
        time.sleep(0.3)
    raise AssertionError(f"batch {batch_id} not finished after {timeout}s")


def test_worker_imports_an_uploaded_batch_exactly_once(worker, tmp_path, admin_user):
    data = write_jsonl(tmp_path / "r.jsonl", simple_run("via-worker", n_sub=2)).read_bytes()
    batch = services.import_batch_create(upload=SimpleUploadedFile("r.jsonl", data), user=admin_user)
    result = tasks.import_batch.delay(batch.pk)
    assert result.id  # really sent through the broker, not run eagerly
    batch = _wait_done(batch.pk)
    assert (batch.status, batch.imported, batch.failed) == ("done", 1, 0), batch.report
    run = Run.objects.get(task__external_id="via-worker")
    assert run.subagents_created == 2
    # A redelivered task (crash after the import) is harmless: the batch is finished, nothing is imported twice.
    tasks.import_batch.delay(batch.pk)
    time.sleep(2)
    assert Run.objects.filter(task__external_id="via-worker").count() == 1
    assert worker.poll() is None  # the worker is still alive
