"""A run is stored exactly as parsed, whole or not at all, on every database and whichever way its
events reach it: in one write (a small run) or in many (a large run, whose run and context rows are
written with its first events and completed at the end)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from django.db import IntegrityError, connection, transaction

from tests.factories import ctx, ev, header, simple_run, t, write_jsonl
from trajectories import services, writer
from trajectories.formats.records import ContextRecord, EventRecord, RunHeader, RunSource
from trajectories.models import AgentContext, Event, Run, Task
from trajectories.services import import_paths, run_import

pytestmark = pytest.mark.django_db

ORIGIN = datetime(2026, 8, 1, 10, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "fixtures" / "real"


def _wide_run(n_sub: int, per_sub: int, task: str = "t-1") -> list[dict]:
    lines = [header(task=task), ctx("main", start=t(0), end=t(3000))]
    for i in range(n_sub):
        cid = f"sub-{i}"
        lines.append(ctx(cid, "main", start=t(1 + i)))
        for seq in range(per_sub):
            # microseconds, whole seconds, files and non-ASCII text all round-trip
            lines.append(
                ev(cid, seq, t(1 + i + seq * 0.25), "file_write", tool="Edit", files=[f"f{i}.py"], text=f"é {i}/{seq}")
            )
    return lines


@pytest.fixture(params=["one write", "many writes"])
def writes(request, monkeypatch):
    """A small run is written once, complete; a large one every FLUSH_ROWS events (here 7)."""
    if request.param == "many writes":
        monkeypatch.setattr(writer, "FLUSH_ROWS", 7)
    return request.param


def _write(records: list, name: str = "crafted") -> object:
    """Import a run made of parser records directly (what no parser would let through); its
    content, for the duplicate check, is its records' text."""

    class _Parser:
        def parse(self, source):
            yield from records

    with tempfile.TemporaryDirectory() as folder:
        content = Path(folder) / name
        content.write_text(repr(records))
        original = services.parser_for
        services.parser_for = lambda fmt: _Parser()
        try:
            return run_import(source=RunSource(name=name, format="parallax", files=[content]))
        finally:
            services.parser_for = original


def test_rows_read_back_exactly(tmp_path, writes):
    lines = _wide_run(n_sub=9, per_sub=11)
    report = import_paths(paths=[write_jsonl(tmp_path / "wide.jsonl", lines)])
    assert report.count("imported") == 1, report.results[0].message
    run = Run.objects.get()
    stored = list(
        Event.objects.filter(run=run)
        .order_by("source_line")
        .values_list("context__external_id", "seq", "timestamp", "kind", "tool", "text", "files", "source_line")
    )
    expected = [
        (
            line["context"],
            line["seq"],
            datetime.fromisoformat(line["ts"]),
            line["kind"],
            line["tool"],
            line["text"],
            line["files"],
            number,
        )
        for number, line in enumerate(lines, start=1)
        if line["type"] == "event"
    ]
    assert stored == expected
    contexts = {c.external_id: c for c in AgentContext.objects.filter(run=run)}
    assert len(contexts) == 10 and contexts["sub-3"].parent == contexts["main"]
    assert contexts["sub-3"].n_events == 11 and contexts["sub-3"].files_touched == ["f3.py"]
    assert (contexts["main"].depth, contexts["sub-3"].depth) == (0, 1)
    # sub-agents without an end time end at their last event
    assert contexts["sub-3"].ended_at == datetime.fromisoformat(t(4 + 10 * 0.25))
    assert [c.position for c in sorted(contexts.values(), key=lambda c: c.position)] == list(range(10))
    assert (run.n_events, run.n_contexts, run.subagents_created, run.mode) == (99, 10, 9, "concurrent")
    # timestamps are stored in the ORM's own format: lookups by value find them
    assert Event.objects.filter(timestamp=datetime.fromisoformat(t(1.25))).count() == 1


