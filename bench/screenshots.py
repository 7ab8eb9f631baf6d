"""Screenshots of every page, as every role that sees it, at 1440 and 375 px — and the README's images.

Serve the demo first (`make demo`, or `make demo-data` then `make run`), then:

    .venv/bin/python bench/screenshots.py                 # every page → var/screenshots/, with a report
    .venv/bin/python bench/screenshots.py --readme        # also refresh docs/img/*.png (the README's)
    .venv/bin/python bench/screenshots.py --base http://127.0.0.1:8766   # a demo served elsewhere (or PORT=8766)

The report lists each page, its status, and what is wrong with it: a page that scrolls sideways, shows
literal template text ({% … %}, {{ … }}, {# … #}) or the word "None". It exits 1 when any page has a
problem. Look at the pictures too: a report cannot see an overlap.

Run it against the demo only: --readme types a rationale into annotator2's next run, and autosave stores it.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]  # fmt: skip
PASSWORD = "parallax-demo"
WIDTHS = (1440, 375)
# role -> pages: a path, or (name, start path, link(s) to follow) for pages reached through a list
PAGES: dict[str, list] = {
    "admin": [
        "/trajectories/",
        ("pair", "/trajectories/?mode=concurrent&benchmark=LoopsBench", "#run-table tbody a[href*='/runs/']"),
        "/trajectories/imports/",
        "/codebooks/",
        ("codebook", "/codebooks/", "main a[href*='/codebooks/']"),
        "/annotate/studies/",
        ("dashboard", "/annotate/studies/", "main a[href$='/annotate/studies/1/']"),
        "/annotate/studies/new/",
        "/annotate/studies/1/manage/",
        "/annotate/studies/1/settings/",
        "/annotate/studies/1/codebook/",
        "/annotate/studies/1/suggestions/",
        "/no-such-page/",
    ],
    "senior": [
        "/annotate/adjudication/",
        ("adjudicate", "/annotate/adjudication/", "main a[href*='/annotate/adjudication/']"),
        "/annotate/studies/",
        "/annotate/studies/1/",
        "/annotate/studies/1/advantage/",
        "/annotate/studies/1/suggestions/",
        "/annotate/adjudication/?order=uncertainty",
        (
            "adjudicate most uncertain",
            "/annotate/adjudication/?order=uncertainty",
            "main a[href*='/annotate/adjudication/']",
        ),
        "/annotate/studies/new/",
        "/annotate/studies/1/manage/",
        "/annotate/studies/1/settings/",
        "/annotate/studies/1/codebook/",
        (
            "run history",
            "/annotate/adjudication/",
            ("main a[href*='/annotate/adjudication/']", "main a[href*='/history/']"),
        ),
        "/trajectories/imports/",
    ],
    "annotator1": [
        ("queue", "/annotate/", None),
        ("annotate", "/annotate/next/", None),
        "/annotate/discussions/",
        ("discussion", "/annotate/discussions/?tab=escalated", "main td a[href*='/annotate/discussions/']"),
        "/trajectories/",
        "/annotate/studies/1/",
        "/annotate/studies/1/manage/",
    ],
}
TEMPLATE_TEXT = re.compile(r"\{%|%\}|\{\{|\}\}|\{#|#\}")


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "home"


def log_in(page, base: str, user: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("text=Log out")


def visit(page, base: str, entry) -> tuple[str, int | None]:
    if isinstance(entry, str):
        response = page.goto(base + entry)
        return slug(entry), response.status if response else None
    name, start, links = entry
    response = page.goto(base + start)
    for link in (links,) if isinstance(links, str) else links or ():
        target = page.locator(link).first
        if not target.count():
            return slug(name), None
        response = page.goto(base + target.get_attribute("href"))
    return slug(name), response.status if response else None


def problems(page, width: int) -> list[str]:
    found = []
    if page.evaluate("document.documentElement.scrollWidth") > width:
        found.append(f"scrolls sideways ({page.evaluate('document.documentElement.scrollWidth')} px)")
    text = page.evaluate("document.body.innerText")
    if TEMPLATE_TEXT.search(text):
        found.append("literal template text")
    if re.search(r"\bNone\b", text):
        found.append('shows "None"')
    return found


def every_page(base: str, out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    failures = 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=ARGS)
        for user, entries in PAGES.items():
            for width in WIDTHS:
                page = browser.new_context(viewport={"width": width, "height": 900}).new_page()
                log_in(page, base, user)
                for entry in entries:
                    name, status = visit(page, base, entry)
                    if status is None:
                        print(f"{user:11} {width:5} {name:28} (no such link in the demo data: skipped)")
                        continue
                    page.wait_for_load_state("networkidle")
                    found = problems(page, width)
                    failures += bool(found)
                    page.screenshot(path=str(out / f"{user}-{name}-{width}.png"), full_page=True)
                    print(f"{user:11} {width:5} {name:28} {status}  {'; '.join(found) or 'ok'}")
                page.context.close()
        browser.close()
    print(f"{failures} page(s) with a problem; screenshots in {out}/")
    return failures


def readme_images(base: str) -> None:
    """The README's pictures (docs/img), at 1500 px."""
    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        context = p.chromium.launch_persistent_context(
            profile, executable_path="/usr/bin/chromium", headless=True, args=ARGS,
            viewport={"width": 1500, "height": 950},
        )  # fmt: skip
        pg = context.new_page()
        log_in(pg, base, "admin")
        pg.goto(base + "/trajectories/?benchmark=LoopsBench")
        pg.wait_for_selector("#run-table")
        pg.screenshot(path="docs/img/run-list.png")
        # a hard LoopsBench concurrent run of Claude Code
        pg.goto(base + "/trajectories/?benchmark=LoopsBench&agent=Claude+Code&mode=concurrent&difficulty=hard")
        pg.click("#run-table tbody tr:first-child td:nth-child(2) a")
        pg.wait_for_selector("svg.lanes")
        pg.locator("section.side.concurrent ol.contexts details").nth(1).locator("summary").click()
        pg.wait_for_selector("section.side.concurrent .event")
        pg.evaluate("window.scrollTo(0, 0)")
        pg.screenshot(path="docs/img/run-pair.png")
        pg.goto(base + "/trajectories/?agent=Kimi+Code&benchmark=SWE-bench+Verified&mode=concurrent")
        pg.click("#run-table tbody tr:first-child td:nth-child(2) a")
        pg.wait_for_selector("svg.lanes")
        pg.locator("section.side.concurrent ol.contexts details").nth(1).locator("summary").click()
        pg.wait_for_selector("section.side.concurrent .event")
        pg.screenshot(path="docs/img/run-pair-kimi.png")
        # the annotate page, as annotator2: a number key picks a code, its rationale is typed
        context.clear_cookies()
        log_in(pg, base, "annotator2")
        pg.goto(base + "/annotate/next/")
        pg.wait_for_selector("#annotation-form")
        pg.wait_for_load_state("networkidle")
        pg.keyboard.press("/")
        pg.keyboard.type("same-file")
        pg.keyboard.press("Enter")
        pg.keyboard.type("Two workers edited src/core.py at once; the second write dropped the first one's fix.")
        pg.wait_for_timeout(1500)
        pg.evaluate("window.scrollTo(0, 0); document.querySelector('.picker').scrollTop = 0")
        pg.screenshot(path="docs/img/annotate.png")
        # the senior author's dashboard
        context.clear_cookies()
        log_in(pg, base, "senior")
        pg.goto(base + "/annotate/studies/1/")
        pg.wait_for_selector("text=Agreement")
        pg.set_viewport_size({"width": 1500, "height": 1400})
        pg.screenshot(path="docs/img/dashboard.png")
        context.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    port = os.environ.get("PORT", "8000")
    parser.add_argument("--base", default=f"http://127.0.0.1:{port}", help="the demo (default: make demo's, on PORT)")
    parser.add_argument("--out", type=Path, default=Path("var/screenshots"))
    parser.add_argument("--readme", action="store_true", help="also refresh the README's images in docs/img/")
    options = parser.parse_args()
    failures = every_page(options.base.rstrip("/"), options.out)
    if options.readme:
        readme_images(options.base.rstrip("/"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
