"""Two annotators disagree, discuss, escalate; the senior author adjudicates — in Chromium."""

from __future__ import annotations

import pytest

from annotation.models import Assignment, Discussion, FinalCoding
from tests.integration.test_browser import login, page, wait_until_saved  # noqa: F401 - `page` is a fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def code_with_keyboard(page, live_server, assignment, search, rationale):  # noqa: F811
    page.goto(f"{live_server.url}/annotate/{assignment.pk}/")
    page.wait_for_selector("#annotation-form")
    page.keyboard.press("/")
    page.keyboard.type(search)
    page.keyboard.press("Enter")
    page.keyboard.type(rationale)
    wait_until_saved(page)
    page.keyboard.press("Control+Enter")
    page.wait_for_url(lambda url: f"/annotate/{assignment.pk}/" not in url)


def logout(page, live_server):  # noqa: F811
    page.context.clear_cookies()


def test_disagreement_discussion_escalation_adjudication(page, live_server, study, trio, adjudicator):  # noqa: F811
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
    stale = study.codebook.codes.get(key="stale-handoff")
    page.check(f"#adjudication-form input[name=code][value='{stale.pk}']")
    page.fill(f"#adjudication-form textarea[name=rationale-{stale.pk}]", "The brief predates the refactor.")
    page.click("#adjudication-form button[type=submit]")
    page.wait_for_selector("text=adjudicated")
    final = FinalCoding.objects.get(run=run)
    assert final.provenance == "adjudicated" and final.decided_by == adjudicator
    assert [fl.code.key for fl in final.labels.all()] == ["stale-handoff"]
    discussion.refresh_from_db()
    assert discussion.status == "adjudicated"