def test_timestamps_in_other_zones_are_stored_as_utc(writes):
    plus2 = datetime(2026, 8, 1, 12, 0, 0, 500, tzinfo=ZoneInfo("Europe/Paris"))  # 10:00:00.0005 UTC
    naive = datetime(2026, 8, 1, 10, 0, 1)  # noqa: DTZ001 - a parser handing over a naive value means UTC
    records = [
        RunHeader(benchmark="B", task_id="tz", agent="A", mode="sequential"),
        ContextRecord(id="main", role="main"),
        EventRecord(context="main", seq=0, kind="message", timestamp=plus2),
        EventRecord(context="main", seq=1, kind="message", timestamp=naive),
    ] + [EventRecord(context="main", seq=2 + i, kind="message") for i in range(10)]
    result = _write(records)
    assert result.status == "imported", result.message
    stamps = list(Event.objects.order_by("seq").values_list("timestamp", flat=True)[:2])
    assert stamps == [datetime(2026, 8, 1, 10, 0, 0, 500, tzinfo=UTC), naive.replace(tzinfo=UTC)]


def test_a_row_the_database_refuses_stores_nothing_of_the_run(writes):
    """A row the database refuses (here a duplicate (context, seq) no parser would let through)
    fails the run with the database's reason, wherever in the run it comes."""
    records = [
        RunHeader(benchmark="B", task_id="dup", agent="A", mode="sequential"),
        ContextRecord(id="main", role="main"),
    ]
    records += [
        EventRecord(context="main", seq=i, kind="message", timestamp=ORIGIN + timedelta(seconds=i)) for i in range(20)
    ]
    records.append(EventRecord(context="main", seq=3, kind="message"))
    records += [EventRecord(context="main", seq=100 + i, kind="message") for i in range(20)]
    result = _write(records)
    assert result.status == "failed" and "crafted: database rejected the run" in result.message
    assert (Run.objects.count(), AgentContext.objects.count(), Event.objects.count(), Task.objects.count()) == (
        0,
        0,
        0,
        0,
    )
    # the connection is usable and the next run imports normally
    assert _write(records[:-21]).status == "imported"


def test_a_parse_error_late_in_the_run_rolls_back_what_was_written(tmp_path, writes):
    lines = _wide_run(n_sub=3, per_sub=10)
    lines.append(ev("nobody", 0, t(5)))
    report = import_paths(paths=[write_jsonl(tmp_path / "late.jsonl", lines)])
    assert "late.jsonl:36: field 'context'" in report.results[0].message
    assert (Run.objects.count(), AgentContext.objects.count(), Event.objects.count()) == (0, 0, 0)


def _stored() -> tuple[list, list, list]:
    runs = list(Run.objects.order_by("source_name").values(*(f.attname for f in Run._meta.concrete_fields)))
    contexts = list(
        AgentContext.objects.order_by("run__source_name", "position").values(
            "run__source_name", "parent__external_id", *(f.attname for f in AgentContext._meta.concrete_fields)
        )
    )
    for row in runs + contexts:
        for key in ("id", "imported_at", "run_id", "parent_id"):
            row.pop(key, None)
    events = list(
        Event.objects.order_by("run__source_name", "context__position", "seq").values_list(
            "run__source_name",
            "context__external_id",
            "seq",
            "timestamp",
            "kind",
            "tool",
            "text",
            "files",
            "target",
            "source_line",
        )  # fmt: skip
    )
    return runs, contexts, events


def test_large_and_small_runs_store_the_same_rows(monkeypatch):
    """The rows a large run writes early (its run and contexts, before it is complete) end up as
    a small run's, for the real native logs of every format (warnings, outcomes, sub-agents,
    events without timestamps, files, non-ASCII and control characters in texts)."""
    assert import_paths(paths=[REAL]).count("imported") == 8
    small = _stored()
    Run.objects.all().delete()
    monkeypatch.setattr(writer, "FLUSH_ROWS", 3)
    assert import_paths(paths=[REAL]).count("imported") == 8
    assert _stored() == small
    assert any(run["warnings"] for run in small[0]) and any(c["parent__external_id"] for c in small[1])
    events = small[2]
    assert len(events) > 100 and any(e[3] is None for e in events) and any(e[7] for e in events)


