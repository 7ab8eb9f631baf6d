"""The enforcing Content-Security-Policy breaks nothing: no violation on the main pages, and
htmx, the timeline, the code picker and the API docs still work."""

from __future__ import annotations

import pytest

from tests.factories import client_for
from tests.integration.conftest import login, wait_until_saved

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_csp_header_is_enforcing(db, admin_user):
    csp = client_for(admin_user).get("/trajectories/")["Content-Security-Policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp


def test_no_csp_violation_on_the_main_pages(page, live_server, study, trio, adjudicator):
    violations = []
    page.on(
        "console", lambda m: violations.append(f"{page.url}: {m.text}") if "Content Security Policy" in m.text else None
    )
    login(page, live_server, "coder1", "pw-coder1")
    page.goto(f"{live_server.url}/annotate/next/")
    page.wait_for_selector("#annotation-form")
    page.keyboard.press("/")
    page.keyboard.type("lossy")
    page.keyboard.press("Enter")  # the picker's JavaScript runs
    assert page.locator("fieldset.label-card:not([hidden])").count() == 1
    side = page.locator("section.side.concurrent")
    side.locator("ol.contexts details").nth(1).locator("summary").click()
    side.locator(".event").first.wait_for()  # htmx loaded the events
    wait_until_saved(page)
    page.context.clear_cookies()
    login(page, live_server, adjudicator.username, f"pw-{adjudicator.username}")
    for path in ("/trajectories/", f"/annotate/studies/{study.pk}/", f"/codebooks/{study.codebook_id}/"):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
    page.goto(f"{live_server.url}/api/docs/")
    page.wait_for_selector(".swagger-ui .information-container", timeout=15000)  # rendered from local files
    assert violations == []
