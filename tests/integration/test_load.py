"""Load on loopback: 30 annotators autosave drafts concurrently for a bounded time over real HTTP.

Zero errors, zero lost drafts (each stored draft is the last one its annotator saved, and its
version counts every save); p50/p95 latency is printed. PostgreSQL only (it is the production
database and the one that sees real concurrency); PARALLAX_LOAD_SECONDS sets the duration (10: every annotator
saves a dozen times or more, interleaved with the 29 others — what "nothing lost" needs; the long run through
gunicorn with its latency figures is `make bench`'s bench/load_bench.py and bench/coding_day.py).
"""

from __future__ import annotations

import http.client
import os
import re
import statistics
import threading
import time
from urllib.parse import urlencode, urlparse

import pytest
from django.db import connection
from django.test import Client

from annotation.models import Annotation, Assignment
from tests.conftest import skip_or_fail
from tests.factories import new_user, simple_run, write_jsonl
from trajectories.models import Run
from trajectories.services import import_paths

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
USERS = 30
_VERSION = re.compile(rb'name="version" id="version" value="(\d+)"')


def test_thirty_annotators_autosaving(live_server, study, codebook, tmp_path, capsys):
    if connection.vendor != "postgresql":
        skip_or_fail("the load test runs against PostgreSQL (DATABASE_URL=postgres://…)")
    seconds = float(os.environ.get("PARALLAX_LOAD_SECONDS", "10"))
    for i in range(15):
        write_jsonl(tmp_path / "load" / f"{i}.jsonl", simple_run(f"load-{i:02d}", n_sub=1))
    import_paths(paths=[tmp_path / "load"])
    runs = list(Run.objects.filter(task__external_id__startswith="load-").order_by("pk"))
    sessions = []
    for i in range(USERS):
        user = new_user(f"load{i:02d}")
        assignment = Assignment.objects.create(
            study=study, run=runs[i // 2], annotator=user, slot=1 + i % 2, position=1
        )
        client = Client()
        client.force_login(user)
        sessions.append((assignment.pk, client.cookies["sessionid"].value))
    code = codebook.codes.get(key="lossy-handoff").pk
    host = urlparse(live_server.url)
    latencies: list[float] = []
    errors: list[str] = []
    last_saved: dict[int, tuple[str, int]] = {}
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def annotator(assignment_id: int, session: str, conn: http.client.HTTPConnection) -> None:
        csrf = "loadtest0123456789abcdefghijklmn"  # a 32-character token: cookie and header must match
        headers = {
            "Cookie": f"sessionid={session}; csrftoken={csrf}",
            "X-CSRFToken": csrf,
            "HX-Request": "true",
            "Content-Type": "application/x-www-form-urlencoded",
            "Referer": live_server.url,
        }
        version, count = 1, 0
        try:
            while time.monotonic() < deadline:
                count += 1
                notes = f"draft {count} of {assignment_id}"
                body = urlencode({"version": version, "code": code, f"rationale-{code}": notes, "notes": notes})
                start = time.perf_counter()
                conn.request("POST", f"/annotate/{assignment_id}/save/", body=body, headers=headers)
                response = conn.getresponse()
                payload = response.read()
                elapsed = time.perf_counter() - start
                if response.status != 200:
                    with lock:
                        errors.append(f"{assignment_id}: {response.status} {payload[:200]!r}")
                    return
                version = int(_VERSION.search(payload).group(1))
                with lock:
                    latencies.append(elapsed)
                    last_saved[assignment_id] = (notes, version)
        except Exception as exc:  # noqa: BLE001 - any failure is what this test reports
            with lock:
                errors.append(f"{assignment_id}, request {count}: {exc!r}")
        finally:
            conn.close()

    # Connect one by one before the load starts: 30 simultaneous connects overflow the test server's
    # listen backlog (10) and are reset before any request is read; gunicorn's load is `make bench`'s.
    connections = []
    for _ in sessions:
        conn = http.client.HTTPConnection(host.hostname, host.port, timeout=30)
        conn.connect()
        connections.append(conn)
    threads = [threading.Thread(target=annotator, args=(*s, c)) for s, c in zip(sessions, connections, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=seconds + 60)
    assert not errors, errors[:5]
    assert len(last_saved) == USERS
    assert min(version for _, version in last_saved.values()) > 3, "too few saves to interleave"
    for assignment_id, (notes, version) in last_saved.items():
        stored = Annotation.objects.get(assignment_id=assignment_id)
        assert (stored.notes, stored.version) == (notes, version)  # nothing lost, nothing overwritten
        assert stored.labels.get().rationale == notes
    ordered = sorted(latencies)
    p50 = statistics.median(ordered)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    with capsys.disabled():
        print(
            f"\n[load] {USERS} annotators × {seconds:.0f} s: {len(ordered)} saves, 0 errors, 0 lost drafts; "
            f"p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, {len(ordered) / seconds:.0f} saves/s"
        )
