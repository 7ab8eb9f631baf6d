"""A cell whose agent ran in the harness's outer loop (LoopsBench): a session per round, the files of each round's
home split between `agent/<agent>/round-NN/` and the harness's copies under
`cell/evaluation/…/agent-logs/outer-loop/round-NN/<agent>_home/`. Built here from real sessions of the artifact's
task folder (Claude Code: the serial session as round 1, the parallel session with its workflow as round 2, in the
harness's copy of the home), and checked against those native files as read here."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from tests.factories import REAL
from trajectories.models import AgentContext, Event, Run, RunFile, SignatureHit
from trajectories.selectors import events_at_line
from trajectories.services import import_paths, run_signatures_store

pytestmark = pytest.mark.django_db
TASK = Path("swebench_verified/django__django-10999")
HOME = ".claude/projects/-testbed"
OUTER = "cell/evaluation/official-run/official-claude-parallel/task_x/task_x.1-of-1/agent-logs/outer-loop"


def _session(artifact_root: Path, mode: str) -> Path:
    """The main transcript of the artifact's Claude run in `mode`."""
    (main,) = (artifact_root / TASK / "claude" / mode / "agent/claude/.claude/projects/-testbed").glob("*.jsonl")
    return main


def _imported(report) -> Run:
    """The one run a folder held, imported."""
    assert [r.status for r in report.results] == ["imported"], report.results
    return Run.objects.get()


def _times(path: Path) -> list[datetime]:
    """Every time the main agent's own lines were written (sidechains are other agents)."""
    times = []
    for line in path.read_text().splitlines():
        obj = json.loads(line) if line.strip() else None
        if isinstance(obj, dict) and obj.get("timestamp") and not obj.get("isSidechain"):
            times.append(datetime.fromisoformat(obj["timestamp"].replace("Z", "+00:00")))
    return times


@pytest.fixture
def loop_cell(tmp_path, artifact_root):
    cell = tmp_path / "loopsbench" / "task_x" / "claude" / "parallel"
    first, second = _session(artifact_root, "serial"), _session(artifact_root, "parallel")
    (cell / "agent/claude/round-01" / HOME).mkdir(parents=True)
    shutil.copy(first, cell / "agent/claude/round-01" / HOME / first.name)
    copy = cell / OUTER / "round-02/claude_home" / HOME
    copy.mkdir(parents=True)
    shutil.copy(second, copy / second.name)
    shutil.copytree(second.with_suffix(""), copy / second.stem)  # its sub-agents, workflow state and journal
    (cell / "cell.json").write_text(json.dumps({"mode": "parallel", "agent": "claude", "task_id": "task_x"}))
    return cell, cell / "agent/claude/round-01" / HOME / first.name, copy / second.name  # the serial, the parallel


