"""Citing a span of an event's text on the coding page, in Debian Chromium: text selected with the mouse inside
an event is cited with `c`, with the "Cite selection" control beside it (a click, or Tab and Enter from the
selection), kept with its quote and offsets (characters of the event's text), listed in the episode, undone
with `u`, and highlighted when opened."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotation.models import Annotation
from tests.integration.conftest import login, wait_until_saved
from trajectories.models import Event

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TEXT = "Reading naïve 🙂 café logs\nsub-0 wrote src/f0.py twice"


def give_text(run) -> Event:
    event = Event.objects.get(run=run, context__external_id="main", seq=0)
    event.text = TEXT
    event.save(update_fields=["text"])
    return event


def select_with_the_mouse(page, pre, quote: str):
    """Drag the mouse over `quote` in the event's text (the first time it occurs)."""
    box = pre.evaluate(
        """(pre, quote) => {
            const node = pre.firstChild, at = node.data.indexOf(quote);
            const range = document.createRange();
            range.setStart(node, at);
            range.setEnd(node, at + quote.length);
            const rects = range.getClientRects();
            const first = rects[0], last = rects[rects.length - 1];
            return {x0: first.left + 1, y0: first.top + first.height / 2,
                    x1: last.right - 1, y1: last.top + last.height / 2};
        }""",
        quote,
    )
    page.mouse.move(box["x0"], box["y0"])
    page.mouse.down()
    page.mouse.move(box["x1"], box["y1"], steps=5)
    page.mouse.up()
    assert page.evaluate("() => window.getSelection().toString()") == quote


def spans_saved(assignment_id: int, count: int, page) -> list[dict]:
    for _ in range(100):
        annotation = Annotation.objects.filter(assignment_id=assignment_id).first()
        label = annotation and annotation.labels.first()
        if label and len(label.spans) == count:
            return label.spans
        page.wait_for_timeout(100)
    raise AssertionError(f"{count} spans were never saved")


def open_first_event(page, live_server) -> int:
    page.goto(f"{live_server.url}/annotate/next/")
    page.wait_for_selector("#annotation-form")
    page.wait_for_load_state()
    page.wait_for_selector("section.side.concurrent ol.contexts > li[id^=agent-]")
    return int(page.url.rstrip("/").split("/")[-1])


