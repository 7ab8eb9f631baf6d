"""One key per decision, in Debian Chromium: number keys pick codes, ranked search, undo, flag,
skip, the submit undo window, next/previous and the shortcut list — and never a blocking dialog."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotation.models import Annotation, Assignment
from tests.integration.conftest import login, wait_until_saved

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def no_dialogs(page):
    opened = []
    page.on("dialog", lambda dialog: (opened.append(dialog.message), dialog.dismiss()))
    return opened


def open_next(page, live_server) -> int:
    page.goto(f"{live_server.url}/annotate/next/")
    page.wait_for_selector("#annotation-form")
    page.wait_for_load_state()  # the keyboard handlers (a deferred script) are in place
    return int(page.url.rstrip("/").split("/")[-1])


def test_three_runs_coded_with_the_keyboard_alone(page, live_server, study, trio):
    """Per run: one number key, the rationale, Ctrl+Enter twice — and the next run opens with a
    confirmation of the one just submitted."""
    dialogs = no_dialogs(page)
    login(page, live_server, "coder1", "pw-coder1")
    done = []
    assignment_id = open_next(page, live_server)
    for n in range(3):
        expect(page.locator(".mode-option .hotkey", has_text="2").first).to_be_visible()  # the legend
        page.keyboard.press("2")  # the second code shown: No Integration Owner; its rationale has the focus
        page.keyboard.type(f"Nobody merged the children's work ({n}).")
        page.keyboard.press("Control+Enter")
        page.keyboard.press("Control+Enter")  # again: at once, without waiting out the undo window
        page.wait_for_url(lambda url, current=assignment_id: f"/annotate/{current}/" not in url)
        done.append(assignment_id)
        page.wait_for_selector("#annotation-form")
        page.wait_for_load_state()
        expect(page.locator(".messages")).to_contain_text("Submitted")
        assignment_id = int(page.url.rstrip("/").split("/")[-1])
    for pk in done:
        annotation = Annotation.objects.get(assignment_id=pk)
        assert annotation.is_submitted and annotation.labels.get().code.key == "no-integration-owner"
    expect(page.locator(".progress-line")).to_contain_text("3 submitted today")
    assert dialogs == []
    # the back button shows the run just submitted as it is now: submitted, not an editable draft
    page.go_back()
    page.wait_for_selector("#annotation-form")
    expect(page.locator("#save-status")).to_contain_text("Submitted")


def test_search_ranks_names_before_definitions_and_undo_steps_back(page, live_server, study, trio):
    no_dialogs(page)
    login(page, live_server, "coder1", "pw-coder1")
    assignment_id = open_next(page, live_server)
    page.keyboard.press("/")
    page.keyboard.type("critical")  # "Serial Investigation" mentions the critical path in its definition
    expect(page.locator(".mode-option.best")).to_contain_text("Critical-Path Starvation")
    expect(page.locator("#guidance")).to_contain_text("Critical-Path Starvation")  # its guidance, inline
    page.keyboard.press("Enter")
    page.keyboard.type("The parent idled while one child held the critical path.")
    page.keyboard.press("Escape")  # leave the field: single keys act again
    page.keyboard.press("u")  # undo the typing
    rationale = page.locator("fieldset.label-card:not([hidden]) textarea[data-role=rationale]")
    expect(rationale).to_have_value("")
    page.keyboard.press("u")  # undo the pick
    expect(page.locator("input[name=code]:checked")).to_have_count(0)
    wait_until_saved(page)
    page.wait_for_timeout(300)
    wait_until_saved(page)
    assert Annotation.objects.get(assignment_id=assignment_id).labels.count() == 0
    # Ctrl+Enter starts the undo window; u stops it and nothing is submitted
    page.keyboard.press("1")
    page.keyboard.type("x")
    page.clock.install()  # the page's timers from here on run when the test moves the clock
    page.keyboard.press("Control+Enter")
    expect(page.locator("#submit-pending")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#submit-pending")).to_be_hidden()
    page.clock.run_for(4500)  # longer than the window
    page.wait_for_timeout(500)  # time for a submission, had one been sent, to land
    assert page.url.rstrip("/").endswith(f"/annotate/{assignment_id}")
    assert not Annotation.objects.get(assignment_id=assignment_id).is_submitted


def test_flag_skip_move_and_the_shortcut_list(page, live_server, study, trio):
    no_dialogs(page)
    login(page, live_server, "coder1", "pw-coder1")
    first = open_next(page, live_server)
    page.keyboard.press("?")
    expect(page.locator("dialog#shortcuts")).to_be_visible()
    expect(page.locator("dialog#shortcuts")).to_contain_text("skip the run for now")
    page.keyboard.press("Escape")
    expect(page.locator("dialog#shortcuts")).to_be_hidden()

    page.keyboard.press("f")  # flag: the note has the focus
    page.keyboard.type("Is a wait for a child a join?")
    page.keyboard.press("Escape")
    wait_until_saved(page)
    page.wait_for_timeout(1500)
    wait_until_saved(page)
    annotation = Annotation.objects.get(assignment_id=first)
    assert annotation.flagged and annotation.flag_note == "Is a wait for a child a join?"

    page.keyboard.press("s")  # skip, with a reason, without a dialog
    page.keyboard.type("The logs stop mid-run.")
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: f"/annotate/{first}/" not in url)
    expect(page.locator(".messages")).to_contain_text("Skipped")
    assert Annotation.objects.get(assignment_id=first).skip_reason == "The logs stop mid-run."
    second = int(page.url.rstrip("/").split("/")[-1])
    assert second != first

    page.keyboard.press("p")  # previous in queue order; looking at a run writes nothing
    page.wait_for_url(lambda url: f"/annotate/{second}/" not in url)
    page.wait_for_load_state()
    assert not Annotation.objects.filter(assignment_id=second).exists()
    page.goto(f"{live_server.url}/annotate/{second}/")
    page.wait_for_selector("#annotation-form")
    page.wait_for_load_state()
    page.keyboard.press("p")
    page.wait_for_url(lambda url: f"/annotate/{second}/" not in url)
    page.wait_for_load_state()
    previous = int(page.url.rstrip("/").split("/")[-1])
    page.keyboard.press("n")
    page.wait_for_url(lambda url: url.rstrip("/").endswith(f"/annotate/{second}"))
    mine = list(Assignment.objects.filter(annotator=trio[0]).order_by("position").values_list("pk", flat=True))
    assert mine.index(previous) == mine.index(second) - 1


def test_u_during_the_countdown_cancels_it_even_from_the_rationale(page, live_server, study, trio):
    login(page, live_server, "coder1", "pw-coder1")
    assignment_id = open_next(page, live_server)
    page.keyboard.press("1")  # the rationale has the focus
    page.keyboard.type("why")
    page.clock.install()  # the page's timers from here on run when the test moves the clock
    page.keyboard.press("Control+Enter")
    expect(page.locator("#submit-pending")).to_be_visible()
    page.keyboard.press("u")  # a key, not a letter typed into the coding
    expect(page.locator("#submit-pending")).to_be_hidden()
    page.clock.run_for(4500)  # longer than the window
    page.wait_for_timeout(500)  # time for a submission, had one been sent, to land
    annotation = Annotation.objects.get(assignment_id=assignment_id)
    assert not annotation.is_submitted and annotation.labels.get().rationale == "why"


def test_cite_after_an_undo_goes_to_the_episode_last_edited(page, live_server, study, trio):
    login(page, live_server, "coder1", "pw-coder1")
    assignment_id = open_next(page, live_server)
    for key in ("1", "2"):
        page.keyboard.press(key)
        page.keyboard.type(f"mode {key}")
        page.keyboard.press("Escape")
    first = page.locator("fieldset.label-card:not([hidden]) textarea[data-role=rationale]").first
    first.click()
    page.keyboard.type(" more")
    page.keyboard.press("Escape")
    page.keyboard.press("u")  # undo that typing: the episode last edited is still the first mode's
    expect(first).to_have_value("mode 1")
    side = page.locator("section.side.concurrent")
    side.locator("ol.contexts details").nth(1).locator("summary").click()
    side.locator(".event .cite").first.click()
    page.wait_for_timeout(1500)
    wait_until_saved(page)
    cited = {
        label.code.key: label.evidence for label in Annotation.objects.get(assignment_id=assignment_id).labels.all()
    }
    assert cited["no-implementation-owner"] and not cited["no-integration-owner"], cited


def test_the_queue_lists_its_keys_and_n_opens_the_next_run(page, live_server, study, trio):
    login(page, live_server, "coder1", "pw-coder1")
    page.goto(f"{live_server.url}/annotate/")
    page.wait_for_load_state()
    page.keyboard.press("?")
    expect(page.locator("#shortcuts")).to_be_visible()
    expect(page.locator("#shortcuts")).to_contain_text("open your next run")
    page.keyboard.press("Escape")
    expect(page.locator("#shortcuts")).to_be_hidden()
    target = page.locator("#next-run").get_attribute("href")
    page.keyboard.press("n")
    page.wait_for_url(f"**{target}")
    page.wait_for_selector("#annotation-form")
