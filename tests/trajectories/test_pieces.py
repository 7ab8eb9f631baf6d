"""SQLite: a large run in its own transaction commits its events in pieces (bulk._SQLiteSink),
invisible until the run's row is written; a failed or killed import leaves nothing visible and
its pieces are deleted. Transactional tests: the pieces are real commits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import DatabaseError, connection, connections, transaction
from django.utils import timezone

from tests.conftest import ctx, ev, header, t, write_jsonl
from trajectories import bulk
from trajectories.models import AgentContext, AgentSystem, Benchmark, Event, PartialRun, Run, Task
from trajectories.services import import_paths

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="PostgreSQL streams a run with one COPY, no pieces"),
]


def _big_run(n_sub: int = 6, per_sub: int = 40, task: str = "big") -> list[dict]:
    lines = [header(task=task), ctx("main", start=t(0), end=t(3000))]
    for i in range(n_sub):
        lines.append(ctx(f"sub-{i}", "main", start=t(1 + i)))
        lines += [ev(f"sub-{i}", seq, t(1 + i + seq * 0.25), text=f"{i}/{seq} é") for seq in range(per_sub)]
    return lines


@pytest.fixture
def pieces(settings, monkeypatch):
    """Stream every run, in batches of 7 events, committing every 20 and reserving 3 context ids at a time."""
    settings.PARALLAX_IMPORT_SMALL_RUN_BYTES = 0
    settings.PARALLAX_IMPORT_PIECE_EVENTS = 20
    monkeypatch.setattr(bulk, "FLUSH_ROWS", 7)
    monkeypatch.setattr(bulk, "ID_BLOCK", 3)


def _others_see() -> dict:
    """What another connection (another thread) sees right now."""
    seen = {}

    def look():
        try:
            seen.update(
                runs=Run.objects.count(),
                contexts=AgentContext.objects.count(),
                events=Event.objects.count(),
                partial=list(PartialRun.objects.values_list("source_name", flat=True)),
            )
        finally:
            connections.close_all()

    thread = threading.Thread(target=look)
    thread.start()
    thread.join()
    return seen


def _watch_commits(monkeypatch) -> list[dict]:
    """After each piece commit (in the writer thread), record what other connections see."""
    snapshots: list[dict] = []
    original = bulk._Background.run

    def run(self, jobs):
        original(self, jobs)
        if any(sql == "COMMIT" for sql, _, _ in jobs):
            snapshots.append(_others_see())

    monkeypatch.setattr(bulk._Background, "run", run)
    return snapshots


def test_a_large_run_commits_in_pieces_that_nobody_sees_until_it_is_complete(tmp_path, pieces, monkeypatch):
    snapshots = _watch_commits(monkeypatch)
    lines = _big_run()
    report = import_paths(paths=[write_jsonl(tmp_path / "big.jsonl", lines)])
    assert report.count("imported") == 1, report.results[0].message
    # 240 events, a commit every 21 (three batches of 7): 11 pieces, the rest with the run's row
    assert len(snapshots) == 11
    assert [s["events"] for s in snapshots] == [21 * k for k in range(1, 12)]  # committed, really
    assert all((s["runs"], s["contexts"], s["partial"]) == (0, 0, ["big.jsonl"]) for s in snapshots)
    assert _others_see() == {"runs": 1, "contexts": 7, "events": 240, "partial": []}

    run = Run.objects.get()
    assert (run.n_events, run.n_contexts, run.subagents_created) == (240, 7, 6)
    stored = list(Event.objects.order_by("source_line").values_list("context__external_id", "seq", "text"))
    expected = [(line["context"], line["seq"], line.get("text", "")) for line in lines if line["type"] == "event"]
    assert stored == expected
    # every event belongs to a context of its run (the ids reserved in blocks of 3 held)
    subs = set(run.contexts.exclude(external_id="main").values_list("pk", flat=True))
    assert set(Event.objects.values_list("context_id", flat=True)) == subs and len(subs) == 6


def test_ids_reserved_for_a_run_in_pieces_are_never_handed_out_again():
    with transaction.atomic():
        reserved = bulk.allocate_ids(Benchmark, 3)
    assert Benchmark.objects.create(name="after").pk > reserved[-1]


def test_a_run_that_fails_after_pieces_were_committed_leaves_nothing(tmp_path, pieces, monkeypatch):
    snapshots = _watch_commits(monkeypatch)
    lines = _big_run()
    lines.append(ev("nobody", 0, t(5)))  # the last line is bad
    report = import_paths(paths=[write_jsonl(tmp_path / "late.jsonl", lines)])
    assert report.results[0].status == "failed"
    assert f"late.jsonl:{len(lines)}: field 'context'" in report.results[0].message
    assert len(snapshots) == 11 and snapshots[-1]["events"] == 231  # pieces had been committed ...
    assert _others_see() == {"runs": 0, "contexts": 0, "events": 0, "partial": []}  # ... and are gone
    # so are the benchmark, task and agent rows the run had created (committed with its first piece)
    assert (Benchmark.objects.count(), Task.objects.count(), AgentSystem.objects.count()) == (0, 0, 0)
    # the same file, corrected, imports once
    retry = import_paths(paths=[write_jsonl(tmp_path / "late.jsonl", lines[:-1])])
    assert retry.count("imported") == 1 and Event.objects.count() == 240


def test_a_run_inside_a_callers_transaction_is_not_committed_in_pieces(tmp_path, pieces, monkeypatch):
    snapshots = _watch_commits(monkeypatch)
    with transaction.atomic():
        report = import_paths(paths=[write_jsonl(tmp_path / "big.jsonl", _big_run())])
        assert report.count("imported") == 1
        transaction.set_rollback(True)  # the caller decides: nothing was committed behind its back
    assert snapshots == []
    assert (Run.objects.count(), Event.objects.count(), PartialRun.objects.count()) == (0, 0, 0)


def _orphans(run_id: int, n: int) -> None:
    Event.objects.bulk_create(Event(run_id=run_id, context_id=run_id * 100, seq=i, kind="message") for i in range(n))


def test_the_next_import_discards_abandoned_pieces_and_nothing_else(tmp_path, caplog):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    now = timezone.now()
    fresh = {"host": bulk.socket.gethostname(), "started_at": now, "heartbeat_at": now}
    PartialRun.objects.create(run_id=901, source_name="killed.jsonl", pid=dead.pid, **fresh)
    PartialRun.objects.create(run_id=902, source_name="running.jsonl", pid=os.getpid(), **fresh)
    stale = {**fresh, "heartbeat_at": now - timedelta(hours=2)}
    PartialRun.objects.create(run_id=903, source_name="stuck.jsonl", pid=os.getpid(), **stale)
    elsewhere = {**fresh, "host": "another-host"}
    PartialRun.objects.create(run_id=904, source_name="elsewhere.jsonl", pid=dead.pid, **elsewhere)
    for run_id in (901, 902, 903, 904):
        _orphans(run_id, 5)

    report = import_paths(paths=[write_jsonl(tmp_path / "small.jsonl", _big_run(n_sub=1, per_sub=3))])
    assert report.count("imported") == 1
    # gone: the killed process's pieces and the ones not committed to for two hours; kept: a
    # live import's, and another host's whose process this host cannot check
    assert sorted(PartialRun.objects.values_list("run_id", flat=True)) == [902, 904]
    left = Event.objects.filter(run_id__gt=900).order_by().values_list("run_id", flat=True)  # (no context join)
    assert sorted(set(left)) == [902, 904]
    assert "killed.jsonl" in caplog.text and "stuck.jsonl" in caplog.text


def test_an_import_killed_mid_run_leaves_no_run_and_the_retry_imports_it_once(tmp_path):
    """A real SIGKILL of an importing process, after some pieces were committed."""
    path = write_jsonl(tmp_path / "killed.jsonl", _big_run(n_sub=20, per_sub=5000))  # 100,000 events
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}",
        "PARALLAX_IMPORT_SMALL_RUN_BYTES": "0",
        "PARALLAX_IMPORT_PIECE_EVENTS": "5000",
        "DEBUG": "1",
    }
    importer = subprocess.Popen(
        [sys.executable, "manage.py", "import_trajectories", str(path)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while Event.objects.count() < 10000 and importer.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert importer.poll() is None, "the import finished before it could be killed"
        importer.send_signal(signal.SIGKILL)
    finally:
        importer.wait(timeout=30)
    assert (Run.objects.count(), AgentContext.objects.count(), PartialRun.objects.count()) == (0, 0, 1)
    assert Event.objects.count() >= 10000  # committed pieces, invisible: no run or context shows them

    report = import_paths(paths=[path])
    assert report.count("imported") == 1, report.results[0].message
    run = Run.objects.get()
    assert Event.objects.count() == run.n_events == 100000 and PartialRun.objects.count() == 0


def test_a_failure_to_delete_the_pieces_does_not_hide_the_runs_own_error(tmp_path, pieces, monkeypatch, caplog):
    def unreachable(self):
        raise DatabaseError("connection lost")

    monkeypatch.setattr(bulk._SQLiteSink, "discard", unreachable)
    lines = [*_big_run(), ev("nobody", 0, t(5))]
    report = import_paths(paths=[write_jsonl(tmp_path / "late.jsonl", lines)])
    assert "field 'context'" in report.results[0].message  # the run's own error, reported as usual
    assert "could not delete the events of the failed run yet" in caplog.text
    assert (Run.objects.count(), PartialRun.objects.count()) == (0, 1)  # left for the next import to delete


def test_a_failed_run_in_pieces_keeps_the_rows_it_did_not_create(tmp_path, pieces):
    earlier = import_paths(paths=[write_jsonl(tmp_path / "a" / "small.jsonl", _big_run(n_sub=1, per_sub=3, task="t0"))])
    assert earlier.count("imported") == 1
    before = (Benchmark.objects.count(), Task.objects.count(), AgentSystem.objects.count())
    lines = [*_big_run(task="t9"), ev("nobody", 0, t(5))]  # same benchmark and agent, a new task
    report = import_paths(paths=[write_jsonl(tmp_path / "b" / "late.jsonl", lines)])
    assert report.results[0].status == "failed"
    assert (Benchmark.objects.count(), Task.objects.count(), AgentSystem.objects.count()) == before
    assert list(Task.objects.values_list("external_id", flat=True)) == ["t0"]
