"""The log under the keys, in Debian Chromium: j / k through agents and events, J / K by agent, o to open,
r to the other run, c to cite the event into the episode last edited — coding a run with two codes, two
rationales and one cited event takes at most 15 keystrokes besides the text typed."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from annotation.models import Annotation
from tests.integration.conftest import login

CURSOR = re.compile(r"\blog-cursor\b")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


class Keyboard:
    """The page's keyboard, counting every key pressed apart from the text typed."""

    def __init__(self, page):
        self.page, self.presses = page, []

    def press(self, key: str):
        self.presses.append(key)
        self.page.keyboard.press(key)

    def type(self, text: str):
        self.page.keyboard.type(text)


def open_next(page, live_server) -> int:
    page.goto(f"{live_server.url}/annotate/next/")
    page.wait_for_selector("#annotation-form")
    page.wait_for_load_state()
    page.wait_for_selector("section.side.concurrent ol.contexts > li[id^=agent-]")  # the agents have loaded
    return int(page.url.rstrip("/").split("/")[-1])


def test_coding_a_run_with_two_codes_and_a_cited_event_takes_at_most_15_keys(page, live_server, study, trio):
    login(page, live_server, "coder1", "pw-coder1")
    assignment_id = open_next(page, live_server)
    keys = Keyboard(page)
    keys.press("2")  # a code; its rationale has the focus
    keys.type("The parent never merged the children's work.")
    keys.press("Escape")
    keys.press("j")  # the concurrent run's first agent
    expect(page.locator("section.side.concurrent summary.log-cursor")).to_have_count(1)
    keys.press("o")  # opened: the cursor steps into its first event once loaded
    cursor = page.locator("section.side.concurrent li.event.log-cursor")
    expect(cursor).to_have_count(1)
    anchor = cursor.locator(".cite").get_attribute("data-anchor")
    keys.press("c")  # cited into the episode just written
    evidence = page.locator("fieldset.label-card:not([hidden]) textarea[data-role=evidence]").first
    expect(evidence).to_have_value(anchor)
    keys.press("3")  # a second code
    keys.type("Two children edited the same file at once.")
    keys.press("Escape")
    keys.press("Control+Enter")
    keys.press("Control+Enter")  # at once
    page.wait_for_url(lambda url: f"/annotate/{assignment_id}/" not in url)
    annotation = Annotation.objects.get(assignment_id=assignment_id)
    assert annotation.is_submitted
    labels = list(annotation.labels.order_by("pk"))
    assert len(labels) == 2 and all(label.rationale for label in labels)
    assert [label.evidence for label in labels if label.evidence] == [[anchor]]
    assert len(keys.presses) <= 15, keys.presses
    print(f"keystrokes besides the text: {len(keys.presses)} {keys.presses}")


def test_the_log_keys_move_by_event_by_agent_and_between_the_runs(page, live_server, study, trio):
    login(page, live_server, "coder1", "pw-coder1")
    open_next(page, live_server)
    agents = page.locator("section.side.concurrent ol.contexts > li[id^=agent-]")
    assert agents.count() >= 2, "the study's concurrent runs have sub-agents"
    first_agent = agents.nth(0).get_attribute("id")
    page.keyboard.press("j")
    page.keyboard.press("o")
    expect(page.locator(f"#{first_agent} li.event.log-cursor")).to_have_count(1)
    page.keyboard.press("j")  # the agent's second event
    events = page.locator(f"#{first_agent} li.event")
    expect(events.nth(1)).to_have_class(CURSOR)
    page.keyboard.press("k")
    expect(events.nth(0)).to_have_class(CURSOR)
    page.keyboard.press("Shift+J")  # the next agent, past the rest of this one's events
    expect(page.locator(f"#{agents.nth(1).get_attribute('id')} > details > summary")).to_have_class(CURSOR)
    page.keyboard.press("Shift+K")
    expect(page.locator(f"#{first_agent} > details > summary")).to_have_class(CURSOR)
    page.keyboard.press("r")  # the sequential run
    expect(page.locator("section.side.sequential .log-cursor")).to_have_count(1)
    page.keyboard.press("r")  # and back where the cursor was
    expect(page.locator(f"#{first_agent} > details > summary")).to_have_class(CURSOR)
    page.keyboard.press("o")  # closed again: its events are out of the way
    expect(page.locator(f"#{first_agent} li.event").first).to_be_hidden()
    # c without an event under the cursor says so and cites nothing
    page.keyboard.press("2")
    page.keyboard.type("x")
    page.keyboard.press("Escape")
    page.keyboard.press("c")
    expect(page.locator("#key-feedback")).to_contain_text("Only an event can be cited")
    expect(page.locator("fieldset.label-card:not([hidden]) textarea[data-role=evidence]").first).to_have_value("")
    # the legend lists the log's keys
    page.keyboard.press("?")
    for key in ("j", "Shift+J", "o", "r", "c"):
        expect(page.locator("#shortcuts")).to_contain_text(key)