def test_a_selection_inside_an_event_is_cited_with_its_characters(page, live_server, study, trio):
    from annotation.models import Assignment

    first = Assignment.objects.filter(study=study, annotator=trio[0]).order_by("position").first()
    give_text(first.run)
    login(page, live_server, "coder1", "pw-coder1")
    assignment_id = open_first_event(page, live_server)
    assert assignment_id == first.pk
    page.keyboard.press("2")
    page.keyboard.type("The parent misread its log.")
    page.keyboard.press("Escape")
    page.keyboard.press("j")
    page.keyboard.press("o")  # the main agent's events: its first is the message
    cursor = page.locator("section.side.concurrent li.event.log-cursor")
    expect(cursor).to_have_count(1)
    anchor = cursor.locator(".cite").get_attribute("data-anchor")
    pre = cursor.locator("pre.event-text")
    expect(pre).to_have_text(TEXT)

    # the mouse selects "café": the control appears beside it; c cites it
    select_with_the_mouse(page, pre, "café")
    control = page.locator("#cite-selection")
    expect(control).to_be_visible()
    shown, chosen = control.bounding_box(), pre.bounding_box()
    assert chosen["y"] <= shown["y"] <= chosen["y"] + chosen["height"] + 40, (shown, chosen)
    page.keyboard.press("c")
    expect(control).to_be_hidden()
    episode = page.locator("fieldset.label-card:not([hidden]) .instance").first
    expect(episode.locator("[data-role=span-list]")).to_contain_text("café")
    expect(episode.locator("textarea[data-role=evidence]")).to_have_value(anchor)
    expect(page.locator("#key-feedback")).to_contain_text("characters 16–20")
    spans = spans_saved(assignment_id, 1, page)
    assert spans == [{"field": "evidence", "anchor": anchor, "agent": "main", "seq": 0, "start": 16, "end": 20,
                      "quote": "café"}]  # fmt: skip

    # keyboard: from the selection, Tab reaches the control and Enter cites
    select_with_the_mouse(page, pre, "src/f0.py")
    expect(control).to_be_visible()
    page.keyboard.press("Tab")
    expect(control).to_be_focused()
    page.keyboard.press("Enter")
    spans = spans_saved(assignment_id, 2, page)
    start = TEXT.index("src/f0.py")
    assert spans[1]["quote"] == "src/f0.py" and (spans[1]["start"], spans[1]["end"]) == (start, start + 9)

    # u takes the last cite back
    page.keyboard.press("u")
    expect(episode.locator("[data-role=span-list] li")).to_have_count(1)
    spans_saved(assignment_id, 1, page)

    # a click on the control cites too
    select_with_the_mouse(page, pre, "naïve 🙂")
    control.click()
    spans = spans_saved(assignment_id, 2, page)
    assert (spans[1]["start"], spans[1]["end"], spans[1]["quote"]) == (8, 15, "naïve 🙂")
    wait_until_saved(page)

    # opened again, the coding highlights its spans in the log once their event is loaded
    page.reload()
    page.wait_for_selector("section.side.concurrent ol.contexts > li[id^=agent-]")
    page.keyboard.press("j")
    page.keyboard.press("o")
    expect(page.locator("section.side.concurrent li.event.log-cursor")).to_have_count(1)
    highlighted = "() => Array.from(CSS.highlights.get('cited-span') || []).map((r) => r.toString()).sort()"
    for _ in range(50):
        if page.evaluate(highlighted) == ["café", "naïve 🙂"]:
            break
        page.wait_for_timeout(100)
    assert page.evaluate(highlighted) == ["café", "naïve 🙂"]

    # opened, the evidence shows the cited characters highlighted
    link = episode.locator("[data-role=span-list] li").first.locator("a")
    page.goto(live_server.url + link.get_attribute("href"))
    expect(page.locator("mark.cited-span")).to_have_text("café")


def test_a_selection_outside_an_events_text_offers_no_cite(page, live_server, study, trio):
    login(page, live_server, "coder1", "pw-coder1")
    open_first_event(page, live_server)
    page.keyboard.press("2")
    page.keyboard.type("x")
    page.keyboard.press("Escape")
    heading = page.locator("section.side.concurrent h2, section.side.concurrent h3").first
    box = heading.bounding_box()
    page.mouse.move(box["x"] + 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] - 2, box["y"] + box["height"] / 2, steps=5)
    page.mouse.up()
    expect(page.locator("#cite-selection")).to_be_hidden()
    page.keyboard.press("c")  # no selection in an event, no event under the cursor: it says so
    expect(page.locator("#key-feedback")).to_contain_text("Move to an event first")


def test_offsets_count_the_events_own_characters_even_its_carriage_returns(page, live_server, study, trio):
    """A log written on Windows keeps "\\r\\n" in its texts: the page's text must keep them too, or every offset after
    the first line would be off by one and the server would refuse the quote."""
    from annotation.models import Assignment

    first = Assignment.objects.filter(study=study, annotator=trio[0]).order_by("position").first()
    text = "C:\\work> pytest\r\n1 failed\r\nFAILED test_api.py::test_merge"
    Event.objects.filter(run=first.run, context__external_id="main", seq=0).update(text=text)
    login(page, live_server, "coder1", "pw-coder1")
    assignment_id = open_first_event(page, live_server)
    page.keyboard.press("2")
    page.keyboard.type("The merge test failed.")
    page.keyboard.press("Escape")
    page.keyboard.press("j")
    page.keyboard.press("o")
    pre = page.locator("section.side.concurrent li.event.log-cursor pre.event-text")
    assert pre.evaluate("(pre) => pre.textContent") == text
    select_with_the_mouse(page, pre, "test_merge")
    page.keyboard.press("c")
    spans = spans_saved(assignment_id, 1, page)
    start = text.index("test_merge")
    assert (spans[0]["start"], spans[0]["end"], spans[0]["quote"]) == (start, start + 10, "test_merge")
