"""A worker killed in the middle of its work, and the service healing itself with no person acting: real `celery
worker` processes on Redis and the PostgreSQL test database, SIGKILLed mid-task; a new worker (with its beat, as
docker-compose and `make demo` run it) is started and nothing else is done.

The thresholds are lowered through the deployment's own settings (docs/deploy.md, *When a worker dies*), so that
what takes minutes in production takes seconds here. Needs DATABASE_URL=postgres://… and CELERY_TEST_BROKER_URL=
redis://… (set by .ci/run); skipped otherwise, and a failure under PARALLAX_REQUIRE_SERVICES=1."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
import zipfile
from pathlib import Path

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection, transaction

from annotation.analysis.store import analysis_refresh
from annotation.models import Study, StudyStatistics
from config.celery import app as celery_app
from tests.factories import ROOT, both, client_for, code_run, ctx, ev, header, mode_code, t
from tests.integration.conftest import (
    kill_worker,
    process_env,
    start_worker,
    stop_worker,
    wait_done,
    wait_for_line,
    worker_services,
)
from trajectories import services, tasks
from trajectories.models import Event, ImportBatch, Run

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]

# Statistics: a refresh waiting 3 s is lost (production: 2 minutes), the beat sweeps every second (production: a
# minute), a change is computed at once (production: after 5 s). The visibility timeout stays production's two hours:
# within this test only the sweep can bring the lost refresh back.
STATISTICS = {
    "PARALLAX_STATISTICS_STALE_S": "3",
    "PARALLAX_STATISTICS_SWEEP_S": "1",
    "PARALLAX_STATISTICS_DELAY_S": "0",
}
# Imports: a task unacknowledged for 3 s is handed out again (production: two hours).
VISIBILITY_S = 3
HEALED_WITHIN_S = 30  # from the new worker's start


class Deployment:
    """The test database, the broker, a queue of this test's own, and the processes of a deployment the test starts:
    workers, and web processes that queue work as a request would."""

    def __init__(self, folder: Path, database: str, broker: str):
        self.logs, self.database, self.broker = folder, database, broker
        self.queue = f"parallax-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.workers: list[subprocess.Popen] = []

    def worker(self, name: str, *, beat: bool = False, env: dict[str, str] | None = None) -> subprocess.Popen:
        proc = start_worker(self.logs, self.broker, self.queue, name, database=self.database, beat=beat, env=env)
        self.workers.append(proc)
        return proc

    def web(self, code: str, env: dict[str, str] | None = None) -> None:
        """Run `code` in a process of its own configured as the web is (`manage.py shell -c`): what it queues goes
        through the broker to the workers."""
        done = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", code],
            cwd=ROOT,
            env=process_env(self.database, self.broker, self.queue, env),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-4000:]

    def send(self, task, object_id: int) -> None:
        """Queue a task as the web does after an upload (the test process itself has no broker)."""
        with celery_app.connection_for_write(url=self.broker) as conn:
            task.apply_async(args=[object_id], connection=conn, queue=self.queue)

    def log_tails(self) -> str:
        return "".join(f"\n--- {log.name} ---\n{log.read_text()[-3000:]}" for log in sorted(self.logs.glob("*.log")))


@pytest.fixture
def deployment(tmp_path):
    """Stops the workers the test started. Nothing the test process queues runs eagerly here: it goes nowhere unless
    sent to the deployment's queue."""
    database, broker = worker_services()
    deployment = Deployment(tmp_path, database, broker)
    saved = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False
    try:
        yield deployment
    finally:
        celery_app.conf.task_always_eager = saved
        for proc in deployment.workers:
            stop_worker(proc)


def waiting_for_the_row(proc: subprocess.Popen, log, timeout: float = 60) -> None:
    """Until a session of the worker waits for a lock on the stored statistics (it has computed them and is storing
    them): the refresh is observably under way."""
    deadline = time.monotonic() + timeout
    while True:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_clear_snapshot()")  # inside a transaction, its first reading is kept
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND wait_event_type = 'Lock' AND query ILIKE '%%annotation_studystatistics%%'"
            )
            if cursor.fetchone()[0]:
                return
        assert proc.poll() is None and time.monotonic() < deadline, f"the refresh never got to storing{log.read_text()}"
        time.sleep(0.05)