@pytest.mark.parametrize("order", ["main first", "sub-agent first"])
def test_a_context_may_be_declared_after_its_sub_agents(writes, order):
    records = [RunHeader(benchmark="B", task_id="late-parent", agent="A", mode="concurrent")]
    main = [ContextRecord(id="main", role="main")]
    subs = [ContextRecord(id="child", role="sub", parent="lead"), ContextRecord(id="lead", role="sub", parent="main")]
    contexts = main + subs if order == "main first" else subs + main
    records += contexts[:1] + [EventRecord(context=contexts[0].id, seq=i, kind="message") for i in range(10)]
    records += contexts[1:] + [EventRecord(context="lead", seq=i, kind="message") for i in range(10)]
    assert _write(records).status == "imported"
    stored = {c.external_id: c for c in AgentContext.objects.select_related("parent")}
    assert stored["child"].parent.external_id == "lead" and stored["lead"].parent.external_id == "main"
    assert [stored[k].depth for k in ("main", "lead", "child")] == [0, 1, 2]


def test_an_inferred_mode_that_takes_a_stored_runs_slot_is_refused(writes):
    """A run whose mode is inferred (no manifest, no cell.json) learns it only at the end: its
    slot (task, agent, mode) is checked then, also when its row was written early."""

    def run(task: str, n_sub: int) -> list:
        records = [RunHeader(benchmark="B", task_id=task, agent="A", mode=""), ContextRecord(id="main", role="main")]
        records += [ContextRecord(id=f"s{i}", role="sub", parent="main") for i in range(n_sub)]
        return records + [EventRecord(context="main", seq=i, kind="message") for i in range(20)]

    assert _write(run("x", 2), name="first").status == "imported"
    second = _write(run("x", 1), name="second")
    assert second.status == "failed"
    assert "second: a concurrent run of B/x by A is already stored" in second.message and "from first" in second.message
    assert _write(run("x", 0), name="third").status == "imported"  # sequential: another slot
    assert sorted(Run.objects.values_list("mode", flat=True)) == ["concurrent", "sequential"]


def test_the_same_content_again_is_a_duplicate(tmp_path, writes):
    path = write_jsonl(tmp_path / "r.jsonl", _wide_run(2, 10))
    first = import_paths(paths=[path]).results[0]
    again = import_paths(paths=[path]).results[0]
    assert (again.status, again.run_id, again.message) == ("duplicate", first.run_id, "already imported (same content)")
    assert Run.objects.count() == 1 and Event.objects.count() == 20


@pytest.mark.parametrize("path", ["one write", "many writes"])
def test_deleting_runs_and_contexts_leaves_no_context_or_event_behind(tmp_path, monkeypatch, path):
    if path == "many writes":
        monkeypatch.setattr(writer, "FLUSH_ROWS", 2)
    write_jsonl(tmp_path / "a.jsonl", _wide_run(n_sub=2, per_sub=3))
    write_jsonl(
        tmp_path / "b.jsonl",
        [{**line, "mode": "sequential"} if line["type"] == "run" else line for line in _wide_run(2, 2)],
    )
    write_jsonl(tmp_path / "c.jsonl", _wide_run(n_sub=2, per_sub=1, task="t-3"))
    import_paths(paths=[tmp_path])
    first, second, third = Run.objects.order_by("source_name")
    AgentContext.objects.filter(run=second, external_id="sub-0").delete()
    AgentContext.objects.filter(run=third, external_id="main").delete()  # its sub-agents go with it
    first.delete()
    assert sorted(AgentContext.objects.values_list("run_id", "external_id")) == [
        (second.pk, "main"),
        (second.pk, "sub-1"),
    ]
    assert set(Event.objects.values_list("run_id", flat=True)) == {second.pk}
    live = set(AgentContext.objects.values_list("pk", flat=True))
    assert set(Event.objects.values_list("context_id", flat=True)) <= live


def test_the_database_refuses_an_event_of_no_context(tmp_path):
    """Events and contexts carry real foreign keys: a row that points nowhere is refused."""
    import_paths(paths=[write_jsonl(tmp_path / "a.jsonl", _wide_run(1, 1))])
    run = Run.objects.get()
    missing = AgentContext.objects.order_by("-pk").values_list("pk", flat=True).first() + 1000
    with pytest.raises(IntegrityError), transaction.atomic():
        Event.objects.create(run=run, context_id=missing, seq=0, kind="message")
        connection.check_constraints()  # PostgreSQL checks deferred keys at commit; this is that check


