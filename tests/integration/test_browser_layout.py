"""The pair is truly side by side where there is room, and stacks where there is not: measured from
the boxes the browser lays out, on the pair page and the annotate page."""

from __future__ import annotations

import pytest
from django.db.models import F
from playwright.sync_api import expect

from annotation.models import Annotation, Assignment
from tests.integration.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def box(page, selector: str) -> dict:
    """Where the element is drawn. An htmx swap replaces it (the status after a save): between the old one leaving
    and the new one being laid out there is no box, so a moment later is asked again."""
    for _ in range(50):
        found = page.locator(selector).first.bounding_box()
        if found is not None:
            return found
        page.wait_for_timeout(100)
    raise AssertionError(f"{selector} is not laid out")


def side_by_side(left: dict, right: dict) -> bool:
    return left["x"] + left["width"] <= right["x"] + 1 and abs(left["y"] - right["y"]) < 5


def stacked(top: dict, bottom: dict) -> bool:
    return top["y"] + top["height"] <= bottom["y"] + 1


@pytest.mark.parametrize("width", [1440, 375])
def test_the_pair_and_the_picker_sit_side_by_side_at_1440_and_the_picker_is_a_sheet_at_375(
    page, live_server, study, trio, width
):
    assignment = Assignment.objects.filter(study=study, annotator=trio[0]).order_by("pk").first()
    page.set_viewport_size({"width": width, "height": 900})
    login(page, live_server, "coder1", "pw-coder1")
    for url in (f"/annotate/{assignment.pk}/", f"/trajectories/runs/{assignment.run_id}/"):
        page.goto(live_server.url + url)
        page.wait_for_selector("section.side.sequential")
        concurrent, sequential = box(page, "section.side.concurrent"), box(page, "section.side.sequential")
        if width == 1440:
            assert side_by_side(concurrent, sequential), (url, concurrent, sequential)
        else:
            assert stacked(concurrent, sequential), (url, concurrent, sequential)
        assert page.evaluate("document.documentElement.scrollWidth") <= width, f"{url} scrolls sideways"
    page.goto(f"{live_server.url}/annotate/{assignment.pk}/")
    page.wait_for_selector("#annotation-form")
    picker, pair = box(page, "#annotation-form"), box(page, ".pair-view")
    if width == 1440:
        assert side_by_side(picker, pair), (picker, pair)
        return
    # 375 px: the pair first, the picker a sheet at the window's bottom, folded to its button until opened
    page.wait_for_load_state()
    assert pair["y"] < 900 and page.locator(".code-tree").is_hidden()
    assert abs(picker["y"] + picker["height"] - 900) < 2 and picker["height"] < 200, picker
    page.click("#picker-toggle")
    expect(page.locator(".code-tree")).to_be_visible()
    sheet = box(page, "#annotation-form")
    assert abs(sheet["y"] + sheet["height"] - 900) < 2 and sheet["height"] <= 0.75 * 900, sheet
    assert box(page, ".pair-view")["y"] == pair["y"]  # the sheet lies over the pair, which stays in place
    page.reload()  # opened stays opened
    page.wait_for_load_state()
    expect(page.locator(".code-tree")).to_be_visible()
    page.click("#picker-toggle")
    expect(page.locator(".code-tree")).to_be_hidden()


def test_the_picker_folds_away_and_the_runs_scroll_together(page, live_server, study, trio):
    assignment = Assignment.objects.filter(study=study, annotator=trio[0]).order_by("pk").first()
    page.set_viewport_size({"width": 1440, "height": 420})
    login(page, live_server, "coder1", "pw-coder1")
    page.goto(f"{live_server.url}/annotate/{assignment.pk}/")
    page.wait_for_selector("section.side.sequential")
    page.wait_for_load_state()
    wide = box(page, ".pair-view")["width"]
    page.keyboard.press("[")
    assert box(page, ".pair-view")["width"] > wide + 200  # the pair takes the picker's width
    page.keyboard.press("1")  # a picker key brings the picker back
    assert abs(box(page, ".pair-view")["width"] - wide) < 2
    page.keyboard.press("Escape")
    page.check("#scroll-together")
    concurrent = page.locator("section.side.concurrent")
    assert concurrent.evaluate("pane => pane.scrollHeight > pane.clientHeight")  # a pane of the window's height
    concurrent.evaluate("pane => { pane.scrollTop = pane.scrollHeight; }")
    page.wait_for_timeout(200)
    sequential = page.locator("section.side.sequential")
    assert sequential.evaluate(
        "pane => pane.scrollTop > 0 && pane.scrollTop + pane.clientHeight >= pane.scrollHeight - 2"
    )