def test_statistics_a_killed_worker_was_computing_become_current_with_no_person(deployment, study, codebook):
    """The issue's fault: a worker killed during a statistics refresh left the dashboard "Not current" for good. Here
    the last coding of a study is submitted, the worker running the refresh it queues is SIGKILLed in the middle (it
    has computed the figures and waits to store them: the test holds the stored row's lock), a new worker with its
    beat is started and nothing else is done — and within HEALED_WITHIN_S the stored statistics are of the study's
    current version and the dashboard no longer says "Not current"."""
    lossy, stale = mode_code(codebook, "lossy-handoff"), mode_code(codebook, "stale-handoff")
    runs = list(study.runs.order_by("pk"))
    for index, run in enumerate(runs):
        first, second = both(study, run)
        code_run(first, [lossy])
        if run != runs[-1]:
            code_run(second, [lossy] if index % 2 else [stale])
    analysis_refresh(study_id=study.pk)  # the figures are current before the fault
    last = both(study, runs[-1])[1]

    first = deployment.worker("first", env=STATISTICS)
    wait_for_line(deployment.logs / "first.log", " ready.", first)
    with transaction.atomic():
        # A slow refresh, made so without touching the code: its result waits to be stored behind this row lock.
        StudyStatistics.objects.select_for_update().get(study=study)
        # The last coding, submitted by a process configured as the web is: the refresh it queues reaches the worker.
        deployment.web(
            "from annotation.models import Assignment\n"
            "from tests.factories import code_run, mode_code\n"
            f"a = Assignment.objects.select_related('run', 'annotator', 'study__codebook').get(pk={last.pk})\n"
            "code_run(a, [mode_code(a.study.codebook, 'stale-handoff')])\n",
            env=STATISTICS,
        )
        version = Study.objects.get(pk=study.pk).statistics_version
        wait_for_line(
            deployment.logs / "first.log", f"statistics of study {study.pk}: computing version {version}", first
        )
        waiting_for_the_row(first, deployment.logs / "first.log")
        kill_worker(first)

    assert StudyStatistics.objects.get(study=study).version < version, "the kill did not land mid-refresh"
    assert Study.objects.get(pk=study.pk).statistics_queued_at is not None  # the study still waits for that refresh
    dashboard = client_for(study.adjudicator)
    assert "Not current" in dashboard.get(f"/annotate/studies/{study.pk}/").content.decode()  # (a GET asks nothing)

    started = time.monotonic()
    deployment.worker("second", beat=True, env=STATISTICS)
    while StudyStatistics.objects.get(study=study).version != version:
        assert time.monotonic() - started < HEALED_WITHIN_S, (
            f"statistics still behind {HEALED_WITHIN_S} s after a new worker started{deployment.log_tails()}"
        )
        time.sleep(0.2)
    print(f"statistics current {time.monotonic() - started:.1f} s after the new worker started")

    assert Study.objects.get(pk=study.pk).statistics_queued_at is None  # nothing left waiting
    page = dashboard.get(f"/annotate/studies/{study.pk}/")
    assert page.status_code == 200
    assert "Not current" not in page.content.decode()


def test_an_import_a_killed_worker_was_running_is_finished_with_no_person(deployment, tmp_path, admin_user):
    """A worker SIGKILLed in the middle of a 24-run batch: no run is half-written; a new worker started once the
    visibility timeout has passed is handed the unacknowledged import again and finishes it — every run stored once,
    the runs stored before the kill recognised, the batch's report listing each run stored."""
    n_runs, n_events = 24, 3000
    bundle = tmp_path / "many.zip"
    with zipfile.ZipFile(bundle, "w") as zf:
        for i in range(n_runs):
            lines = [header(f"killed-{i:02d}"), ctx("main", start=t(0), end=t(3000))]
            lines += [ev("main", k, t(k * 0.01)) for k in range(n_events)]
            zf.writestr(f"r{i:02d}.jsonl", b"".join(orjson.dumps(line) + b"\n" for line in lines))
    batch = services.import_batch_create(upload=SimpleUploadedFile("many.zip", bundle.read_bytes()), user=admin_user)
    timeout = {"PARALLAX_TASK_VISIBILITY_TIMEOUT_S": str(VISIBILITY_S)}

    first = deployment.worker("first", env=timeout)
    deployment.send(tasks.import_batch, batch.pk)
    deadline = time.monotonic() + 60
    while ImportBatch.objects.get(pk=batch.pk).processed < 3:
        assert time.monotonic() < deadline, f"the import did not start{deployment.log_tails()}"
        time.sleep(0.05)
    kill_worker(first)
    killed_at = time.monotonic()

    partial = ImportBatch.objects.get(pk=batch.pk)
    assert partial.status == "running" and 3 <= partial.processed < n_runs, "the kill did not land mid-batch"
    stored_before = Run.objects.filter(task__external_id__startswith="killed-")
    for run in stored_before:
        assert Event.objects.filter(run=run).count() == run.n_events == n_events  # no half-written run
    before = stored_before.count()

    # The worker's supervisor restarts it; the task its predecessor took is older than the visibility timeout by then.
    time.sleep(max(0.0, VISIBILITY_S + 0.5 - (time.monotonic() - killed_at)))
    started = time.monotonic()
    deployment.worker("second", beat=True, env=timeout)
    try:
        done = wait_done(batch.pk, timeout=HEALED_WITHIN_S)
    except AssertionError as exc:
        raise AssertionError(f"{exc}{deployment.log_tails()}") from None
    print(f"import finished {time.monotonic() - started:.1f} s after the new worker started")

    assert (done.status, done.imported + done.duplicates, done.failed) == ("done", n_runs, 0), done.error
    assert done.duplicates == before  # what the killed worker stored was recognised, not imported again
    runs = Run.objects.filter(task__external_id__startswith="killed-")
    assert runs.count() == n_runs and runs.values("content_hash").distinct().count() == n_runs  # none twice
    assert Event.objects.filter(run__in=runs).count() == n_runs * n_events  # none half-written
    reported = [entry["run_id"] for entry in done.report if entry["status"] in ("imported", "duplicate")]
    assert sorted(reported) == sorted(runs.values_list("pk", flat=True))  # each stored run listed, once
