"""Real browser: Debian Chromium driven by Playwright (no downloaded browser)."""

from __future__ import annotations

import pytest

from tests.factories import simple_run, submit_disagreement, write_jsonl
from tests.integration.conftest import login
from trajectories.models import Run
from trajectories.services import import_paths

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_browse_a_pair_timeline_and_events(page, live_server, admin_user, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", simple_run("t-browser", "concurrent", n_sub=3))
    write_jsonl(tmp_path / "s.jsonl", simple_run("t-browser", "sequential", n_sub=0))
    import_paths(paths=[tmp_path])
    login(page, live_server, "boss", "pw-boss")
    page.wait_for_selector("text=t-browser")
    # htmx filter: choose sequential, the table is swapped in place
    page.select_option("select[name=mode]", "sequential")
    page.wait_for_selector("#run-table >> text=1 run")
    page.click("#run-table >> text=t-browser")
    page.wait_for_selector("section.side.concurrent svg.lanes")  # the timeline fragment has arrived
    assert page.locator("section.side.concurrent rect.bar.sub").count() == 3
    # expand a sub-agent: its events load lazily through htmx
    page.locator("section.side.concurrent ol.contexts details").nth(1).locator("summary").click()
    page.wait_for_selector("section.side.concurrent .event.file_write")
    assert "src/f0.py" in page.locator("section.side.concurrent .event.file_write").first.inner_text()
    concurrent = Run.objects.get(mode="concurrent")
    assert str(concurrent.pk) in page.content()


HOSTILE = [
    "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>",
    "</script><script>document.title='pwned'</script>",
    "<a href=\"javascript:document.title='pwned'\">click me</a>",
    "\x1b[31mred ANSI\x1b[0m and a bell \x07",
    "x" * 150_000,  # a huge line: cut to 20,000 characters with a marker
]


def test_hostile_trajectory_text_never_executes(page, live_server, admin_user, tmp_path):
    from tests.factories import ctx, ev, header, t

    lines = [header("xss"), ctx("main", start=t(0), end=t(5), label=HOSTILE[0])]
    lines += [ev("main", i, t(i), "message", text=text, tool=HOSTILE[1][:90]) for i, text in enumerate(HOSTILE)]
    lines.append(ev("main", len(HOSTILE), t(9), "file_write", files=[HOSTILE[2]]))
    import_paths(paths=[write_jsonl(tmp_path / "x.jsonl", lines)])
    run = Run.objects.get()
    login(page, live_server, "boss", "pw-boss")
    for path in ("/trajectories/", f"/trajectories/runs/{run.pk}/"):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
    page.locator("ol.contexts summary").first.click()
    page.wait_for_selector(".event.file_write")
    assert page.title() != "pwned"
    assert page.locator("a[href^='javascript:']").count() == 0
    assert page.locator(".event img, .event script").count() == 0
    texts = page.locator(".event.message pre, .event.message summary").all_inner_texts()
    assert any("<script>document.title" in text for text in texts)
    assert any("more characters cut by Parallax" in text for text in page.locator(".event pre").all_text_contents())


def test_hostile_text_in_comments_and_rationales_is_escaped(page, live_server, study, trio, codebook):
    from annotation.models import Assignment, Label

    run = study.runs.order_by("pk").first()
    discussion = submit_disagreement(study, run.pk, codebook, rationale=HOSTILE[0])
    # Anchors as the study's published records may hold them (kept as written, never refused).
    Label.objects.filter(annotation__assignment__run=run).update(evidence=[HOSTILE[2]], contrast=[HOSTILE[1]])
    pair = list(Assignment.objects.filter(study=study, run=run).order_by("slot"))
    user = pair[0].annotator
    login(page, live_server, user.username, f"pw-{user.username}")
    page.goto(f"{live_server.url}/annotate/discussions/{discussion.pk}/")
    page.fill("#comments textarea[name=text]", HOSTILE[1])
    page.click("#comments button[type=submit]")
    page.wait_for_selector(".comment")
    assert page.title() != "pwned" and page.locator("a[href^='javascript:']").count() == 0
    assert "</script><script>" in page.locator(".comment").first.inner_text()
    anchors = page.locator("a.anchor")
    assert anchors.count() == 4 and HOSTILE[2] in anchors.first.inner_text()
    assert all(
        href.startswith(f"/trajectories/runs/{run.pk}/anchor/?a=")
        for href in (a.get_attribute("href") for a in anchors.all())
    )
