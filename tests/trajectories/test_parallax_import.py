"""Parallax JSONL import: happy path, and every kind of bad input stores nothing."""

from __future__ import annotations

import gzip

import pytest

from tests.factories import ctx, ev, header, simple_run, t, write_jsonl
from trajectories import writer
from trajectories.models import AgentContext, Benchmark, Event, Run, Task
from trajectories.services import import_paths

pytestmark = pytest.mark.django_db


def _nothing_stored():
    assert Run.objects.count() == 0
    assert AgentContext.objects.count() == 0
    assert Event.objects.count() == 0
    assert Task.objects.count() == 0 and Benchmark.objects.count() == 0


def test_imports_a_run_with_contexts_events_and_metrics(tmp_path):
    path = write_jsonl(tmp_path / "run.jsonl", simple_run(n_sub=2))
    report = import_paths(paths=[path])
    assert [r.status for r in report.results] == ["imported"]
    run = Run.objects.get()
    assert (run.mode, run.task.external_id, run.agent.name) == ("concurrent", "t-1", "Codex")
    assert (run.tests_passed, run.tests_total, run.test_pass) == (9, 10, pytest.approx(0.9))
    assert run.n_contexts == 3 and run.n_events == 5
    # subs [10,50) and [11,51) in a [0,100) run
    assert run.subagents_created == 2 and run.peak_concurrency == 2
    assert run.first_spawn_pos == pytest.approx(0.10)
    assert run.first_overlap_pos == pytest.approx(0.11)
    assert run.overlap_ratio == pytest.approx(0.39)
    sub = AgentContext.objects.get(external_id="sub-0")
    assert sub.parent.external_id == "main" and sub.depth == 1
    assert sub.files_touched == ["src/f0.py"]


def test_gzip_file_imports(tmp_path):
    raw = write_jsonl(tmp_path / "r.jsonl", simple_run())
    gz = tmp_path / "r.jsonl.gz"
    gz.write_bytes(gzip.compress(raw.read_bytes()))
    raw.unlink()
    assert import_paths(paths=[gz]).count("imported") == 1


def test_reimport_is_a_noop(tmp_path):
    path = write_jsonl(tmp_path / "run.jsonl", simple_run())
    import_paths(paths=[path])
    report = import_paths(paths=[path])
    assert [r.status for r in report.results] == ["duplicate"]
    assert Run.objects.count() == 1 and Event.objects.count() == 5


def test_different_content_for_same_task_agent_mode_is_refused(tmp_path):
    import_paths(paths=[write_jsonl(tmp_path / "a.jsonl", simple_run(n_sub=1))])
    report = import_paths(paths=[write_jsonl(tmp_path / "b.jsonl", simple_run(n_sub=2))])
    assert report.results[0].status == "failed"
    assert "already stored" in report.results[0].message
    assert Run.objects.count() == 1


def _fails(tmp_path, lines, *needles):
    path = write_jsonl(tmp_path / "bad.jsonl", lines)
    report = import_paths(paths=[path])
    assert [r.status for r in report.results] == ["failed"], report.results
    message = report.results[0].message
    for needle in needles:
        assert needle in message, message
    _nothing_stored()
    return message


def test_truncated_line(tmp_path):
    lines = simple_run()
    lines.append('{"type": "event", "context": "main", "seq": 99, "ts": "2026-08-0')
    _fails(tmp_path, lines, "bad.jsonl:10", "not valid JSON")


def test_bad_utf8(tmp_path):
    lines = simple_run()
    lines.insert(3, b'{"type": "event", "context": "main", "seq": 50, "kind": "message", "text": "\xff\xfe"}')
    _fails(tmp_path, lines, "bad.jsonl:4", "invalid UTF-8")


def test_wrong_type(tmp_path):
    lines = simple_run()
    lines[2] = ev("main", "zero", t(0))
    _fails(tmp_path, lines, "bad.jsonl:3", "field 'seq'", "expected integer")


def test_wrong_outcome_type(tmp_path):
    lines = simple_run()
    lines[0] = header(tests_passed="nine")
    _fails(tmp_path, lines, "bad.jsonl:1", "outcomes.tests_passed")


@pytest.mark.parametrize("batches", ["one write", "several writes"])
@pytest.mark.parametrize(
    ("where", "value", "field"),
    [("seq", 2**31, "field 'seq'"), ("seq", 2**32 + 5, "field 'seq'"), ("tests_total", 2**31, "tests_total")],
)
def test_integers_beyond_what_the_database_holds(tmp_path, monkeypatch, batches, where, value, field):
    """Values the integer columns cannot hold are input errors naming the field, on every database
    and path: PostgreSQL used to refuse the row with a DataError that stopped the whole import, and
    its binary COPY would wrap 2**32 + 5 to 5 without a word."""
    if batches == "several writes":  # as a large run is written
        monkeypatch.setattr(writer, "FLUSH_ROWS", 2)
    lines = simple_run()
    if where == "seq":
        lines[2] = ev("main", value, t(0))
        line = "bad.jsonl:3"
    else:
        lines[0] = header(tests_passed=1, tests_total=value)
        line = "bad.jsonl:1"
    _fails(tmp_path, lines, line, field, f"at most {2**31 - 1}")


