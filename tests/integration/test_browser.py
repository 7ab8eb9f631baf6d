"""Real browser: Debian Chromium driven by Playwright (no downloaded browser)."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from tests.conftest import simple_run, skip_or_fail, write_jsonl
from trajectories.models import Run
from trajectories.services import import_paths

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
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


@pytest.fixture
def page(live_server):
    if not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM):
        skip_or_fail(f"no Chromium at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("playwright is not installed")
    # Playwright's sync API runs an event loop in this thread; the ORM calls of the test are still synchronous.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        browser = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            pg = browser.new_page()
            pg.set_default_timeout(15000)
            yield pg
        finally:
            browser.close()


def login(page, live_server, username, password):
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_selector("text=Log out")


def test_browse_a_pair_timeline_and_events(page, live_server, admin_user, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", simple_run("t-browser", "concurrent", n_sub=3))
    write_jsonl(tmp_path / "s.jsonl", simple_run("t-browser", "sequential", n_sub=0))
    import_paths(paths=[tmp_path])
    login(page, live_server, "boss", "pw-boss")
    page.wait_for_selector("text=t-browser")
    # htmx filter: choose sequential, the table is swapped in place
    page.select_option("select[name=mode]", "sequential")
    page.wait_for_selector("#run-table >> text=1 run")
    page.click("#run-table >> text=t-browser")
    page.wait_for_selector("svg.lanes")
    assert page.locator("section.side.concurrent rect.bar.sub").count() == 3
    # expand a sub-agent: its events load lazily through htmx
    page.locator("section.side.concurrent ol.contexts details").nth(1).locator("summary").click()
    page.wait_for_selector("section.side.concurrent .event.file_write")
    assert "src/f0.py" in page.locator("section.side.concurrent .event.file_write").first.inner_text()
    concurrent = Run.objects.get(mode="concurrent")
    assert str(concurrent.pk) in page.content()


def test_script_in_trajectory_text_does_not_run(page, live_server, admin_user, tmp_path):
    from tests.conftest import ctx, ev, header, t

    evil = "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>"
    lines = [header("xss"), ctx("main", start=t(0), end=t(5), label=evil), ev("main", 0, t(1), "message", text=evil)]
    import_paths(paths=[write_jsonl(tmp_path / "x.jsonl", lines)])
    login(page, live_server, "boss", "pw-boss")
    page.goto(f"{live_server.url}/trajectories/runs/{Run.objects.get().pk}/")
    page.locator("ol.contexts summary").first.click()
    page.wait_for_selector(".event.message")
    assert page.title() != "pwned"
    assert "<script>document.title" in page.locator(".event.message pre").first.inner_text()