@pytest.mark.parametrize("commit_seconds", [0, 3600])
def test_every_reported_run_is_stored_and_a_crash_loses_only_unreported_ones(tmp_path, monkeypatch, commit_seconds):
    """Runs share a commit when they follow each other within COMMIT_SECONDS; a run's result is
    reported once it is committed. A crash (here a parser raising MemoryError on the fifth run)
    rolls back the runs not yet committed, which were never reported; importing again stores them."""
    for i in range(5):
        write_jsonl(tmp_path / f"r{i}.jsonl", [header(task=f"t{i}"), ctx("main", start=t(0), end=t(1))])
    monkeypatch.setattr(services, "COMMIT_SECONDS", commit_seconds)
    reported: list[str] = []
    original = services.parser_for

    def crash_on_fifth(fmt):
        parser = original(fmt)

        class Crashing:
            def parse(self, source):
                if source.name == "r4.jsonl":
                    raise MemoryError("simulated crash")
                yield from parser.parse(source)

        return Crashing()

    monkeypatch.setattr(services, "parser_for", crash_on_fifth)
    with pytest.raises(MemoryError):
        import_paths(paths=[tmp_path], on_result=lambda result, index, total: reported.append(result.source))
    stored = sorted(Run.objects.values_list("task__external_id", flat=True))
    if commit_seconds:
        assert reported == stored == []
    else:
        assert reported == ["r0.jsonl", "r1.jsonl", "r2.jsonl", "r3.jsonl"] and stored == ["t0", "t1", "t2", "t3"]
    monkeypatch.setattr(services, "parser_for", original)
    retry = import_paths(paths=[tmp_path])
    assert [r.status for r in retry.results] == ["duplicate"] * len(stored) + ["imported"] * (5 - len(stored))
    assert Run.objects.count() == 5


def test_a_pair_must_share_the_prompt_and_tasks_learn_what_they_lacked(tmp_path):
    """The first run creates the task, a later one fills what it lacked, a different prompt fails."""
    first = [header("p", "concurrent"), ctx("main")]
    first[0]["task"]["difficulty"] = ""
    second = [header("p", "sequential"), ctx("main")]
    second[0]["task"]["prompt_sha256"] = "a" * 64
    third = [header("p", "concurrent", agent="Other"), ctx("main")]
    third[0]["task"]["prompt_sha256"] = "b" * 64
    for name, lines in (("1.jsonl", first), ("2.jsonl", second), ("3.jsonl", third)):
        write_jsonl(tmp_path / name, lines)
    report = import_paths(paths=[tmp_path])
    assert [r.status for r in report.results] == ["imported", "imported", "failed"]
    assert "prompt_sha256 differs" in report.results[2].message
    task = Task.objects.get(external_id="p")
    assert (task.difficulty, task.prompt_sha256) == ("hard", "a" * 64)


def test_a_failed_run_takes_the_task_it_created_with_it_and_the_next_run_recreates_it(tmp_path):
    """A task created by a run that then fails is rolled back with it: the import's cache of task
    ids must not hand its id to the next run."""
    bad = [header("fresh"), ctx("main"), ev("ghost", 0, t(0))]
    good = [{**header("fresh"), "mode": "sequential"}, ctx("main")]
    write_jsonl(tmp_path / "1-bad.jsonl", bad)
    write_jsonl(tmp_path / "2-good.jsonl", good)
    report = import_paths(paths=[tmp_path])
    assert [r.status for r in report.results] == ["failed", "imported"]
    assert Run.objects.get().task.external_id == "fresh"


def test_memory_grows_with_a_run_far_less_than_the_run(tmp_path):
    """Events are written as they stream past, so importing more events costs little more memory:
    the parser keeps each context's seen sequence numbers (to name a duplicate's line), a few
    dozen bytes per event, but no event (here ~1 KiB each). Python allocations, traced."""

    def peak(name: str, events: int) -> int:
        lines = [header(task=name), ctx("main", start=t(0), end=t(3500))]
        lines += [ev("main", i, t(i * 0.01), text="x" * 1000) for i in range(events)]
        path = write_jsonl(tmp_path / f"{name}.jsonl", lines)
        tracemalloc.start()
        try:
            assert import_paths(paths=[path]).count("imported") == 1
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    peak("warm-up", 100)
    small, large = peak("small", 10_000), peak("large", 40_000)
    per_event = (large - small) / 30_000
    assert per_event < 200, (small, large)


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's file format")
def test_new_sqlite_databases_use_16_kib_pages_and_wal():
    """16 KiB pages: a 1 GiB run writes a quarter of the WAL frames and checkpoint copies of 4 KiB
    pages (docs/performance.md)."""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA page_size")
        assert cursor.fetchone()[0] == 16384
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0] == "wal"


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _read_position(pid: int, path: Path) -> int:
    """How far process `pid` has read `path` (Linux: the offset of its open file)."""
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            if Path(os.readlink(fd)) == path:
                return int((Path(f"/proc/{pid}/fdinfo") / fd.name).read_text().split()[1])
        except OSError:
            continue
    return 0