def test_a_runs_artifacts_are_tabs(page, live_server, admin_user, tmp_path):
    from tests.factories import parse_pair

    concurrent, _ = parse_pair(tmp_path, patch=True)
    login(page, live_server, "boss", "pw-boss")
    page.goto(f"{live_server.url}/trajectories/runs/{concurrent.pk}/")
    side = page.locator("section.side.sequential")
    tabs = side.locator(".artifact-tab")
    assert tabs.count() >= 3 and tabs.first.get_attribute("aria-selected") == "true"
    assert side.locator("ul.artifacts > li:not([hidden])").count() == 1  # one artifact shown at a time
    side.locator(".artifact-tab", has_text="Patch").click()
    shown = side.locator("ul.artifacts > li:not([hidden])")
    assert shown.count() == 1 and "Patch" in shown.inner_text()
    assert shown.locator("details").get_attribute("open") is not None  # opened, not a closed summary


def test_an_opentelemetry_trace_fits_a_phone_with_its_lanes(page, live_server, admin_user, tmp_path):
    """Its task id is the trace id, 32 characters without a break: the title wraps instead of widening the page."""
    from tests.factories import otlp_request, otlp_team_trace, write_jsonl
    from trajectories.models import Run
    from trajectories.services import import_paths

    write_jsonl(tmp_path / "team.json", [otlp_request(otlp_team_trace())])
    import_paths(paths=[tmp_path / "team.json"])
    run = Run.objects.get()
    page.set_viewport_size({"width": 375, "height": 900})
    login(page, live_server, "boss", "pw-boss")
    page.goto(f"{live_server.url}/trajectories/runs/{run.pk}/")
    page.wait_for_selector("text=checker")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375, "the run page scrolls sideways"
    assert all(page.locator(f"text={lane}").count() for lane in ("worker-a", "worker-b", "checker"))


def in_view(page, selector: str) -> bool:
    found = box(page, selector)
    size = page.viewport_size
    return found["y"] >= 0 and found["y"] + found["height"] <= size["height"] and found["x"] >= 0


@pytest.mark.parametrize("width", [1440, 375])
def test_the_status_line_stays_in_view_wherever_page_and_picker_are_scrolled(page, live_server, study, trio, width):
    """Saved, the submit countdown, a refusal and a conflict all show in one line at the window's bottom,
    whether the annotator reads the end of the pair or the end of the code list."""
    assignment = Assignment.objects.filter(study=study, annotator=trio[0]).order_by("pk").first()
    page.set_viewport_size({"width": width, "height": 800})
    login(page, live_server, "coder1", "pw-coder1")
    page.goto(f"{live_server.url}/annotate/{assignment.pk}/")
    page.wait_for_selector("#annotation-form")
    page.wait_for_load_state()
    page.keyboard.press("2")
    page.keyboard.type("Nobody merged the children's work.")
    page.keyboard.press("Escape")

    def scrolled_away():
        page.evaluate("document.getElementById('annotation-form').scrollTop = 1e6")  # the picker's own scroll
        page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")  # the end of the pair
        page.wait_for_timeout(100)

    scrolled_away()
    expect(page.locator("#save-status")).to_contain_text("Saved", timeout=10_000)
    assert in_view(page, "#save-status")
    page.keyboard.press("Control+Enter")  # the countdown, then undone
    scrolled_away()
    assert in_view(page, "#submit-pending")
    page.keyboard.press("u")
    expect(page.locator("#submit-pending")).to_be_hidden()
    assert in_view(page, "#key-feedback")  # "Not submitted."
    # a conflict: the coding saved elsewhere; the next keystroke is refused, in view
    Annotation.objects.filter(assignment=assignment).update(version=F("version") + 1)
    page.locator("fieldset.label-card:not([hidden]) textarea[data-role=rationale]").press("End")
    page.keyboard.type(" More.")
    scrolled_away()
    expect(page.locator("#save-status")).to_contain_text("saved elsewhere", timeout=10_000)
    assert in_view(page, "#save-status")
    assert page.evaluate("document.documentElement.scrollWidth") <= width


@pytest.mark.parametrize("width", [1440, 375])
def test_a_table_wider_than_the_screen_says_that_it_scrolls(page, live_server, study, trio, width):
    """At 375 px the run list's and the queue's tables scroll inside their boxes and say so above them;
    at 1440 px the queue fits and says nothing. The page itself never scrolls sideways."""
    page.set_viewport_size({"width": width, "height": 900})
    login(page, live_server, "coder1", "pw-coder1")
    for url in ("/trajectories/", "/annotate/"):
        page.goto(live_server.url + url)
        page.wait_for_load_state()
        table = page.locator("main table.data").first
        wide = table.evaluate("t => t.scrollWidth > t.clientWidth + 1")
        hint = page.locator(".scroll-hint")
        if width == 375:
            assert wide, f"{url}: the table fits at 375 px"
            expect(hint.first).to_be_visible()
            expect(hint.first).to_contain_text("scroll it sideways")
        elif url == "/annotate/":
            assert not wide
            expect(hint).to_have_count(0)
        assert page.evaluate("document.documentElement.scrollWidth") <= width, f"{url} scrolls sideways"
