"""A coding day of 30 people on the 10× study, over gunicorn with a real Celery worker (`make bench`; issue 29, item 5).

The study is bench/study_scale.py's (`bench 10x`: 3,540 tasks, 10,620 concurrent runs of ~80 events each,
21,240 assignments, drafts, unstarted runs, open discussions), built once in the BENCH_DATABASE_URL database
(about five minutes) and reused. Its three annotators' unstarted runs are shared out among 30 people — ten
sessions per annotator, each with runs of its own — who work as a coding day does, with think times:

* open the To-do queue (and, one time in three, page to the next 50),
* open a run: the coding page, then what it loads (both sides' timelines and agent lists) and one agent's events,
* code it: 3–6 autosaves a few seconds apart (htmx POSTs with the version the last save answered), each adding
  to a three-paragraph rationale and its evidence anchors,
* submit it (four times in five; otherwise it stays a draft) — each submit asks the worker for new statistics,
* one time in five, open one of their open discussions and comment on it.

gunicorn runs as docker-compose.yml runs it (`config.wsgi`, 3 sync workers, DEBUG=0) on 127.0.0.1:8792, the worker
(`celery -A config worker`, one process) on Redis db 13. Reports per kind of request p50/p95/max, errors (anything
unexpected, and broken connections), 409 conflicts, and lost saves: afterwards each run's stored coding must be
its last acknowledged save (version and rationale), submitted where the submit was acknowledged.
Targets (issue 29): p95 save < 300 ms, p95 coding-page open < 500 ms, 0 errors, 0 lost. Both servers are stopped
however the bench ends.
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import re
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATABASE_URL = os.environ.get("BENCH_DATABASE_URL", "")
if not DATABASE_URL.startswith(("postgres://", "postgresql://")):
    print("coding-day bench skipped: needs BENCH_DATABASE_URL=postgres://… (gunicorn and a worker on PostgreSQL)")
    sys.exit(0)
BROKER = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/13")
from bench.serving import HOST, WORKERS, celery_worker, gunicorn, server_env, stop  # noqa: E402

os.environ.update(server_env(DATABASE_URL, CELERY_BROKER_URL=BROKER))

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

from annotation.models import Annotation, Assignment, Discussion, Study  # noqa: E402
from bench.study_scale import SCALES, build_study  # noqa: E402
from taxonomy.models import Code  # noqa: E402
from taxonomy.services import codebook_load_default  # noqa: E402

PORT = 8792
PEOPLE = 30
CSRF = "codingday0123456789abcdefghijklm"  # any 32 characters: the cookie and the header must match
VERSION = re.compile(rb'name="version" id="version" value="(\d+)"')
LOADS = re.compile(rb'hx-get="([^"]+)" hx-trigger="load"')
EVENTS = re.compile(rb'<details hx-get="([^"]+)" hx-trigger="toggle once"')
NEXT_PAGE = re.compile(rb'<a rel="next" href="([^"]+)"')
PARAGRAPH = (
    "The parent handed the failing test's name to the second child but not its traceback, so the child re-ran the "
    "whole suite to find it and then edited the fixture the first child had already fixed; the two edits met in "
    "the final patch and the later one silently won. "
)


@dataclass
class Person:
    """One of the day's coders: a session of their annotator, runs of their own, what they were told."""

    name: str
    session: str
    study_id: int
    assignments: list[int]
    discussions: list[int]
    codes: list[int]
    rng: random.Random
    times: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    conflicts: int = 0
    # assignment → (version, rationale, submitted) of the last save or submit the server acknowledged
    acknowledged: dict[int, tuple[int, str, bool]] = field(default_factory=dict)

    def request(self, conn, method: str, path: str, kind: str, form: dict | None = None, htmx: bool = False):
        headers = {"Cookie": f"sessionid={self.session}; csrftoken={CSRF}"}
        if method == "POST":
            headers |= {"X-CSRFToken": CSRF, "Content-Type": "application/x-www-form-urlencoded"}
        if htmx:
            headers["HX-Request"] = "true"
        began = time.monotonic()
        try:
            conn.request(method, path, urlencode(form or {}, doseq=True) if method == "POST" else None, headers)
            response = conn.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.errors.append(f"{kind} {path}: {exc!r}")
            conn.close()  # the next request opens a new connection
            return None, b"", {}
        self.times.setdefault(kind, []).append(time.monotonic() - began)
        if response.status == 409:
            self.conflicts += 1
        elif response.status not in (200, 302):
            self.errors.append(f"{kind} {path}: HTTP {response.status} {body[:160]!r}")
        return response.status, body, dict(response.getheaders())

    def think(self, low: float, high: float, deadline: float) -> None:
        time.sleep(max(0.0, min(self.rng.uniform(low, high), deadline - time.monotonic())))

    def day(self, deadline: float) -> None:
        conn = http.client.HTTPConnection(HOST, PORT, timeout=60)
        self.think(0, 3, deadline)
        try:
            while self.assignments and time.monotonic() < deadline:
                status, body, _ = self.request(conn, "GET", f"/annotate/?study={self.study_id}&show=todo", "queue")
                match = NEXT_PAGE.search(body)
                if match and self.rng.random() < 1 / 3:
                    self.think(0.5, 1.5, deadline)
                    self.request(conn, "GET", "/annotate/" + match.group(1).decode().replace("&amp;", "&"), "queue")
                self.think(0.5, 2, deadline)
                self.code_one(conn, self.assignments.pop(0), deadline)
                if self.discussions and self.rng.random() < 0.2:
                    self.comment(conn, self.rng.choice(self.discussions), deadline)
        finally:
            conn.close()

    def code_one(self, conn, assignment_id: int, deadline: float) -> None:
        status, body, _ = self.request(conn, "GET", f"/annotate/{assignment_id}/", "open")
        match = VERSION.search(body)
        if status != 200 or not match:
            return
        version = int(match.group(1))
        agents = []
        for url in LOADS.findall(body):  # what the page loads as it opens (a browser: in parallel)
            _, fragment, _ = self.request(conn, "GET", url.decode().replace("&amp;", "&"), "fragment", htmx=True)
            agents += EVENTS.findall(fragment)
        if agents:  # the coder opens one agent's events
            self.think(0.5, 1.5, deadline)
            self.request(conn, "GET", self.rng.choice(agents).decode().replace("&amp;", "&"), "events", htmx=True)
        code = self.rng.choice(self.codes)
        rationale, anchors = "", []
        for step in range(self.rng.randint(3, 6)):
            if time.monotonic() >= deadline:
                return
            self.think(1.5, 4, deadline)
            rationale += PARAGRAPH if step < 3 else "And again. "
            anchors.append(f"agent/trajectory.jsonl:{10 + 7 * step}")
            form = self.form(version, code, rationale, anchors)
            status, body, _ = self.request(conn, "POST", f"/annotate/{assignment_id}/save/", "save", form, htmx=True)
            match = VERSION.search(body)
            if status == 200 and match:
                version = int(match.group(1))
                self.acknowledged[assignment_id] = (version, rationale, False)
        if self.rng.random() < 0.8 and time.monotonic() < deadline:
            self.think(1, 3, deadline)
            form = self.form(version, code, rationale, anchors)
            status, _, headers = self.request(
                conn, "POST", f"/annotate/{assignment_id}/submit/", "submit", form, htmx=True
            )
            if status == 200 and "HX-Redirect" in headers:  # submitted: the next run opens
                self.acknowledged[assignment_id] = (version, rationale, True)

    @staticmethod
    def form(version: int, code: int, rationale: str, anchors: list[str]) -> dict:
        return {
            "version": version,
            "code": code,
            f"rationale-{code}": rationale,
            f"evidence-{code}": "\n".join(anchors),
            "notes": "",
        }

    def comment(self, conn, discussion_id: int, deadline: float) -> None:
        self.request(conn, "GET", f"/annotate/discussions/{discussion_id}/", "discussion")
        self.think(2, 5, deadline)
        form = {"text": f"{self.name}: I read the second child's summary differently — see line 42."}
        self.request(conn, "POST", f"/annotate/discussions/{discussion_id}/comment/", "comment", form, htmx=True)


