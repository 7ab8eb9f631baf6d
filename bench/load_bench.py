"""30 annotators autosaving at once, over gunicorn on PostgreSQL (`make bench`; issue 17, item 5).

Builds (or reuses) ten small studies of three annotators each — `load-ann01` … `load-ann30`, one
adjudicator, the same 15 runs (bench/study_scale.py) — in the BENCH_DATABASE_URL database, next to
whatever is there. Starts gunicorn as docker-compose.yml runs it (`config.wsgi`, 3 workers) on
127.0.0.1:8791 with DEBUG=0, logs each annotator in server-side (a session made as a login makes
it), and has each autosave its draft for --seconds the way the annotate page does: an htmx POST
of the form with the `version` the last save answered (a 409 is a conflict: the version was
stale), the next one --pause seconds after the answer (the form saves 1.2 s after typing stops:
`hx-trigger="input delay:1200ms"`; --pause 0 saturates the server instead). The annotators start
spread over one pause; the first --warmup seconds are not counted. Reports saves, saves/s, p50/p95/p99, errors
(anything but 200 and 409, and broken connections), conflicts, and lost updates: afterwards each
annotator's stored draft must be its last acknowledged save (version, notes, rationale).
Targets: p95 < 300 ms, 0 errors, 0 lost. gunicorn is stopped however the bench ends.
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
    print("load bench skipped: needs BENCH_DATABASE_URL=postgres://… (it runs gunicorn against PostgreSQL)")
    sys.exit(0)
from bench.serving import HOST, WORKERS, gunicorn, server_env, stop  # noqa: E402

os.environ.update(server_env(DATABASE_URL))

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import Group, User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

from accounts.roles import ADJUDICATOR, ANNOTATOR  # noqa: E402
from annotation.models import Annotation, Assignment, Study  # noqa: E402
from annotation.services.studies import study_assign, study_create  # noqa: E402
from bench.study_scale import corpus  # noqa: E402
from taxonomy.models import Code  # noqa: E402
from taxonomy.services import codebook_load_default  # noqa: E402
from trajectories.models import Run  # noqa: E402

PORT = 8791
ANNOTATORS = 30
CSRF = "loadbench0123456789abcdefghijklm"  # any 32 characters: the cookie and the header must match
VERSION = re.compile(rb'name="version" id="version" value="(\d+)"')


def prepare() -> list[Assignment]:
    """One assignment per load annotator (its first), creating the studies if they are missing."""
    call_command("migrate", verbosity=0)
    codebook = codebook_load_default()
    if not Run.objects.filter(task__external_id__startswith="load-").exists():
        corpus(key="load", tasks=5, rng=random.Random("load"))
    run_ids = list(
        Run.objects.filter(task__external_id__startswith="load-", mode="concurrent").values_list("pk", flat=True)
    )
    annotator, adjudicator = (Group.objects.get_or_create(name=role)[0] for role in (ANNOTATOR, ADJUDICATOR))
    senior, _ = User.objects.get_or_create(username="load-senior")
    senior.groups.add(adjudicator)
    chosen = []
    for s in range(ANNOTATORS // 3):
        users = []
        for i in range(3 * s + 1, 3 * s + 4):
            user, _ = User.objects.get_or_create(username=f"load-ann{i:02d}")
            user.groups.add(annotator)
            users.append(user)
        study = Study.objects.filter(name=f"load {s + 1}").first() or study_create(
            name=f"load {s + 1}", codebook=codebook, annotators=users, adjudicator=senior, run_ids=run_ids
        )
        study_assign(study=study)
        for user in users:
            chosen.append(Assignment.objects.filter(study=study, annotator=user).order_by("pk").first())
    return chosen


@dataclass
class Annotator:
    assignment_id: int
    session: str
    version: int
    code: int
    saves: list[float] = field(default_factory=list)  # latencies of the counted saves
    errors: list[str] = field(default_factory=list)
    conflicts: int = 0
    acknowledged: tuple[str, int] | None = None  # (notes, version) of the last save answered 200

    def run(self, start_counting: float, deadline: float, pause: float) -> None:
        headers = {
            "Cookie": f"sessionid={self.session}; csrftoken={CSRF}",
            "X-CSRFToken": CSRF,
            "HX-Request": "true",  # as htmx sends it: the answer is the save-status fragment
            "Content-Type": "application/x-www-form-urlencoded",
        }
        conn = http.client.HTTPConnection(HOST, PORT, timeout=30)
        count = 0
        time.sleep(random.uniform(0, pause))
        try:
            while time.monotonic() < deadline:
                count += 1
                notes = f"draft {count} of assignment {self.assignment_id}"
                form = {"version": self.version, "code": self.code, f"rationale-{self.code}": notes, "notes": notes}
                began = time.monotonic()
                try:
                    conn.request("POST", f"/annotate/{self.assignment_id}/save/", urlencode(form), headers)
                    response = conn.getresponse()
                    body = response.read()
                except (OSError, http.client.HTTPException) as exc:
                    self.errors.append(f"save {count}: {exc!r}")
                    conn.close()  # the next request opens a new connection
                    continue
                elapsed = time.monotonic() - began
                if response.status == 200:
                    self.version = int(VERSION.search(body).group(1))
                    self.acknowledged = (notes, self.version)
                elif response.status == 409:
                    self.conflicts += 1
                else:
                    self.errors.append(f"save {count}: HTTP {response.status} {body[:200]!r}")
                if began >= start_counting:
                    self.saves.append(elapsed)
                time.sleep(pause)
        finally:
            conn.close()


def logged_in(assignment: Assignment) -> str:
    """A session for the assignment's annotator, stored where gunicorn reads it (the database)."""
    client = Client()
    client.force_login(assignment.annotator)
    return client.cookies["sessionid"].value


