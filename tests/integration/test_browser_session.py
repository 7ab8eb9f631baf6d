"""Nothing typed is lost when the session ends, in Debian Chromium: the save is answered 401, a fixed
banner says so and links to the login, and after logging in again (in this tab or a new one) the page
comes back with the text and saves it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotation.models import Annotation
from tests.factories import client_for, coding_form, mode_code
from tests.integration.conftest import login, wait_until_saved

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FIRST = "The parent never merged the children's work."
MORE = " Typed after the session ended in another tab."


def open_next(page, live_server) -> int:
    page.goto(f"{live_server.url}/annotate/next/")
    page.wait_for_selector("#annotation-form")
    page.wait_for_load_state()  # the keyboard handlers (a deferred script) are in place
    return int(page.url.rstrip("/").split("/")[-1])


def rationale_in_database(assignment_id: int) -> str:
    return Annotation.objects.get(assignment_id=assignment_id).labels.get().rationale


def wait_for_rationale(page, assignment_id: int, text: str):
    for _ in range(100):
        annotation = Annotation.objects.filter(assignment_id=assignment_id).first()
        if annotation and annotation.labels.filter(rationale=text).exists():
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"the rationale {text!r} was never saved")


def log_out_elsewhere(page, live_server):
    other = page.context.new_page()
    other.goto(f"{live_server.url}/annotate/")
    other.get_by_role("button", name="Log out").click()
    other.wait_for_selector("input[name=username]")
    other.close()


def code_then_lose_the_session(page, live_server) -> int:
    login(page, live_server, "coder1", "pw-coder1")
    assignment_id = open_next(page, live_server)
    page.keyboard.press("2")  # No Integration Owner; its rationale has the focus
    page.keyboard.type(FIRST)
    wait_for_rationale(page, assignment_id, FIRST)
    log_out_elsewhere(page, live_server)
    page.keyboard.type(MORE)
    banner = page.locator("#session-expired")
    expect(banner).to_be_visible(timeout=10_000)
    expect(banner).to_contain_text("Session expired — your text is kept")
    expect(page.locator("#save-status")).to_contain_text("your session has ended")
    expect(page.locator("#save-status")).not_to_contain_text("Password")  # never the login page in the box
    box = banner.bounding_box()
    assert box["y"] == 0 and box["y"] + box["height"] <= page.viewport_size["height"]  # fixed in view
    assert rationale_in_database(assignment_id) == FIRST  # the server saved nothing after the logout
    return assignment_id


def test_the_text_typed_after_a_logout_elsewhere_is_kept_and_saved_after_logging_in(page, live_server, study, trio):
    assignment_id = code_then_lose_the_session(page, live_server)
    page.locator("#session-login").click()  # the login page, returning here
    page.fill("input[name=username]", "coder1")
    page.fill("input[name=password]", "pw-coder1")
    page.click("button[type=submit]")
    page.wait_for_url(f"**/annotate/{assignment_id}/")
    page.wait_for_selector("#annotation-form")
    expect(page.locator("fieldset.label-card:not([hidden]) textarea[data-role=rationale]")).to_have_value(FIRST + MORE)
    expect(page.locator("#key-feedback")).to_contain_text("Restored what you typed")
    wait_for_rationale(page, assignment_id, FIRST + MORE)
    wait_until_saved(page)
    # saved: opening the run again restores nothing more
    page.reload()
    page.wait_for_selector("#annotation-form")
    page.wait_for_load_state()
    expect(page.locator("#key-feedback")).to_be_hidden()


def test_a_new_tab_after_logging_in_gets_the_draft_of_a_closed_one(page, live_server, study, trio):
    assignment_id = code_then_lose_the_session(page, live_server)
    fresh = page.context.new_page()
    page.close()  # the tab with the text is gone
    login(fresh, live_server, "coder1", "pw-coder1")
    fresh.goto(f"{live_server.url}/annotate/{assignment_id}/")
    fresh.wait_for_selector("#annotation-form")
    expect(fresh.locator("fieldset.label-card:not([hidden]) textarea[data-role=rationale]")).to_have_value(FIRST + MORE)
    wait_for_rationale(fresh, assignment_id, FIRST + MORE)


def test_another_user_on_the_same_browser_never_gets_the_draft(page, live_server, study, trio):
    """The draft is kept per user and assignment: coder2, logging in on the same browser, opens their own
    runs untouched (and cannot open coder1's)."""
    assignment_id = code_then_lose_the_session(page, live_server)
    login(page, live_server, "coder2", "pw-coder2")
    own = open_next(page, live_server)
    assert own != assignment_id
    expect(page.locator("input[name=code]:checked")).to_have_count(0)
    expect(page.locator("#key-feedback")).to_be_hidden()
    assert page.goto(f"{live_server.url}/annotate/{assignment_id}/").status == 404
    assert rationale_in_database(assignment_id) == FIRST


def test_a_draft_older_than_the_saved_coding_is_a_conflict_not_an_overwrite(page, live_server, study, trio, codebook):
    """While the session was gone the coding was saved elsewhere (another device): the draft, restored,
    saves as the version it was based on, so the page shows the conflict and the annotator chooses."""
    assignment_id = code_then_lose_the_session(page, live_server)
    annotation = Annotation.objects.get(assignment_id=assignment_id)
    elsewhere = client_for(trio[0]).post(
        f"/annotate/{assignment_id}/save/",
        coding_form(mode_code(codebook, "no-integration-owner"), annotation.version, rationale="Saved on the laptop."),
    )
    assert elsewhere.status_code in (200, 302)
    login(page, live_server, "coder1", "pw-coder1")
    page.goto(f"{live_server.url}/annotate/{assignment_id}/")
    page.wait_for_selector("#annotation-form")
    expect(page.locator("#save-status")).to_contain_text("saved elsewhere")
    expect(page.locator("#save-status")).to_contain_text("Saved on the laptop.")
    assert rationale_in_database(assignment_id) == "Saved on the laptop."
    page.locator("[data-take-saved]").click()  # give the draft up: it is not restored again
    page.wait_for_selector("#annotation-form")
    page.wait_for_load_state()
    page.wait_for_timeout(500)
    expect(page.locator("fieldset.label-card:not([hidden]) textarea[data-role=rationale]")).to_have_value(
        "Saved on the laptop."
    )
    assert rationale_in_database(assignment_id) == "Saved on the laptop."
