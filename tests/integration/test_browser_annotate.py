"""Code one run end to end with the keyboard, in Debian Chromium."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotation.models import Annotation, Assignment
from tests.integration.conftest import login, wait_until_saved

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_code_a_run_with_the_keyboard(page, live_server, study, trio):
    login(page, live_server, "coder1", "pw-coder1")
    page.goto(f"{live_server.url}/annotate/")
    page.locator("a.button", has_text="Next run").focus()
    page.keyboard.press("Enter")
    page.wait_for_selector("#annotation-form")
    page.wait_for_load_state()  # the keyboard handlers (a deferred script) are in place
    assignment_id = int(page.url.rstrip("/").split("/")[-1])
    page.keyboard.press("/")  # focus the code search
    page.keyboard.type("same-file")
    page.keyboard.press("Enter")  # picks the first match and jumps to its rationale
    page.keyboard.type("Two sub-agents wrote src/f0.py at once.")
    page.keyboard.press("Tab")
    page.keyboard.type("One edit was lost.")
    page.keyboard.press("Tab")
    page.keyboard.type("c.jsonl:6")  # a file this pair does not have
    wait_until_saved(page)
    expect(page.locator("#save-status")).to_contain_text("no file 'c.jsonl' in the concurrent run")
    page.keyboard.press("Control+Enter")
    page.keyboard.press("Control+Enter")  # again: no waiting out the undo window; refused, the coding stays saved
    expect(page.locator("#save-status")).to_contain_text("Saved, not submitted.")
    assert not Annotation.objects.get(assignment_id=assignment_id).is_submitted
    anchor = f"parallel/{Assignment.objects.get(pk=assignment_id).run.source_name}:6"
    page.keyboard.press("Control+a")
    page.keyboard.type(anchor)
    wait_until_saved(page)
    page.keyboard.press("Control+Enter")  # submit, after the undo window
    page.wait_for_url(lambda url: f"/annotate/{assignment_id}/" not in url)
    annotation = Annotation.objects.get(assignment_id=assignment_id)
    assert annotation.is_submitted and annotation.assignment.annotator == trio[0]
    label = annotation.labels.get()
    assert label.code.key == "same-file-collision"
    assert label.rationale == "Two sub-agents wrote src/f0.py at once."
    assert label.realized_consequence == "One edit was lost." and label.evidence == [anchor]


def test_draft_survives_a_reload(page, live_server, study, trio):
    login(page, live_server, "coder1", "pw-coder1")
    page.goto(f"{live_server.url}/annotate/next/")
    page.wait_for_selector("#annotation-form")
    page.keyboard.press("/")
    page.keyboard.type("lossy")
    page.keyboard.press("Enter")
    page.keyboard.type("Summary dropped the failing test name.")
    wait_until_saved(page)
    page.wait_for_timeout(1500)  # the input autosave fires after 1.2 s of quiet
    page.reload()
    page.wait_for_selector("#annotation-form")
    card = page.locator("fieldset.label-card:not([hidden])")
    assert card.count() == 1
    assert card.locator("textarea").first.input_value() == "Summary dropped the failing test name."


def test_enter_in_search_never_unpicks(page, live_server, study, trio):
    login(page, live_server, "coder1", "pw-coder1")
    page.goto(f"{live_server.url}/annotate/next/")
    page.wait_for_selector("#annotation-form")
    for _ in range(2):  # pick the same mode twice: it stays picked and the typing lands in its rationale
        page.keyboard.press("Control+k")  # search from anywhere, even from inside a text field
        page.keyboard.type("stale")
        page.keyboard.press("Enter")
    page.keyboard.type("x")
    assert page.locator("input[name=code]:checked").count() == 1
    assert page.locator("#code-search").input_value() == ""
    assert page.locator("fieldset.label-card:not([hidden]) textarea").first.input_value() == "x"


def test_cite_an_event_as_evidence(page, live_server, study, trio):
    login(page, live_server, "coder1", "pw-coder1")
    page.goto(f"{live_server.url}/annotate/next/")
    page.wait_for_selector("#annotation-form")
    page.keyboard.press("/")
    page.keyboard.type("source overwrite")
    page.keyboard.press("Enter")
    side = page.locator("section.side.concurrent")
    side.locator("ol.contexts details").nth(1).locator("summary").click()  # the first sub-agent
    side.locator(".event .cite").first.click()
    evidence = page.locator("fieldset.label-card:not([hidden]) textarea[data-role=evidence]")
    assert evidence.input_value().endswith(".jsonl:6")
    # and from the evidence back to the event: the cited line opens in a new tab, with its events
    with page.context.expect_page() as opened:
        page.locator("fieldset.label-card:not([hidden]) [data-jump=evidence]").click()
    cited = opened.value
    cited.wait_for_load_state()
    assert "/files/" in cited.url and "line=6" in cited.url
    expect(cited.locator("body")).to_contain_text("line 6")


def test_a_second_episode_is_added_cited_into_and_removed(page, live_server, study, trio):
    login(page, live_server, "coder1", "pw-coder1")
    page.goto(f"{live_server.url}/annotate/next/")
    page.wait_for_selector("#annotation-form")
    page.wait_for_load_state()
    assignment_id = int(page.url.rstrip("/").split("/")[-1])
    page.keyboard.press("/")
    page.keyboard.type("lossy")
    page.keyboard.press("Enter")
    page.keyboard.type("The first handoff lost the test name.")
    card = page.locator("fieldset.label-card:not([hidden])")
    expect(card.locator("[data-remove-instance]")).to_be_hidden()  # one episode: nothing to remove
    card.locator("[data-add-instance]").click()  # the new episode's rationale has the focus
    page.keyboard.type("The second handoff lost the stack trace.")
    side = page.locator("section.side.concurrent")
    side.locator("ol.contexts details").nth(1).locator("summary").click()
    side.locator(".event .cite").first.click()  # cited into the episode last edited: the second
    wait_until_saved(page)
    page.wait_for_timeout(1500)  # the input autosave fires after 1.2 s of quiet
    wait_until_saved(page)
    labels = list(Annotation.objects.get(assignment_id=assignment_id).labels.order_by("instance"))
    assert [(x.instance, x.rationale) for x in labels] == [
        (1, "The first handoff lost the test name."),
        (2, "The second handoff lost the stack trace."),
    ]
    assert labels[0].evidence == [] and labels[1].evidence[0].endswith(".jsonl:6")
    # removing the first renumbers the second as episode 1, and that is what is saved
    card.locator(".instance").first.locator("[data-remove-instance]").click()
    expect(card.locator(".instance")).to_have_count(1)
    expect(card.locator("[data-role=number]")).to_have_text("1")
    page.wait_for_timeout(500)
    wait_until_saved(page)
    page.reload()
    page.wait_for_selector("#annotation-form")
    rationale = page.locator("fieldset.label-card:not([hidden]) textarea[data-role=rationale]")
    expect(rationale).to_have_count(1)
    assert rationale.input_value() == "The second handoff lost the stack trace."


def test_submit_right_after_typing_wins_over_autosave(page, live_server, study, trio, monkeypatch):
    """Ctrl+Enter while an autosave is in flight: the submit queues behind it, never beside it — the server
    sees the saves and the submit one after another, the submit last, with what was typed."""
    import itertools
    import threading
    import time

    from annotation.views import coding as views

    real_save, real_submit = views.annotation_save, views.annotation_submit
    seen: list[tuple[str, float, float]] = []
    lock = threading.Lock()

    def slow_save(**kwargs):  # every save (an autosave, or the submit's own save first) takes 1.5 s on the server
        started = time.monotonic()
        time.sleep(1.5)
        real_save(**kwargs)
        with lock:
            seen.append(("save", started, time.monotonic()))

    def timed_submit(**kwargs):
        started = time.monotonic()
        real_submit(**kwargs)
        with lock:
            seen.append(("submit", started, time.monotonic()))

    monkeypatch.setattr(views, "annotation_save", slow_save)
    monkeypatch.setattr(views, "annotation_submit", timed_submit)
    login(page, live_server, "coder1", "pw-coder1")
    page.goto(f"{live_server.url}/annotate/next/")
    page.wait_for_selector("#annotation-form")
    assignment_id = int(page.url.rstrip("/").split("/")[-1])
    page.clock.install()  # the page's timers (the typing's autosave delay, the undo window) run when the test says
    page.keyboard.press("/")
    page.keyboard.type("artifact")
    page.keyboard.press("Enter")  # the checkbox change sends an autosave now: 1.5 s on the server
    page.keyboard.type("Build output leaked between children.")
    page.keyboard.press("Control+Enter")
    page.clock.run_for(4500)  # the typing's autosave and then the submit are sent while the first save is in flight
    page.wait_for_url(lambda url: f"/annotate/{assignment_id}/" not in url, timeout=30_000)
    annotation = Annotation.objects.get(assignment_id=assignment_id)
    assert annotation.is_submitted
    assert annotation.labels.get().rationale == "Build output leaked between children."
    kinds = [kind for kind, _, _ in seen]
    assert kinds[-1] == "submit" and kinds.count("save") >= 2, seen
    ordered = sorted(seen, key=lambda entry: entry[1])
    for (_, _, ended), (kind, started, _) in itertools.pairwise(ordered):
        assert started >= ended, f"a {kind} ran beside the request before it: {seen}"


def test_two_tabs_on_one_coding_lose_nothing(page, live_server, study, trio):
    login(page, live_server, "coder1", "pw-coder1")
    page.goto(f"{live_server.url}/annotate/next/")
    page.wait_for_selector("#annotation-form")
    url = page.url
    assignment_id = int(url.rstrip("/").split("/")[-1])
    second = page.context.new_page()
    second.goto(url)
    second.wait_for_selector("#annotation-form")
    second.wait_for_load_state()
    for tab, text in ((page, "Tab one's reading."), (second, "Tab two's reading.")):
        tab.bring_to_front()
        tab.keyboard.press("/")
        tab.keyboard.type("lossy")
        tab.keyboard.press("Enter")
        tab.keyboard.type(text)
        if tab is page:  # until tab one's typing is stored, not only its pick (which saves first)
            for _ in range(100):
                stored = Annotation.objects.filter(assignment_id=assignment_id).first()
                if stored and stored.labels.filter(rationale=text).exists():
                    break
                page.wait_for_timeout(100)
    expect(second.locator("#save-status")).to_contain_text("saved elsewhere")
    expect(second.locator("#save-status")).to_contain_text("Tab one's reading.")
    second.keyboard.type(" And more.")  # the next autosave is refused as well: tab one's save stands
    second.wait_for_timeout(2000)
    label = Annotation.objects.get(assignment_id=assignment_id).labels.get()
    assert label.rationale == "Tab one's reading."
    second.click("[data-keep-mine]")
    expect(second.locator("#save-status")).to_contain_text("Saved · version")
    label = Annotation.objects.get(assignment_id=assignment_id).labels.get()
    assert label.rationale == "Tab two's reading. And more."


def test_a_save_the_server_fails_is_said_and_nothing_typed_is_lost(page, live_server, study, trio):
    login(page, live_server, "coder1", "pw-coder1")
    page.goto(f"{live_server.url}/annotate/next/")
    page.wait_for_selector("#annotation-form")
    page.wait_for_load_state()
    page.route("**/save/", lambda route: route.fulfill(status=500, body="boom"))
    page.keyboard.press("/")
    page.keyboard.type("lossy")
    page.keyboard.press("Enter")
    page.keyboard.type("Kept on the page.")
    expect(page.locator("#save-status")).to_contain_text("Not saved: the server failed (500)")
    card = page.locator("fieldset.label-card:not([hidden])")
    assert card.locator("textarea").first.input_value() == "Kept on the page."
    page.unroute("**/save/")
    page.keyboard.type(" Again.")  # the next change saves
    wait_until_saved(page)


def test_show_the_hints_and_cite_one_of_their_events(page, live_server, study, trio):
    """Under `always`: the panel offers the hints, one click shows them in place (recorded), and a hint's
    "cite" adds its event to the episode being written, as the events list's "cite" does."""
    from annotation.models import Study

    Study.objects.filter(pk=study.pk).update(hint_policy="always")
    login(page, live_server, "coder1", "pw-coder1")
    page.goto(f"{live_server.url}/annotate/next/")
    page.wait_for_selector("#annotation-form")
    page.wait_for_load_state()
    assignment_id = int(page.url.rstrip("/").split("/")[-1])
    expect(page.locator("#hints")).not_to_contain_text("unisolated_workspace_writes")
    page.locator("#show-hints").click()
    expect(page.locator("#hints .hint-list")).to_contain_text("unisolated_workspace_writes")
    page.keyboard.press("/")
    page.keyboard.type("unisolated")
    page.keyboard.press("Enter")
    page.locator("#hints .cite").first.click()
    evidence = page.locator("fieldset.label-card:not([hidden]) textarea[data-role=evidence]")
    assert evidence.input_value() == page.locator("#hints .cite").first.get_attribute("data-anchor")
    cited = evidence.input_value()
    wait_until_saved(page)
    for _ in range(100):  # the pick saved first; the cite's own save lands a moment later
        labels = list(Annotation.objects.get(assignment_id=assignment_id).labels.all())
        if labels and labels[0].evidence == [cited]:
            break
        page.wait_for_timeout(100)
    annotation = Annotation.objects.get(assignment_id=assignment_id)
    assert annotation.hints_seen_at is not None and annotation.labels.get().evidence == [cited]


