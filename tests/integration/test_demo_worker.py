"""`make demo`'s import path: a real Celery worker on kombu's filesystem broker (no server) and the
embedded SQLite database, importing an upload off the request while the page follows its progress.

Runs on the SQLite test database file (the worker process opens the same file); on PostgreSQL the
Redis worker test covers the worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from kombu import Connection

from config.celery import app as celery_app
from tests.factories import ROOT, simple_run, write_jsonl
from tests.integration.conftest import wait_done
from trajectories import services, tasks
from trajectories.models import ImportBatch, Run

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo_worker(tmp_path):
    if connection.vendor != "sqlite":
        pytest.skip("the demo's worker runs on the embedded SQLite database (PostgreSQL: test_celery_worker)")
    broker_dir = tmp_path / "broker"
    env = {
        "DEBUG": "1",
        "DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}",
        "CELERY_BROKER_URL": "filesystem://",
        "PARALLAX_BROKER_DIR": str(broker_dir),
        "MEDIA_ROOT": os.environ["MEDIA_ROOT"],  # where this test process stores uploads (tests/conftest.py)
    }
    log = (tmp_path / "worker.log").open("w")
    command = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo"]
    command += ["--without-gossip", "--without-mingle", "--loglevel=INFO"]
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield broker_dir, proc, tmp_path / "worker.log"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def send(broker_dir, batch_id: int) -> None:
    folder = str(broker_dir / "queue")
    options = {"data_folder_in": folder, "data_folder_out": folder, "control_folder": str(broker_dir / "control")}
    (broker_dir / "queue").mkdir(parents=True, exist_ok=True)
    with Connection("filesystem://", transport_options=options) as conn:
        tasks.import_batch.apply_async(args=[batch_id], connection=conn)


def test_the_demo_worker_imports_an_upload_off_the_request(demo_worker, tmp_path, admin_user):
    broker_dir, proc, log = demo_worker
    runs = [write_jsonl(tmp_path / f"r{i}.jsonl", simple_run(f"demo-{i}")) for i in range(3)]
    import zipfile

    bundle = tmp_path / "bundle.zip"
    with zipfile.ZipFile(bundle, "w") as zf:
        for path in runs:
            zf.write(path, path.name)
    batch = services.import_batch_create(upload=SimpleUploadedFile("bundle.zip", bundle.read_bytes()), user=admin_user)
    saved = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False
    try:
        send(broker_dir, batch.pk)
    finally:
        celery_app.conf.task_always_eager = saved
    assert ImportBatch.objects.get(pk=batch.pk).status == "pending"  # queued, not run here
    try:
        batch = wait_done(batch.pk, timeout=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- worker log ---\n{log.read_text()[-3000:]}") from None
    assert (batch.status, batch.imported, batch.failed) == ("done", 3, 0), (batch.error, batch.report)
    assert Run.objects.filter(task__external_id__startswith="demo-").count() == 3
    time.sleep(0.2)
    assert proc.poll() is None