def lost_updates(annotators: list[Annotator]) -> list[str]:
    lost = []
    for a in annotators:
        stored = Annotation.objects.filter(assignment_id=a.assignment_id).first()
        label = stored.labels.first() if stored else None
        found = (stored.notes, stored.version, label.rationale if label else None) if stored else None
        expected = (*a.acknowledged, a.acknowledged[0]) if a.acknowledged else None
        if found != expected:
            lost.append(f"assignment {a.assignment_id}: stored {found}, last acknowledged {expected}")
    return lost


def phase(annotators: list[Annotator], *, warmup: float, seconds: float, pause: float) -> tuple[str, list[str]]:
    """One round of autosaving: its table row, and what it missed of the targets."""
    for a in annotators:
        a.saves, a.errors, a.conflicts = [], [], 0
    start = time.monotonic()
    threads = [
        threading.Thread(target=a.run, args=(start + warmup, start + warmup + seconds, pause)) for a in annotators
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    saves = sorted(s for a in annotators for s in a.saves)
    errors = [e for a in annotators for e in a.errors]
    lost = lost_updates(annotators)
    cuts = statistics.quantiles(saves, n=100) if len(saves) > 1 else [float("nan")] * 99
    p50, p95, p99 = (cuts[k - 1] * 1000 for k in (50, 95, 99))
    row = (
        f"| {pause:g} s | {len(saves):,} | {len(saves) / seconds:.1f} | {p50:.0f} ms | {p95:.0f} ms | {p99:.0f} ms "
        f"| {len(errors)} | {sum(a.conflicts for a in annotators)} | {len(lost)} |"
    )
    missed = [f"p95 {p95:.0f} ms ≥ 300 ms"] * (p95 >= 300) + [f"{len(errors)} errors"] * bool(errors)
    missed += [f"{len(lost)} lost updates"] * bool(lost)
    return row, missed + (errors + lost)[:5]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=25.0, help="counted seconds of autosaving, per round")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of saves not counted, first")
    parser.add_argument("--pause", type=float, default=1.2, help="seconds between a save's answer and the next save")
    parser.add_argument("--no-saturate", action="store_true", help="skip the second round, without pauses")
    args = parser.parse_args()
    assignments = prepare()
    code = Code.objects.filter(codebook=codebook_load_default(), level=Code.Level.MODE).order_by("position").first()
    annotators = []
    for assignment in assignments:
        stored = Annotation.objects.filter(assignment=assignment).values_list("version", flat=True).first()
        annotators.append(Annotator(assignment.pk, logged_in(assignment), stored or 1, code.pk))
    log = ROOT / "var" / "bench" / "load-gunicorn.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    pauses = [args.pause] + ([] if args.no_saturate or not args.pause else [0.0])
    server = gunicorn(PORT, log)
    try:
        rounds = [phase(annotators, warmup=args.warmup, seconds=args.seconds, pause=pause) for pause in pauses]
    finally:
        stop(server)
    print(
        f"\n{len(annotators)} annotators autosaving, {args.seconds:.0f} s counted per round (after {args.warmup:.0f} s"
        f" not counted); gunicorn {WORKERS} sync workers, PostgreSQL, DEBUG=0, DATABASE_CONN_MAX_AGE="
        f"{os.environ.get('DATABASE_CONN_MAX_AGE', '0')}; {os.cpu_count()} CPUs for server, database and clients\n"
    )
    print("| pause after each save | saves | saves/s | p50 | p95 | p99 | errors | conflicts (409) | lost updates |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row, _ in rounds:
        print(row)
    for pause, (_, missed) in zip(pauses, rounds, strict=True):
        verdict = "met" if not missed else "**missed: " + "; ".join(missed) + "**"
        print(f"\npause {pause:g} s — targets (p95 < 300 ms, 0 errors, 0 lost): {verdict}")


if __name__ == "__main__":
    main()
