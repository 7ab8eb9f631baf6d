"""What the integration tests share: a Debian Chromium page driven by Playwright (no downloaded browser), logging in
through it, waiting for a draft to be saved, real Celery worker processes on Redis and the PostgreSQL test database
(started, killed, waited for), and waiting for an import batch a real worker runs."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import skip_or_fail
from tests.factories import ROOT

CHROMIUM = os.environ.get("PARALLAX_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


@pytest.fixture(scope="module")
def chromium():
    """One Chromium per test module (a browser starts in about a second; a fresh context per test in a fifth)."""
    if not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM):
        skip_or_fail(f"no Chromium at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("playwright is not installed")
    # Playwright's sync API runs an event loop in this thread; the ORM calls of the test are still synchronous.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(live_server, chromium):
    """A page in a context of its own: no cookie, storage or cache is shared with another test. Actions and
    `expect` wait up to 15 s for what they look for (Playwright's `expect` alone would give up after 5 s, which a
    live server sharing two cores with three test processes has been seen to need)."""
    from playwright.sync_api import expect

    expect.set_options(timeout=15_000)
    context = chromium.new_context()
    try:
        pg = context.new_page()
        pg.set_default_timeout(15000)
        yield pg
    finally:
        context.close()


def login(page, live_server, username, password):
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_selector("text=Log out")


def wait_until_saved(page):
    """Until the draft's status reads "Saved". A locator assertion, not `wait_for_function` with a
    string: Playwright polls a string by `eval` in the page, which our CSP (no 'unsafe-eval')
    refuses — so that wait failed whenever the save was not already done at its first check."""
    from playwright.sync_api import expect

    expect(page.locator("#save-status")).to_contain_text("Saved", timeout=30_000)


def wait_done(batch_id: int, timeout: float = 90):
    """The import batch once a worker has finished it (or an AssertionError after `timeout` seconds)."""
    from trajectories.models import ImportBatch

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = ImportBatch.objects.get(pk=batch_id)
        if batch.is_finished:
            return batch
        time.sleep(0.3)
    raise AssertionError(f"batch {batch_id} not finished after {timeout}s")


def worker_services() -> tuple[str, str]:
    """The PostgreSQL test database's URL and the Redis broker a real worker process shares with the test; skipped
    (a failure under PARALLAX_REQUIRE_SERVICES=1) without them."""
    from django.db import connection

    broker = os.environ.get("CELERY_TEST_BROKER_URL", "")
    if connection.vendor != "postgresql":
        skip_or_fail("the worker test needs PostgreSQL (DATABASE_URL=postgres://…) to share the test database")
    if not broker.startswith("redis://"):
        skip_or_fail("CELERY_TEST_BROKER_URL=redis://… is not set")
    db = connection.settings_dict
    url = f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    return url, broker


def process_env(database: str, broker: str, queue: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a process of the deployment under test (a worker, a web process): the test database, the
    broker and a queue of this test's own (PARALLAX_TASK_QUEUE, so that parallel test processes sharing the Redis
    never take each other's tasks — those of the worker's beat included)."""
    return {
        **os.environ,
        "DATABASE_URL": database,
        "CELERY_BROKER_URL": broker,
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "PARALLAX_TASK_QUEUE": queue,
        "DEBUG": "1",
        **(env or {}),
    }


def start_worker(
    tmp_path: Path,
    broker: str,
    queue: str,
    name: str = "worker",
    *,
    database: str | None = None,
    beat: bool = False,
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """`celery worker` (with `-B`, its beat, if asked) as a process group of its own, logging to tmp_path/<name>.log.
    Stop it with `stop_worker`, kill it with `kill_worker`."""
    if database is None:
        database = worker_services()[0]
    command = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo", "--concurrency=1"]
    command += ["-Q", queue, "--without-gossip", "--without-mingle", "--loglevel=INFO"]
    command += ["-n", f"{name}-{os.getpid()}@%h"]
    if beat:
        command += ["-B", "-s", str(tmp_path / f"{name}-beat-schedule")]
    log = (tmp_path / f"{name}.log").open("w")
    return subprocess.Popen(
        command,
        cwd=ROOT,
        env=process_env(database, broker, queue, env),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the beat that `-B` forks dies with it
    )


def kill_worker(proc: subprocess.Popen) -> None:
    """SIGKILL, as the kernel's OOM killer or a lost machine would: no shutdown, no acknowledgement, the worker and
    its beat at once."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def stop_worker(proc: subprocess.Popen) -> None:
    """A warm shutdown (SIGTERM), killed if it takes longer than 20 s."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        kill_worker(proc)


def wait_for_line(log: Path, text: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    """Until `text` is in the process's log (polled every 10 ms); an AssertionError with the log if the process
    dies or `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while text not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"no {text!r} in {log.name} after {timeout} s\n{log.read_text()[-4000:]}")
        time.sleep(0.01)
