"""The discussion and adjudication pages speak the coding page's keys, in Debian Chromium: on a discussion, `m`
writes a comment, Esc leaves the box, Ctrl+Enter posts it, the log's keys move through the pair, and `?` lists
the keys; the adjudication page lists its keys in a `?` dialog too (not a line of text)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.integration.conftest import login

CURSOR = re.compile(r"\blog-cursor\b")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def a_discussion(study, codebook):
    from annotation.models import Assignment
    from tests.factories import submit_disagreement

    run = study.runs.order_by("pk").first()
    discussion = submit_disagreement(study, run.pk, codebook)
    coder = Assignment.objects.filter(study=study, run=run).order_by("slot").first().annotator
    return discussion, coder


def open_page(page, url: str):
    page.goto(url)
    page.wait_for_load_state()
    page.wait_for_selector("section.side.concurrent ol.contexts > li[id^=agent-]")  # the pair's agents have loaded


def test_a_comment_is_written_and_posted_by_keyboard_alone_and_the_log_keys_work(page, live_server, study, codebook):
    from annotation.models import Comment

    discussion, coder = a_discussion(study, codebook)
    login(page, live_server, coder.username, f"pw-{coder.username}")
    open_page(page, f"{live_server.url}/annotate/discussions/{discussion.pk}/")
    presses = []

    def press(key):
        presses.append(key)
        page.keyboard.press(key)

    press("m")
    box = page.locator("#comments textarea[name=text]")
    expect(box).to_be_focused()
    page.keyboard.type("j and k are mine to type here.")
    press("Control+Enter")
    expect(page.locator("#comments")).to_contain_text("j and k are mine to type here.")
    assert [c.text for c in Comment.objects.filter(discussion=discussion)] == ["j and k are mine to type here."]
    expect(page.locator("#key-feedback")).to_contain_text("Posted.")
    assert presses == ["m", "Control+Enter"]

    # Esc leaves the box: the next keys move the log's cursor, nothing is typed
    press("m")
    page.keyboard.type("draft")
    press("Escape")
    expect(box).not_to_be_focused()
    press("j")
    expect(page.locator("section.side.concurrent summary.log-cursor")).to_have_count(1)
    press("o")
    expect(page.locator("section.side.concurrent li.event.log-cursor")).to_have_count(1)
    press("r")
    expect(page.locator("section.side.sequential .log-cursor")).to_have_count(1)
    expect(box).to_have_value("draft")
    # Ctrl+Enter outside the box posts nothing and says how
    press("Control+Enter")
    expect(page.locator("#key-feedback")).to_contain_text("m writes a comment")
    assert Comment.objects.filter(discussion=discussion).count() == 1
    # an empty comment is not posted
    press("m")
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    press("Control+Enter")
    expect(page.locator("#key-feedback")).to_contain_text("Nothing to post")
    assert Comment.objects.filter(discussion=discussion).count() == 1

    # ? lists the keys; Esc closes the list
    press("Escape")
    press("?")
    shortcuts = page.locator("dialog#shortcuts")
    expect(shortcuts).to_be_visible()
    for text in ("write a comment", "post the comment", "leave a text box", "next / previous agent", "the other run"):
        expect(shortcuts).to_contain_text(text)
    press("Escape")
    expect(shortcuts).to_be_hidden()
    page.click("#show-shortcuts")
    expect(shortcuts).to_be_visible()


def test_the_adjudication_page_lists_its_keys_in_a_dialog(page, live_server, study, trio, codebook, adjudicator):
    from annotation.services.review import discussion_escalate

    discussion, coder = a_discussion(study, codebook)
    discussion_escalate(discussion=discussion, actor=coder)
    login(page, live_server, adjudicator.username, f"pw-{adjudicator.username}")
    open_page(page, f"{live_server.url}/annotate/adjudication/{discussion.pk}/")
    shortcuts = page.locator("dialog#shortcuts")
    expect(shortcuts).to_be_hidden()
    page.keyboard.press("?")
    expect(shortcuts).to_be_visible()
    for text in ("pick or drop the mode", "no failure mode", "record the final labels", "leave a field",
                 "next / previous agent", "cite the event"):  # fmt: skip
        expect(shortcuts).to_contain_text(text)
    page.keyboard.press("1")  # the list is open: keys do not act behind it
    expect(page.locator(".proposed-list .ruling-mode").first.locator("input[name=code]")).not_to_be_checked()
    page.keyboard.press("Escape")
    expect(shortcuts).to_be_hidden()
    # typed in a field, ? is a character, not the list
    page.keyboard.press("1")
    page.keyboard.type("why?")
    expect(shortcuts).to_be_hidden()
    expect(page.locator(".proposed-list .ruling-mode").first.locator("textarea[data-role=rationale]")).to_have_value(
        "why?"
    )
    page.keyboard.press("Escape")
    page.click("#show-shortcuts")
    expect(shortcuts).to_be_visible()


def test_a_ruled_case_still_lists_the_log_keys(page, live_server, study, trio, codebook, adjudicator):
    from annotation.services.review import Ruling, adjudicate, discussion_escalate

    discussion, coder = a_discussion(study, codebook)
    discussion_escalate(discussion=discussion, actor=coder)
    lossy = codebook.codes.get(key="lossy-handoff")
    adjudicate(discussion=discussion, actor=adjudicator, rulings=[Ruling(code_id=lossy.pk, rationale="r")])
    login(page, live_server, adjudicator.username, f"pw-{adjudicator.username}")
    open_page(page, f"{live_server.url}/annotate/adjudication/{discussion.pk}/")
    page.keyboard.press("?")
    shortcuts = page.locator("dialog#shortcuts")
    expect(shortcuts).to_be_visible()
    expect(shortcuts).to_contain_text("next / previous agent")
    expect(shortcuts).not_to_contain_text("record the final labels")