def _as_from_a_shell() -> None:
    """The command as a shell starts it: Ctrl-C interrupts it even if a process before it in this test run left
    SIGINT ignored (a child inherits that, and Python then installs no KeyboardInterrupt handler: the import ran to
    its end in two full runs); and at the lowest priority, so that on a busy machine the test sees it half-way."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.nice(19)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGINT], ids=["killed", "ctrl-c"])
def test_an_import_killed_mid_run_leaves_nothing_and_the_retry_imports_it_once(tmp_path, stop):
    """A real SIGKILL (or Ctrl-C) of `manage.py import_trajectories` half-way through a 100,000-event run
    (tens of writes of its events): no run, context or event is left, and importing again
    stores it once, complete. The command's batch on the Import page says failed at once after a Ctrl-C;
    a killed one stays running until the stall check (PARALLAX_IMPORT_STALL_SECONDS) says what happened."""
    from trajectories.models import ImportBatch

    lines = [header(task="killed"), ctx("main", start=t(0), end=t(3000))]
    for i in range(20):
        lines.append(ctx(f"sub-{i}", "main", start=t(1 + i)))
        lines += [ev(f"sub-{i}", seq, t(1 + i + seq * 0.0005), text=f"{i}/{seq} é") for seq in range(5000)]
    path = write_jsonl(tmp_path / "killed.jsonl", lines).resolve()
    env = {**os.environ, "DATABASE_URL": _database_url(), "DEBUG": "1"}
    importer = subprocess.Popen(
        [sys.executable, "manage.py", "import_trajectories", str(path)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=_as_from_a_shell,
    )
    try:
        deadline = time.monotonic() + 60
        half = path.stat().st_size // 2
        while importer.poll() is None and time.monotonic() < deadline and _read_position(importer.pid, path) < half:
            time.sleep(0.01)
        assert importer.poll() is None, "the import finished before it could be killed"
        importer.send_signal(stop)
    finally:
        importer.wait(timeout=30)
    assert (Run.objects.count(), AgentContext.objects.count(), Event.objects.count(), Task.objects.count()) == (
        0,
        0,
        0,
        0,
    )
    batch = ImportBatch.objects.get()
    if stop == signal.SIGINT:
        assert (batch.origin, batch.status, batch.imported, batch.total) == ("command", "failed", 0, 1)
        assert batch.error.startswith("the import stopped after 0 runs: KeyboardInterrupt()")
    else:
        assert (batch.origin, batch.status) == ("command", "running")
    report = import_paths(paths=[path])
    assert report.count("imported") == 1, report.results[0].message
    assert Event.objects.count() == Run.objects.get().n_events == 100_000


def test_a_spawn_naming_more_agents_than_its_column_holds_is_cut_between_names(tmp_path):
    """A swarm of 40 agents started by one call: the target keeps whole ids only."""
    from trajectories.models import Event

    names = ",".join(f"agent-{n:02d}-{'x' * 4}" for n in range(40))  # 13 characters each, 40 of them
    lines = simple_run("t-swarm", n_sub=0)
    lines.append(ev("main", 90, t(5), kind="spawn", tool="AgentSwarm", target=names))
    write_jsonl(tmp_path / "swarm.jsonl", lines)
    import_paths(paths=[tmp_path / "swarm.jsonl"])
    stored = Event.objects.get(kind="spawn", tool="AgentSwarm").target
    assert len(stored) <= 255 and stored.split(",") == names.split(",")[: len(stored.split(","))]
