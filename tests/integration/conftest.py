"""What the integration tests share: a Debian Chromium page driven by Playwright (no downloaded browser), logging in
through it, waiting for a draft to be saved, and waiting for an import batch a real worker runs."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from tests.conftest import skip_or_fail

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
    """A page in a context of its own: no cookie, storage or cache is shared with another test."""
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