def test_ruling_a_case_takes_at_most_10_keys_with_the_coding_pages_keys(
    page, live_server, study, trio, codebook, adjudicator
):
    """The adjudicator rules an escalated case by keyboard alone: the first proposed mode by its number key,
    its rationale, Esc, an event of the log cited into it (j, o, c), Ctrl+Enter to record."""
    from annotation.models import FinalCoding
    from annotation.services.review import discussion_escalate
    from tests.factories import submit_disagreement

    run = study.runs.order_by("pk").first()
    discussion = submit_disagreement(study, run.pk, codebook)
    discussion_escalate(discussion=discussion, actor=trio[0])
    login(page, live_server, adjudicator.username, f"pw-{adjudicator.username}")
    page.goto(f"{live_server.url}/annotate/adjudication/{discussion.pk}/")
    page.wait_for_selector("#adjudication-form")
    page.wait_for_load_state()
    page.wait_for_selector("section.side.concurrent ol.contexts > li[id^=agent-]")
    first = page.locator(".proposed-list .ruling-mode").first
    expect(first.locator(".hotkey")).to_have_text("1")
    ruled = first.get_attribute("data-key")
    keys = Keyboard(page)
    keys.press("1")
    expect(page.locator(":focus")).to_have_attribute("data-role", "rationale")
    keys.type("The summary dropped the failing test.")
    keys.press("Escape")
    keys.press("j")
    keys.press("o")
    cursor = page.locator("section.side.concurrent li.event.log-cursor")
    expect(cursor).to_have_count(1)
    anchor = cursor.locator(".cite").get_attribute("data-anchor")
    keys.press("c")
    expect(first.locator("textarea[name^=evidence-]")).to_have_value(anchor)
    keys.press("Control+Enter")
    page.wait_for_selector("text=adjudicated: the final labels are below")
    final = FinalCoding.objects.get(run=run)
    label = final.labels.get()
    assert label.code.key == ruled
    assert label.rationale == "The summary dropped the failing test." and label.evidence == [anchor]
    assert final.decided_by == adjudicator
    assert len(keys.presses) <= 10, keys.presses
    print(f"keystrokes besides the text: {len(keys.presses)} {keys.presses}")


def test_the_adjudication_keys_leave_a_field_and_refuse_an_unpicked_cite(
    page, live_server, study, trio, codebook, adjudicator
):
    from annotation.services.review import discussion_escalate
    from tests.factories import submit_disagreement

    run = study.runs.order_by("pk").first()
    discussion = submit_disagreement(study, run.pk, codebook)
    discussion_escalate(discussion=discussion, actor=trio[0])
    login(page, live_server, adjudicator.username, f"pw-{adjudicator.username}")
    page.goto(f"{live_server.url}/annotate/adjudication/{discussion.pk}/")
    page.wait_for_selector("#adjudication-form")
    page.wait_for_load_state()
    page.wait_for_selector("section.side.concurrent ol.contexts > li[id^=agent-]")
    page.keyboard.press("j")
    page.keyboard.press("o")
    expect(page.locator("section.side.concurrent li.event.log-cursor")).to_have_count(1)
    page.keyboard.press("c")  # no mode picked: nothing cited, and it says so
    expect(page.locator("#key-feedback")).to_contain_text("Pick a mode")
    page.keyboard.press("1")
    page.keyboard.type("1")  # typed into the rationale, not a key
    rationale = page.locator(".proposed-list .ruling-mode").first.locator("textarea[data-role=rationale]")
    expect(rationale).to_have_value("1")
    page.keyboard.press("Escape")
    page.keyboard.press("1")  # out of the field: drops the mode again
    expect(page.locator(".proposed-list .ruling-mode").first.locator("input[name=code]")).not_to_be_checked()
    page.keyboard.press("Control+Enter")  # nothing picked: refused, naming why
    expect(page.locator(".form-errors")).to_be_visible()
    assert discussion.__class__.objects.get(pk=discussion.pk).status == "escalated"


def test_at_375_px_the_sheet_makes_way_for_the_logs_cursor(page, live_server, study, trio):
    page.set_viewport_size({"width": 375, "height": 800})
    login(page, live_server, "coder1", "pw-coder1")
    assignment_id = open_next(page, live_server)
    page.keyboard.press("2")  # the sheet opens, the rationale has the focus
    expect(page.locator(".code-tree")).to_be_visible()
    page.keyboard.type("Nobody merged.")
    page.keyboard.press("Escape")
    page.keyboard.press("j")  # the sheet folds: the cursor is in view, not under it
    page.keyboard.press("o")
    cursor = page.locator("section.side.concurrent li.event.log-cursor")
    expect(cursor).to_have_count(1)
    expect(page.locator(".code-tree")).to_be_hidden()
    sheet = page.locator("#annotation-form").bounding_box()
    top = cursor.bounding_box()["y"]
    assert 0 <= top < sheet["y"], (top, sheet)
    anchor = cursor.locator(".cite").get_attribute("data-anchor")
    page.keyboard.press("c")
    for _ in range(100):
        label = Annotation.objects.filter(assignment_id=assignment_id).first()
        if label and label.labels.filter(evidence=[anchor]).exists():
            break
        page.wait_for_timeout(100)
    else:
        raise AssertionError("the cited event was never saved")
