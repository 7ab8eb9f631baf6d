"""Two annotators disagree, discuss, escalate; the senior author adjudicates — in Chromium."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotation.models import Assignment, Discussion, FinalCoding
from tests.factories import cite, submit_disagreement
from tests.integration.conftest import login, wait_until_saved

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def code_with_keyboard(page, live_server, assignment, search, rationale):
    page.goto(f"{live_server.url}/annotate/{assignment.pk}/")
    page.wait_for_selector("#annotation-form")
    page.keyboard.press("/")
    page.keyboard.type(search)
    page.keyboard.press("Enter")
    page.keyboard.type(rationale)
    wait_until_saved(page)
    page.keyboard.press("Control+Enter")
    page.keyboard.press("Control+Enter")  # again: at once (the undo window is test_browser_keys')
    page.wait_for_url(lambda url: f"/annotate/{assignment.pk}/" not in url)


def logout(page, live_server):
    page.context.clear_cookies()


def test_disagreement_discussion_escalation_adjudication(page, live_server, study, trio, adjudicator):
    page.on("dialog", lambda dialog: dialog.accept())
    run = study.runs.order_by("pk").first()
    first, second = Assignment.objects.filter(study=study, run=run).order_by("slot").select_related("annotator")
    passwords = {u.username: f"pw-{u.username}" for u in trio}

    login(page, live_server, first.annotator.username, passwords[first.annotator.username])
    code_with_keyboard(page, live_server, first, "lossy", "The summary dropped the failing test.")
    logout(page, live_server)

    login(page, live_server, second.annotator.username, passwords[second.annotator.username])
    code_with_keyboard(page, live_server, second, "stale handoff", "The brief described the old layout.")
    discussion = Discussion.objects.get(run=run)
    page.goto(f"{live_server.url}/annotate/discussions/")
    page.click(f"a[href='/annotate/discussions/{discussion.pk}/']")
    assert page.locator("table.compare tr.differs").count() == 2  # each picked a mode the other did not
    assert "The summary dropped the failing test." in page.content()  # now both see both
    page.fill("#comments textarea[name=text]", "I still think the brief was stale.")
    page.click("#comments button[type=submit]")
    page.wait_for_selector("#comments >> text=I still think the brief was stale.")
    assert page.locator("button[value=consensus]").is_disabled()  # the sets still differ
    page.click("button[value=escalate]")
    page.wait_for_selector("text=Escalated to the senior adjudicator")
    logout(page, live_server)

    login(page, live_server, adjudicator.username, f"pw-{adjudicator.username}")
    page.goto(f"{live_server.url}/annotate/adjudication/")
    page.click(f"a[href='/annotate/adjudication/{discussion.pk}/']")
    # the two proposals are highlighted, first, each with who proposed it and their evidence
    proposed = page.locator(".proposed-list .ruling-mode.proposed")
    assert proposed.count() == 2
    stale_row = page.locator(".ruling-mode[data-key='stale-handoff']")
    expect(stale_row).to_contain_text(f"proposed by {second.annotator.username}")
    assert stale_row.locator(".proposals a.anchor").count() == 0  # typed without anchors: none shown
    # search ranks the name before the definitions: "critical" + Enter picks Critical-Path Starvation
    page.wait_for_load_state()  # the page's keys are bound once its scripts have run (CI, loaded, pressed "/" sooner)
    page.keyboard.press("/")
    page.keyboard.type("critical")
    assert page.locator(".ruling-mode.best").get_attribute("data-key") == "critical-path-starvation"
    page.keyboard.press("Enter")
    critical = study.codebook.codes.get(key="critical-path-starvation")
    assert page.evaluate("document.activeElement.name") == f"rationale-{critical.pk}"
    assert page.locator(".ruling-mode:not([hidden])").count() == 32  # the search is cleared
    page.keyboard.type("The main agent idled on the slowest worker.")
    stale = study.codebook.codes.get(key="stale-handoff")
    page.check(f"#adjudication-form input[name=code][value='{stale.pk}']")
    page.fill(f"#adjudication-form textarea[name=rationale-{stale.pk}]", "The brief predates the refactor.")
    page.fill(f"#adjudication-form textarea[name=evidence-{stale.pk}]", "nope.txt:1")
    page.click("#adjudication-form button[type=submit]")
    expect(page.locator(".form-errors")).to_contain_text("'Stale Handoff' evidence: nope.txt:1: no file")
    assert page.input_value(f"textarea[name=rationale-{critical.pk}]") == "The main agent idled on the slowest worker."
    page.fill(f"#adjudication-form textarea[name=evidence-{stale.pk}]", cite(run, "stale-handoff"))
    page.fill(f"#adjudication-form textarea[name=consequence-{stale.pk}]", "The worker rebuilt the old layout.")
    page.click("#adjudication-form button[type=submit]")
    page.wait_for_selector("text=adjudicated: the final labels are below")
    # a finished case is read-only: the final labels, who decided and when; no form
    assert page.locator("#adjudication-form").count() == 0
    expect(page.locator("#final-coding")).to_contain_text(f"Adjudicated by {adjudicator.username}")
    expect(page.locator("#final-coding")).to_contain_text("The worker rebuilt the old layout.")
    final = FinalCoding.objects.get(run=run)
    assert final.provenance == "adjudicated" and final.decided_by == adjudicator
    assert [fl.code.key for fl in final.labels.all()] == ["critical-path-starvation", "stale-handoff"]
    assert final.labels.get(code=stale).evidence == [cite(run, "stale-handoff")]
    discussion.refresh_from_db()
    assert discussion.status == "adjudicated"
    logout(page, live_server)

    # the annotators see the outcome on their discussion page; the annotate page says the coding is locked
    login(page, live_server, first.annotator.username, passwords[first.annotator.username])
    page.goto(f"{live_server.url}/annotate/discussions/{discussion.pk}/")
    expect(page.locator("#final-coding")).to_contain_text("The brief predates the refactor.")
    expect(page.locator("#final-coding")).to_contain_text(adjudicator.username)
    page.goto(f"{live_server.url}/annotate/{first.pk}/")
    expect(page.locator("#save-status")).to_contain_text("locked: adjudicated, the final labels are recorded")


def test_revising_in_a_discussion_says_so_and_the_discussion_shows_it(page, live_server, study, codebook):
    run = study.runs.order_by("pk").first()
    discussion = submit_disagreement(study, run.pk, codebook, rationale="FIRST-RATIONALE")
    first = Assignment.objects.get(study=study, run=run, slot=1)
    login(page, live_server, first.annotator.username, f"pw-{first.annotator.username}")
    page.goto(f"{live_server.url}/annotate/discussions/{discussion.pk}/")
    page.click("text=Revise my coding")
    page.wait_for_selector("#annotation-form")
    expect(page.locator("#save-status")).to_contain_text("under discussion: your changes are saved as a revision")
    assert "locked" not in page.locator("#save-status").inner_text()
    page.keyboard.press("/")
    page.keyboard.type("stale handoff")
    page.keyboard.press("Enter")
    page.keyboard.type("Convinced: the brief was stale.")
    expect(page.locator("#save-status")).to_contain_text("Saved as a revision · version")
    page.goto(f"{live_server.url}/annotate/discussions/{discussion.pk}/")
    change = page.locator("#coding-changes .coding-change").first
    expect(change.locator("li.added")).to_contain_text("Stale Handoff")
    expect(change.locator("li.added")).to_contain_text("Convinced: the brief was stale.")