def prepare(scale: str, rng: random.Random) -> list[Person]:
    """The 30 people: each annotator's unstarted runs dealt round-robin over ten sessions of theirs."""
    call_command("migrate", verbosity=0)
    codebook = codebook_load_default()
    study = Study.objects.filter(name=f"bench {scale}").first()
    if study is None:
        print(f"building the {scale} study (once; about five minutes at 10×) …", flush=True)
        study = build_study(key=scale, tasks=SCALES[scale], codebook=codebook)
    codes = list(Code.objects.filter(codebook=study.codebook, level=Code.Level.MODE).values_list("pk", flat=True))
    people = []
    annotators = list(study.annotators.order_by("username"))
    per_annotator = PEOPLE // len(annotators)
    for annotator in annotators:
        todo = list(
            Assignment.objects.filter(study=study, annotator=annotator, annotation__isnull=True)
            .order_by("position")
            .values_list("pk", flat=True)
        )
        open_discussions = list(
            Discussion.objects.filter(study=study, status="open", run__assignments__annotator=annotator)
            .values_list("pk", flat=True)
            .distinct()[:50]
        )
        for i in range(per_annotator):
            client = Client()
            client.force_login(annotator)
            people.append(
                Person(
                    name=f"{annotator.username}#{i + 1}",
                    session=client.cookies["sessionid"].value,
                    study_id=study.pk,
                    assignments=todo[i::per_annotator],
                    discussions=open_discussions,
                    codes=codes,
                    rng=random.Random(f"{rng.random()}"),
                )
            )
    return people


