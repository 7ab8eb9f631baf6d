"""A real Celery worker process on a real Redis broker importing into a real PostgreSQL.

Needs DATABASE_URL=postgres://… and CELERY_TEST_BROKER_URL=redis://… (set by .ci/run);
skipped otherwise, and a failure under PARALLAX_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from config.celery import app as celery_app
from tests.factories import simple_run, write_jsonl
from tests.integration.conftest import start_worker, stop_worker, wait_done, worker_services
from trajectories import services, tasks
from trajectories.models import ImportBatch, Run

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(tmp_path):
    database, broker = worker_services()
    queue = f"parallax-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"  # nothing a test leaves queued reaches the next
    proc = start_worker(tmp_path, broker, queue, database=database)
    saved = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False
    try:
        yield Worker(proc, broker, queue, tmp_path / "worker.log")
    finally:
        celery_app.conf.task_always_eager = saved
        stop_worker(proc)


class Worker:
    def __init__(self, proc: subprocess.Popen, broker: str, queue: str, log: Path):
        self.proc, self.broker, self.queue, self.log = proc, broker, queue, log

    def send(self, batch_id: int, task=tasks.import_batch) -> str:
        """Enqueue through a connection of our own: earlier eager tests may have cached a memory:// pool."""
        with celery_app.connection_for_write(url=self.broker) as conn:
            return task.apply_async(args=[batch_id], connection=conn, queue=self.queue).id

    def wait_done(self, batch_id: int, timeout: float = 90) -> ImportBatch:
        try:
            return wait_done(batch_id, timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- worker log ---\n{self.log.read_text()[-4000:]}") from None


def test_worker_imports_an_uploaded_batch_exactly_once(worker, tmp_path, admin_user):
    data = write_jsonl(tmp_path / "r.jsonl", simple_run("via-worker", n_sub=2)).read_bytes()
    batch = services.import_batch_create(upload=SimpleUploadedFile("r.jsonl", data), user=admin_user)
    assert worker.send(batch.pk)  # really sent through the broker, not run eagerly
    batch = worker.wait_done(batch.pk)
    assert (batch.status, batch.imported, batch.failed) == ("done", 1, 0), batch.report
    run = Run.objects.get(task__external_id="via-worker")
    assert run.subagents_created == 2
    # A redelivered task (crash after the import) is harmless: the batch is finished, nothing is imported twice.
    worker.send(batch.pk)
    time.sleep(2)
    assert Run.objects.filter(task__external_id="via-worker").count() == 1
    assert worker.proc.poll() is None  # the worker is still alive


def test_the_worker_computes_a_studys_statistics_and_stores_them_with_their_version(worker, study, codebook):
    """The refresh a change queues, run by the real worker on PostgreSQL: the stored statistics carry
    the study's inputs version and the figures the rows give."""
    from annotation.analysis import compute
    from annotation.analysis.inputs import read_inputs
    from annotation.models import Assignment, Study, StudyStatistics
    from annotation.tasks import refresh_study_statistics
    from tests.factories import code_run, mode_code

    lossy = mode_code(codebook, "lossy-handoff")
    for run in study.runs.all():
        for assignment in Assignment.objects.filter(study=study, run=run):
            code_run(assignment, [lossy])
    version = Study.objects.get(pk=study.pk).statistics_version
    worker.send(study.pk, task=refresh_study_statistics)
    deadline = time.monotonic() + 90
    while not StudyStatistics.objects.filter(study=study, version=version).exists():
        assert time.monotonic() < deadline, f"no statistics after 90 s\n{worker.log.read_text()[-4000:]}"
        time.sleep(0.3)
    stored = StudyStatistics.objects.get(study=study)
    live = compute.agreement(read_inputs(study, parts=("agreement",)))  # the worker's resamples
    assert stored.payload["agreement"]["headline"] == live["headline"]
    assert stored.payload["table3"]["instances"] == 6  # every run agreed on one mode: six final instances


def test_the_worker_trains_a_suggestions_model_reporting_its_progress(worker, tmp_path, codebook, trio, adjudicator):
    """Training queued from the page's service, run by the real worker on PostgreSQL: the model ends
    done, every step counted, a prediction stored for each run of the study."""
    from annotation.models import RunSuggestion, SuggestionModel
    from annotation.services.suggestions import suggestions_train_request
    from annotation.tasks import train_suggestions
    from tests.factories import labelled_study

    study = labelled_study(tmp_path, codebook, trio, adjudicator)
    model = suggestions_train_request(study=study, actor=adjudicator, seed=2, queue=False)
    worker.send(model.pk, task=train_suggestions)
    deadline = time.monotonic() + 90
    while not SuggestionModel.objects.get(pk=model.pk).is_finished:
        assert time.monotonic() < deadline, f"no model after 90 s\n{worker.log.read_text()[-4000:]}"
        time.sleep(0.3)
    model = SuggestionModel.objects.get(pk=model.pk)
    assert model.status == "done", model.error
    assert model.folds_done == model.folds_total == 6
    assert RunSuggestion.objects.filter(model=model).count() == study.runs.count()