def test_an_outer_loops_rounds_are_one_run_its_main_agent_reading_each_rounds_transcript(loop_cell, admin_client_):
    """The rounds are read in the order they began (as in the artifact, a round's folder need not say which round
    it was): here the session copied into round-02's home began first."""
    cell, serial, parallel = loop_cell
    run = _imported(import_paths(paths=[cell.parents[2]]))
    main = AgentContext.objects.get(run=run, role="main")
    earlier, later = sorted((serial, parallel), key=lambda path: min(_times(path)))
    times = _times(serial) + _times(parallel)
    assert (main.started_at, main.ended_at) == (min(times), max(times))
    assert main.source_file == earlier.relative_to(cell).as_posix() and "2 rounds" in main.label
    native_agents = sorted(p.stem.removeprefix("agent-") for p in parallel.with_suffix("").rglob("agent-*.jsonl"))
    subs = AgentContext.objects.filter(run=run, role="sub")
    assert sorted(subs.values_list("external_id", flat=True)) == native_agents
    assert run.subagents_created == len(native_agents)
    # every event of the main agent stands on its own line: in the file it names (the later round's) or else the
    # main agent's, at the line whose time is the event's; the earlier round's events come first
    later_path = later.relative_to(cell).as_posix()
    lines = {path: (cell / path).read_text().splitlines() for path in (main.source_file, later_path)}
    events = list(Event.objects.filter(context=main, source_line__isnull=False).order_by("seq"))
    files = [e.source_file or main.source_file for e in events]
    assert set(files) == {main.source_file, later_path}
    assert files == sorted(files, key=lambda f: f != main.source_file)  # round 1, then round 2
    for event, path in zip(events, files, strict=True):
        stamp = json.loads(lines[path][event.source_line - 1]).get("timestamp")
        if event.timestamp is not None:
            assert datetime.fromisoformat(stamp.replace("Z", "+00:00")) == event.timestamp, (path, event.source_line)
    # the later round's lines open on their events (the evidence anchors a coder cites)
    cited = next(e for e in events if e.source_file)
    stored = RunFile.objects.get(run=run, path=later_path)
    assert cited in events_at_line(file=stored, start=cited.source_line, end=cited.source_line)
    position = [e.pk for e in Event.objects.filter(context=main).order_by("seq")].index(cited.pk)
    page = admin_client_.get(
        f"/trajectories/runs/{run.pk}/contexts/{main.pk}/events/", {"offset": position}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert f'data-anchor="parallel/{later_path}:{cited.source_line}"' in page  # what "cite" writes
    assert any("outer loop: 2 sessions (its rounds)" in w for w in run.warnings)


def test_children_stopped_when_their_round_ended_are_not_left_behind_by_the_next_round(loop_cell):
    """The workflow's children were killed as their session ended (a round's end); the main agent's next round is a
    new session hours later: no 'main agent went on without it' (unfinished_children), at import or recomputed."""
    cell, _, _ = loop_cell
    run = _imported(import_paths(paths=[cell.parents[2]]))
    killed = AgentContext.objects.filter(run=run, role="sub", status__in=["killed", "stalled"])
    assert killed.exists()
    assert not SignatureHit.objects.filter(run=run, detector="unfinished_children").exists()
    run_signatures_store(run_ids=[run.pk])
    assert not SignatureHit.objects.filter(run=run, detector="unfinished_children").exists()


def test_a_format_that_cannot_join_rounds_reads_one_and_names_the_others(tmp_path, artifact_root):
    """Codex rollouts in two rounds' homes: the larger session is the run, the warning names the other (kept as
    the run's file, each line citable)."""
    cell = tmp_path / "loopsbench" / "task_x" / "codex" / "serial"
    mine = next((REAL / "codex").glob("rollout-*.jsonl"))
    (theirs,) = (artifact_root / TASK / "codex/serial/agent").rglob("rollout-*.jsonl")
    for n, rollout in enumerate((mine, theirs), start=1):
        home = cell / f"agent/codex/round-0{n}/sessions/2026/08/13"
        home.mkdir(parents=True)
        shutil.copy(rollout, home / rollout.name)
    (cell / "cell.json").write_text(json.dumps({"mode": "serial", "agent": "codex"}))
    run = _imported(import_paths(paths=[tmp_path]))
    read, left = (mine, theirs) if mine.stat().st_size > theirs.stat().st_size else (theirs, mine)
    (warning,) = [w for w in run.warnings if "sessions" in w]
    said_read, said_left = warning.split("not read into its timeline")
    assert "holds 2 sessions (an outer loop's rounds" in warning
    assert read.name in said_read and left.name in said_left
    assert RunFile.objects.filter(run=run, path__endswith=left.name).exists()


def test_a_rounds_main_rollout_kept_only_in_the_harnesss_copy_of_its_home_is_read(tmp_path, artifact_root):
    """Codex in a LoopsBench round: the sub-agent's rollout under agent/codex/round-01/, the main thread's only in the
    harness's copy of that round's home (as in loopsbench/task_afl_fuzzing/codex/parallel). The main agent is read
    from it, not left empty."""
    cell = tmp_path / "loopsbench" / "task_x" / "codex" / "parallel"
    rollouts = sorted((artifact_root / TASK / "codex/parallel/agent").rglob("rollout-*.jsonl"))
    parent, child = rollouts  # the main thread started first: its file name (its start time) sorts first
    day = "sessions/2026/08/12"
    (cell / "agent/codex/round-01" / day).mkdir(parents=True)
    shutil.copy(child, cell / "agent/codex/round-01" / day / child.name)
    copy = cell / OUTER / "round-01/codex_home" / day
    copy.mkdir(parents=True)
    shutil.copy(parent, copy / parent.name)
    (cell / "cell.json").write_text(json.dumps({"mode": "parallel", "agent": "codex"}))
    run = _imported(import_paths(paths=[tmp_path]))
    main = AgentContext.objects.get(run=run, role="main")
    assert main.source_file == (copy / parent.name).relative_to(cell).as_posix()
    native_lines = sum(1 for line in parent.read_text().splitlines() if line.strip())
    assert 0 < Event.objects.filter(context=main).count() <= native_lines
    assert not any("not in the bundle" in w for w in run.warnings)