def lost_saves(people: list[Person]) -> list[str]:
    """Runs whose stored coding is not the last one the server acknowledged: the same version (a submit stores the
    form once more, so a submitted coding is at a later version) and rationale, submitted if the submit was."""
    lost = []
    for person in people:
        for assignment_id, (version, rationale, submitted) in person.acknowledged.items():
            stored = Annotation.objects.filter(assignment_id=assignment_id).first()
            label = stored.labels.first() if stored else None
            same = (
                stored is not None
                and label is not None
                and label.rationale == rationale.strip()
                and stored.is_submitted == submitted
                and (stored.version >= version if submitted else stored.version == version)
            )
            if not same:
                found = (stored.version, stored.is_submitted) if stored else None
                lost.append(f"assignment {assignment_id}: stored {found}, acknowledged {(version, submitted)}")
    return lost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", default="10x", choices=sorted(SCALES))
    parser.add_argument("--seconds", type=float, default=120.0, help="how long the day lasts")
    parser.add_argument("--seed", default="coding-day")
    args = parser.parse_args()
    people = prepare(args.scale, random.Random(args.seed))
    logs = ROOT / "var" / "bench"
    logs.mkdir(parents=True, exist_ok=True)
    worker = celery_worker(logs / "coding-day-worker.log")
    server = gunicorn(PORT, logs / "coding-day-gunicorn.log")
    try:
        deadline = time.monotonic() + args.seconds
        threads = [threading.Thread(target=person.day, args=(deadline,)) for person in people]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        stop(server)
        stop(worker)
    errors = [e for p in people for e in p.errors]
    lost = lost_saves(people)
    print(
        f"\nA coding day on the {args.scale} study: {len(people)} people for {args.seconds:.0f} s; gunicorn {WORKERS} "
        f"sync workers, a Celery worker, PostgreSQL, DEBUG=0; {os.cpu_count()} CPUs for servers, database and "
        f"clients\n"
    )
    print("| request | count | p50 | p95 | max |")
    print("| --- | ---: | ---: | ---: | ---: |")
    p95 = {}
    for kind in ("queue", "open", "fragment", "events", "save", "submit", "discussion", "comment"):
        times = sorted(t for p in people for t in p.times.get(kind, []))
        if not times:
            continue
        cuts = statistics.quantiles(times, n=100, method="inclusive") if len(times) > 1 else [times[0]] * 99
        p95[kind] = cuts[94] * 1000
        p50, top = cuts[49] * 1000, times[-1] * 1000
        print(f"| {kind} | {len(times):,} | {p50:.0f} ms | {p95[kind]:.0f} ms | {top:.0f} ms |")
    submitted = sum(1 for p in people for *_, done in p.acknowledged.values() if done)
    conflicts = sum(p.conflicts for p in people)
    print(f"\nruns submitted {submitted}; errors {len(errors)}; conflicts (409) {conflicts}; lost saves {len(lost)}")
    missed = [f"p95 save {p95.get('save', 0):.0f} ms ≥ 300 ms"] * (p95.get("save", 0) >= 300)
    missed += [f"p95 open {p95.get('open', 0):.0f} ms ≥ 500 ms"] * (p95.get("open", 0) >= 500)
    missed += [f"{len(errors)} errors"] * bool(errors) + [f"{len(lost)} lost saves"] * bool(lost)
    verdict = "met" if not missed else "**missed: " + "; ".join(missed) + "**"
    print(f"targets (p95 save < 300 ms, p95 open < 500 ms, 0 errors, 0 lost): {verdict}")
    for line in (errors + lost)[:8]:
        print("  ", line)


if __name__ == "__main__":
    main()
