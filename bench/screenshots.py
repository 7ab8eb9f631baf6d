"""Regenerate the README screenshots: run `make demo` (or `make run` on demo data) on port 8765 first,
e.g. `DEBUG=1 .venv/bin/python manage.py runserver 127.0.0.1:8765`, then `.venv/bin/python bench/screenshots.py`."""

from __future__ import annotations

import tempfile

from playwright.sync_api import sync_playwright

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
base = "http://127.0.0.1:8765"
with sync_playwright() as p, tempfile.TemporaryDirectory() as prof:
    b = p.chromium.launch_persistent_context(
        prof, executable_path="/usr/bin/chromium", headless=True, args=ARGS, viewport={"width": 1500, "height": 950}
    )
    pg = b.new_page()
    pg.goto(base + "/accounts/login/")
    pg.fill("input[name=username]", "admin")
    pg.fill("input[name=password]", "parallax-demo")
    pg.click("button[type=submit]")
    pg.wait_for_selector("#run-table")
    pg.select_option("select[name=benchmark]", "LoopsBench")
    pg.wait_for_timeout(800)
    pg.screenshot(path="docs/img/run-list.png")
    # a hard LoopsBench concurrent run of Claude Code
    pg.goto(base + "/trajectories/?benchmark=LoopsBench&agent=Claude+Code&mode=concurrent&difficulty=hard")
    pg.click("#run-table tbody tr:first-child td:nth-child(2) a")
    pg.wait_for_selector("svg.lanes")
    pg.locator("section.side.concurrent ol.contexts details").nth(1).locator("summary").click()
    pg.wait_for_selector("section.side.concurrent .event")
    pg.evaluate("window.scrollTo(0, 0)")
    pg.screenshot(path="docs/img/run-pair.png")
    pg.goto(base + "/trajectories/?agent=Kimi+Code&benchmark=swebench_verified")
    pg.click("#run-table tbody tr:first-child td:nth-child(2) a")
    pg.wait_for_selector("svg.lanes")
    pg.locator("section.side.concurrent ol.contexts details").nth(1).locator("summary").click()
    pg.wait_for_selector("section.side.concurrent .event")
    pg.screenshot(path="docs/img/run-pair-kimi.png", full_page=False)
    # the annotate page, as annotator2
    b.clear_cookies()
    pg.goto(base + "/accounts/login/")
    pg.fill("input[name=username]", "annotator2")
    pg.fill("input[name=password]", "parallax-demo")
    pg.click("button[type=submit]")
    pg.goto(base + "/annotate/next/")
    pg.wait_for_selector("#annotation-form")
    pg.keyboard.press("/")
    pg.keyboard.type("same-file")
    pg.keyboard.press("Enter")
    pg.keyboard.type("Two workers edited src/core.py at once; the second write dropped the first one's fix.")
    pg.wait_for_timeout(1500)
    pg.evaluate("window.scrollTo(0, 0); document.querySelector('.picker').scrollTop = 0")
    pg.screenshot(path="docs/img/annotate.png")
    # the senior author's dashboard
    b.clear_cookies()
    pg.goto(base + "/accounts/login/")
    pg.fill("input[name=username]", "senior")
    pg.fill("input[name=password]", "parallax-demo")
    pg.click("button[type=submit]")
    pg.goto(base + "/annotate/studies/")
    pg.click("text=dashboard")
    pg.wait_for_selector("text=Agreement")
    pg.set_viewport_size({"width": 1500, "height": 1400})
    pg.screenshot(path="docs/img/dashboard.png")
    for i, y in enumerate((1400, 2800)):
        pg.screenshot(
            path=f"/tmp/dashboard-{i}.png", full_page=True, clip={"x": 0, "y": y, "width": 1500, "height": 1400}
        )
    b.close()