def test_a_mode_picked_on_the_page_gets_its_own_card(page, live_server, study, trio):
    """A mode's card is made when it is first picked: its name and definition, its fields named for it,
    every other mode offered as the nearest rejected one; picked after another, it takes its place in the
    picker's order; what is typed in it is saved for that mode and shown again after a reload."""
    login(page, live_server, "coder1", "pw-coder1")
    page.goto(f"{live_server.url}/annotate/next/")
    page.wait_for_selector("#annotation-form")
    page.wait_for_load_state()
    assignment_id = int(page.url.rstrip("/").split("/")[-1])
    codebook = Assignment.objects.get(pk=assignment_id).study.codebook
    lossy, same = codebook.codes.get(key="lossy-handoff"), codebook.codes.get(key="same-file-collision")
    page.locator(f'input[name=code][value="{lossy.pk}"]').check()
    page.locator(f'input[name=code][value="{same.pk}"]').check()
    cards = page.locator("fieldset.label-card:not([hidden])")
    expect(cards).to_have_count(2)
    order = [int(x) for x in cards.evaluate_all("nodes => nodes.map(n => n.dataset.code)")]
    picker = [int(x) for x in page.locator("input[name=code]").evaluate_all("nodes => nodes.map(n => n.value)")]
    assert order == sorted(order, key=picker.index)  # the picker's order, whichever was picked first
    card = page.locator(f"#card-{same.pk}")
    expect(card.locator("legend")).to_have_text(same.name)
    expect(card).to_contain_text(same.definition[:40])
    rejected = card.locator(f"select[name=rejected-{same.pk}]")
    offered = rejected.locator("option").evaluate_all("nodes => nodes.map(n => n.value)")
    assert str(same.pk) not in offered and str(lossy.pk) in offered
    rejected.select_option(str(lossy.pk))
    card.locator(f"textarea[name=rationale-{same.pk}]").fill("Both children wrote src/f0.py.")
    page.locator(f"#card-{lossy.pk} textarea[name=rationale-{lossy.pk}]").fill("The summary lost the test name.")
    page.wait_for_timeout(1500)  # the input autosave fires after 1.2 s of quiet
    wait_until_saved(page)
    labels = {x.code_id: x for x in Annotation.objects.get(assignment_id=assignment_id).labels.all()}
    assert (
        labels[same.pk].rationale == "Both children wrote src/f0.py."
        and labels[same.pk].nearest_rejected_id == lossy.pk
    )
    assert labels[lossy.pk].rationale == "The summary lost the test name."
    page.reload()
    page.wait_for_selector("#annotation-form")
    expect(page.locator(f"#card-{same.pk} select[name=rejected-{same.pk}]")).to_have_value(str(lossy.pk))