def test_missing_field(tmp_path):
    lines = simple_run()
    del lines[0]["mode"]
    _fails(tmp_path, lines, "bad.jsonl:1", "field 'mode'", "missing")


def test_missing_task_id(tmp_path):
    lines = simple_run()
    del lines[0]["task"]["id"]
    _fails(tmp_path, lines, "field 'task.id'")


def test_duplicate_context_id(tmp_path):
    lines = simple_run()
    lines.append(ctx("sub-0", "main", start=t(1), end=t(2)))
    _fails(tmp_path, lines, "duplicate context id 'sub-0'", "field 'id'")


def test_duplicate_event_seq(tmp_path):
    lines = simple_run()
    lines.append(ev("main", 0, t(3)))
    _fails(tmp_path, lines, "duplicate seq 0", "field 'seq'")


def test_parent_cycle(tmp_path):
    lines = [
        header(),
        ctx("main", start=t(0), end=t(10)),
        ctx("a", "b", start=t(1), end=t(2)),
        ctx("b", "a", start=t(1), end=t(2)),
    ]
    _fails(tmp_path, lines, "parent cycle")


def test_unknown_parent(tmp_path):
    lines = [header(), ctx("main", start=t(0), end=t(10)), ctx("a", "ghost", start=t(1), end=t(2))]
    _fails(tmp_path, lines, "'ghost'", "not declared")


def test_event_for_undeclared_context(tmp_path):
    lines = [header(), ctx("main", start=t(0), end=t(10)), ev("ghost", 0, t(1))]
    _fails(tmp_path, lines, "bad.jsonl:3", "field 'context'")


def test_two_main_contexts(tmp_path):
    lines = [header(), ctx("main", start=t(0), end=t(10)), ctx("main2", start=t(0), end=t(10))]
    _fails(tmp_path, lines, "exactly one main context")


def test_timestamp_without_zone(tmp_path):
    lines = [header(), ctx("main", start="2026-08-01T10:00:00", end=t(10))]
    _fails(tmp_path, lines, "no time zone", "field 'started_at'")


def test_header_must_come_first(tmp_path):
    _fails(tmp_path, [ctx("main"), header()], "bad.jsonl:1", "run header")


def test_failure_late_in_a_big_file_rolls_back_earlier_events(tmp_path):
    lines = [header(), ctx("main", start=t(0), end=t(3000))]
    lines += [ev("main", i, t(i * 0.5)) for i in range(5000)]  # more than one bulk flush
    lines.append(ev("main", 1, t(1)))  # duplicate seq at the very end
    _fails(tmp_path, lines, "duplicate seq 1")


def test_a_bad_run_does_not_stop_the_batch(tmp_path):
    write_jsonl(tmp_path / "good.jsonl", simple_run("good"))
    bad = simple_run("bad")
    del bad[0]["agent"]
    write_jsonl(tmp_path / "bad.jsonl", bad)
    report = import_paths(paths=[tmp_path])
    statuses = {r.source: r.status for r in report.results}
    assert statuses == {"good.jsonl": "imported", "bad.jsonl": "failed"}
    assert list(Run.objects.values_list("task__external_id", flat=True)) == ["good"]


def test_pairing_and_unpaired(tmp_path):
    from trajectories.selectors import run_list, run_twin

    write_jsonl(tmp_path / "c.jsonl", simple_run("paired", "concurrent"))
    write_jsonl(tmp_path / "s.jsonl", simple_run("paired", "sequential", n_sub=0))
    write_jsonl(tmp_path / "lonely.jsonl", simple_run("lonely", "concurrent"))
    import_paths(paths=[tmp_path])
    concurrent = Run.objects.get(task__external_id="paired", mode="concurrent")
    assert run_twin(run=concurrent).mode == "sequential"
    unpaired = list(run_list(filters={"paired": "no"}).values_list("task__external_id", flat=True))
    assert unpaired == ["lonely"]


@pytest.mark.parametrize(
    ("section", "key", "field", "limit"),
    [
        ("task", "benchmark", "task.benchmark", 100),
        ("task", "id", "task.id", 255),
        ("task", "difficulty", "task.difficulty", 20),
        ("agent", "system", "agent.system", 100),
        ("agent", "model", "agent.model", 100),
    ],
)
def test_header_values_longer_than_their_column_are_input_errors(tmp_path, section, key, field, limit):
    """Checked against the model's own max_length before anything is written: PostgreSQL would
    refuse the row with a DataError, SQLite would store it whole."""
    lines = simple_run()
    lines[0][section][key] = "x" * (limit + 1)
    _fails(tmp_path, lines, "bad.jsonl", f"field '{field}'", f"{limit + 1} characters long; at most {limit}")
    lines[0][section][key] = "x" * limit
    assert import_paths(paths=[write_jsonl(tmp_path / "ok.jsonl", lines)]).count("imported") == 1


def test_a_context_id_longer_than_its_column_is_an_input_error(tmp_path):
    lines = [header(), ctx("m" * 256, start=t(0), end=t(1))]
    _fails(tmp_path, lines, "bad.jsonl:2", "field 'id'", "at most 255")
