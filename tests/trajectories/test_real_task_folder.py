"""The study's own artifact, read whole: `swebench_verified/django__django-10999` of
schwerli/Concurrency-Failures-Trajectory-Artifact (../shared/data/real-trajectories/artifact-task-folder,
its PROVENANCE.md), 3 agents × parallel/serial, imported from where it lies.

Every expected figure is read from the native files by the small reader below (json and datetime,
nothing of Parallax's parsers): per run its agents and attempts, its events by kind, each agent's
first and last timestamp, and the process metrics; then every anchor the study's annotation.md and
review.json cite is opened and must show the line as the file holds it.
"""

from __future__ import annotations

import html
import json
import shutil
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conftest import ARTIFACT
from trajectories.artifacts import AnchorError
from trajectories.models import AgentContext, Event, Run, RunFile
from trajectories.selectors import events_at_line, resolve_anchor
from trajectories.services import import_paths

pytestmark = pytest.mark.django_db

TASK = ARTIFACT / "swebench_verified" / "django__django-10999"
if not TASK.is_dir():  # the shared data sits beside the repository on the project's machines
    pytest.skip(f"the study's task folder is not at {TASK}", allow_module_level=True)

CLAUDE_SESSION = "agent/claude/.claude/projects/-testbed/e38d6828-ef38-4ccd-a8cc-540e0eec8b72"


# -- the independent reader ------------------------------------------------------------------


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def when(value) -> datetime:
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value / 1000, tz=UTC)
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def own_clock(records: list[dict], key: str = "timestamp") -> tuple[datetime, datetime]:
    times = [when(r[key]) for r in records if r.get(key) is not None]
    return min(times), max(times)


def claude_blocks(records: list[dict]) -> Counter:
    """Content blocks of a Claude Code transcript's messages, by what they are."""
    found = Counter()
    for r in records:
        if r.get("type") not in ("user", "assistant", "system"):
            continue
        content = (r.get("message") or {}).get("content") if r.get("type") != "system" else None
        if r.get("type") == "system" or isinstance(content, str):
            found["text"] += 1
        for block in content if isinstance(content, list) else []:
            found[block.get("type")] += 1
    return found


def claude_reading(cell: Path) -> dict:
    session = cell / CLAUDE_SESSION
    main = lines(session.with_suffix(".jsonl"))
    agents = {"main": (own_clock([r for r in main if not r.get("isSidechain")]), claude_blocks(main))}
    slots: dict[str, tuple] = {}
    order: list[str] = []
    for workflow in sorted((session / "subagents" / "workflows").glob("wf_*")):
        state = json.loads((session / "workflows" / f"{workflow.name}.json").read_text())
        journal: dict[str, list[str]] = {}
        for entry in lines(workflow / "journal.jsonl"):
            journal.setdefault(entry["key"], []).append(entry["agentId"])
        items = sorted(
            (i for i in state["workflowProgress"] if i.get("type") == "workflow_agent"), key=lambda i: i["index"]
        )
        for item in items:
            attempts = next(agents for agents in journal.values() if item["agentId"] in agents)
            name = item["label"].split(" (retry")[0]
            for number, agent in enumerate(attempts, start=1):
                slots[agent] = (workflow.name, name, number, len(attempts))
                order.append(agent)
                records = lines(workflow / f"agent-{agent}.jsonl")
                agents[agent] = (own_clock(records), claude_blocks(records))
    return {"agents": agents, "slots": slots, "order": order}


def codex_reading(cell: Path) -> dict:
    agents = {}
    for rollout in sorted((cell / "agent" / "codex" / "sessions").rglob("rollout-*.jsonl")):
        records = lines(rollout)
        meta = records[0]["payload"]
        found = Counter()
        for r in records:
            payload = r["payload"]
            kind = payload.get("type")
            if r["type"] != "response_item":
                continue
            if kind == "message" and any(part.get("text") for part in payload.get("content") or []):
                found["message"] += 1
            elif kind == "reasoning" and any(part.get("text") for part in payload.get("summary") or []):
                found["reasoning"] += 1
            elif kind in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call"):
                found["call"] += 1
            elif kind in ("function_call_output", "custom_tool_call_output"):
                found["result"] += 1
        agents[meta["id"]] = (own_clock(records), found, meta.get("parent_thread_id"))
    return {"agents": agents}


def kimi_reading(cell: Path) -> dict:
    wire = next((cell / "agent" / "kimi" / "sessions").rglob("agents/main/wire.jsonl"))
    records = lines(wire)
    found = Counter()
    for r in records:
        event = r.get("event") or {}
        if r["type"] == "context.append_message":
            found["message"] += 1
        elif r["type"] == "context.append_loop_event" and event.get("type") == "content.part":
            found["reasoning" if event["part"]["type"] == "think" else "message"] += 1
        elif r["type"] == "context.append_loop_event" and event.get("type") in ("tool.call", "tool.result"):
            found[event["type"]] += 1
    texts = [
        r["event"]["part"].get("think", r["event"]["part"].get("text"))
        for r in records
        if r["type"] == "context.append_loop_event" and r["event"]["type"] == "content.part"
    ]
    journal = lines(next((cell / "agent" / "kimi" / "server" / "events").glob("*.jsonl")))
    ended = [when(j["envelope"]["timestamp"]) for j in journal if j.get("envelope", {}).get("type") == "turn.ended"]
    first = min(when(r["time"]) for r in records if r["type"].startswith("context.append") and "time" in r)
    return {"counts": found, "texts": texts, "span": (first, max(ended))}


def review_anchors(node) -> list[str]:
    """Every `{path, line}` a review.json cites, as `path:line`."""
    if isinstance(node, dict):
        if set(node) == {"path", "line"}:
            return [f"{node['path']}:{node['line']}"]
        return [anchor for value in node.values() for anchor in review_anchors(value)]
    if isinstance(node, list):
        return [anchor for value in node for anchor in review_anchors(value)]
    return []


def sweep(intervals: list[tuple[float, float]]) -> tuple[int, float, float | None]:
    """Peak concurrency, time with two or more active, and when two first overlapped."""
    points = sorted([(a, 1) for a, b in intervals] + [(b, -1) for a, b in intervals], key=lambda p: (p[0], p[1]))
    active = peak = 0
    overlap, first, last = 0.0, None, None
    for t, step in points:
        if last is not None and active >= 2:
            overlap += t - last
        active += step
        if active >= 2 and first is None:
            first = t
        peak, last = max(peak, active), t
    return peak, overlap, first


# -- import --------------------------------------------------------------------------------------


@pytest.fixture
def runs() -> dict[tuple[str, str], Run]:
    report = import_paths(paths=[ARTIFACT])
    assert [r.status for r in report.results] == ["imported"] * 6, [r.message for r in report.results]
    found = {}
    for run in Run.objects.select_related("agent"):
        agent, mode = run.source_name.split("/")[-2:]
        found[(agent, mode)] = run
    return found


def contexts_of(run: Run) -> dict[str, AgentContext]:
    return {c.external_id: c for c in AgentContext.objects.filter(run=run)}


def kinds_of(run: Run, context: AgentContext | None = None) -> Counter:
    events = Event.objects.filter(run=run, **({"context": context} if context else {}))
    return Counter(events.values_list("kind", flat=True))


def test_the_claude_workflow_run_every_attempt_by_its_own_clock(runs):
    run = runs[("claude", "parallel")]
    reading = claude_reading(TASK / "claude" / "parallel")
    contexts = contexts_of(run)
    assert set(contexts) == set(reading["agents"])  # the main agent and all 11 attempts
    assert run.subagents_created == len(reading["slots"]) == 11
    for agent, (workflow, slot, number, total) in reading["slots"].items():
        context = contexts[agent]
        assert (context.workflow, context.slot, context.attempt, context.attempts) == (workflow, slot, number, total)
        assert context.label.endswith(f"{slot} · attempt {number} of {total}" if total > 1 else slot)
    for agent, ((first, last), blocks) in reading["agents"].items():
        context = contexts[agent]
        assert (context.started_at, context.ended_at) == (first, last), agent
        kinds = kinds_of(run, context)
        assert kinds["message"] == blocks["text"], agent
        assert kinds["reasoning"] == blocks["thinking"] + blocks["redacted_thinking"], agent
        assert kinds["tool_call"] + kinds["file_write"] + kinds["spawn"] == blocks["tool_use"], agent
        assert kinds["tool_result"] + kinds["join"] == blocks["tool_result"], agent
    # The timeline in slot order: the slots as the workflow's state numbers them, each slot's attempts in turn.
    subs = [c.external_id for c in AgentContext.objects.filter(run=run, role="sub").order_by("position")]
    assert subs == reading["order"]
    # The metrics from those intervals, computed here.
    intervals = [(first.timestamp(), last.timestamp()) for a, ((first, last), _) in reading["agents"].items()
                 if a != "main"]  # fmt: skip
    times = [t for (first, last), _ in reading["agents"].values() for t in (first, last)]
    start, end = min(times).timestamp(), max(times).timestamp()
    peak, overlap, first_overlap = sweep(intervals)
    assert run.peak_concurrency == peak == 5  # never more than five agents at once
    assert run.overlap_ratio == pytest.approx(overlap / (end - start), abs=1e-9)
    assert run.first_overlap_pos == pytest.approx((first_overlap - start) / (end - start), abs=1e-9)
    assert run.first_spawn_pos == pytest.approx((min(a for a, _ in intervals) - start) / (end - start), abs=1e-9)
    assert run.last_subagent_end_pos == pytest.approx((max(b for _, b in intervals) - start) / (end - start), abs=1e-9)
    # The Workflow call names the workflow its eleven agents ran in.
    launch = Event.objects.get(run=run, tool="Workflow")
    assert launch.kind == "spawn" and launch.target == "wf_f6715fa9-66d"
    assert AgentContext.objects.filter(run=run, workflow=launch.target).count() == 11


@pytest.mark.parametrize("agent", ["claude", "codex", "kimi"])
@pytest.mark.parametrize("mode", ["parallel", "serial"])
def test_no_event_falls_outside_its_agents_time(runs, agent, mode):
    run = runs[(agent, mode)]
    for context in AgentContext.objects.filter(run=run):
        timed = Event.objects.filter(context=context, timestamp__isnull=False)
        assert not timed.filter(timestamp__gt=context.ended_at).exists(), context.external_id
        assert not timed.filter(timestamp__lt=context.started_at).exists(), context.external_id
    assert not any("events after its recorded end" in w for w in run.warnings)


def test_the_claude_serial_run(runs):
    run = runs[("claude", "serial")]
    records = lines(next((TASK / "claude" / "serial" / "agent").rglob("*.jsonl")))
    first, last = own_clock(records)
    blocks = claude_blocks(records)
    assert (run.started_at, run.ended_at, run.subagents_created) == (first, last, 0)
    kinds = kinds_of(run)
    assert kinds["message"] == blocks["text"] and kinds["reasoning"] == blocks["thinking"]
    assert kinds["tool_call"] + kinds["file_write"] == blocks["tool_use"]


@pytest.mark.parametrize("mode", ["parallel", "serial"])
def test_codex_runs_every_thread_by_its_own_rollout(runs, mode):
    run = runs[("codex", mode)]
    reading = codex_reading(TASK / "codex" / mode)["agents"]
    contexts = contexts_of(run)
    assert set(contexts) == set(reading)
    for thread, ((first, last), found, parent) in reading.items():
        context = contexts[thread]
        assert (context.started_at, context.ended_at) == (first, last)
        assert (context.parent.external_id if context.parent else None) == parent
        kinds = kinds_of(run, context)
        assert kinds["message"] == found["message"] and kinds["reasoning"] == found["reasoning"]
        assert sum(kinds[k] for k in ("tool_call", "file_write", "spawn", "wait", "join")) == found["call"]
        assert kinds["tool_result"] == found["result"]
    assert run.subagents_created == len(reading) - 1 == (1 if mode == "parallel" else 0)


@pytest.mark.parametrize("mode", ["parallel", "serial"])
def test_kimi_runs_have_their_words_and_end_with_their_turn(runs, mode):
    run = runs[("kimi", mode)]
    reading = kimi_reading(TASK / "kimi" / mode)
    kinds = kinds_of(run)
    assert kinds["reasoning"] == reading["counts"]["reasoning"]
    assert kinds["message"] == reading["counts"]["message"]
    assert kinds["tool_call"] + kinds["file_write"] + kinds["spawn"] == reading["counts"]["tool.call"]
    assert kinds["tool_result"] + kinds["join"] == reading["counts"]["tool.result"]
    said = Counter(Event.objects.filter(run=run, kind__in=("message", "reasoning")).values_list("text", flat=True))
    assert not Counter(reading["texts"]) - said  # every reasoning part and every word, as written
    assert (run.started_at, run.ended_at) == reading["span"]  # the run ends at its turn.ended
    main = AgentContext.objects.get(run=run)
    assert main.source_file.endswith("agents/main/wire.jsonl")


def test_every_file_an_anchor_cites_opens_that_line(runs, browser_client):
    """Each anchor of the study's annotation.md and review.json: a file of the folder opens at the
    line, showing it as the file holds it; a file the folder does not hold is refused by name."""
    cited = set()
    for agent in ("claude", "codex", "kimi"):
        text = (TASK / agent / "annotation.md").read_text(encoding="utf-8")
        for line in text.splitlines():
            if line.split(":", 1)[0] in ("parallel_evidence", "serial_contrast", "parallel_anchor", "serial_anchor"):
                cited |= {(agent, a) for a in line.split("`")[1::2]}

        review = json.loads((TASK / agent / "review.json").read_text(encoding="utf-8"))
        cited |= {(agent, anchor) for anchor in review_anchors(review)}
    assert len(cited) > 100
    opened = missing = 0
    for agent, anchor in sorted(cited):
        path, line = anchor.rsplit(":", 1)
        native = TASK / agent / path
        run = runs[(agent, "parallel")]
        if not native.is_file():
            with pytest.raises(AnchorError, match="no file"):
                resolve_anchor(run=run, text=anchor, default_mode="concurrent")
            missing += 1
            continue
        resolved = resolve_anchor(run=run, text=anchor, default_mode="concurrent")
        expected = native.read_text(encoding="utf-8").splitlines()[int(line) - 1]
        page = browser_client.get(resolved.url).content.decode()
        row = page.split(f'<tr id="L{line}"')[1].split("</tr>")[0]
        assert 'class="target"' in row or ' target"' in row, anchor  # the cited line, marked
        assert f"<pre>{html.escape(expected)}</pre>" in row, anchor  # as the file holds it
        opened += 1
    # The folder holds neither cell/prompt.txt nor the evaluation's eval.sh, which some anchors cite: each refused.
    assert opened > 100 and missing > 0


def test_every_file_of_the_cells_is_kept(runs):
    for (agent, mode), run in runs.items():
        cell = TASK / agent / mode
        on_disk = {p.relative_to(cell).as_posix() for p in cell.rglob("*") if p.is_file()}
        stored = dict(RunFile.objects.filter(run=run).values_list("path", "content"))
        assert set(stored) == on_disk, (agent, mode)
        for path in on_disk:  # whole, as written
            assert stored[path] == (cell / path).read_text(encoding="utf-8"), path


def test_a_codex_cell_whose_main_rollout_is_missing_reads_the_exec_stream(tmp_path):
    """codex/parallel without its parent rollout: the main agent's items come from the harness's
    cell/trajectory.jsonl and its times from cell/status.json; the child keeps its rollout."""
    cell = tmp_path / "swebench_verified" / "django__django-10999" / "codex" / "parallel"
    shutil.copytree(TASK / "codex" / "parallel", cell)
    parent = next(cell.rglob("rollout-*019ff7f6-ec4c-*.jsonl"))
    parent.unlink()
    [result] = import_paths(paths=[tmp_path]).results
    assert result.status == "imported", result.message
    run = Run.objects.get()
    stream = lines(cell / "cell" / "trajectory.jsonl")
    status = json.loads((cell / "cell" / "status.json").read_text())["agent_run"]
    main = AgentContext.objects.get(run=run, role="main")
    assert main.external_id == stream[0]["thread_id"]
    assert (main.started_at, main.ended_at) == (when(status["started_at_utc"]), when(status["finished_at_utc"]))
    completed = [s["item"] for s in stream if s["type"] == "item.completed"]
    messages = sum(item["type"] == "agent_message" for item in completed)
    assert kinds_of(run, main)["message"] == messages
    child = AgentContext.objects.get(run=run, role="sub")
    child_reading = codex_reading(cell)["agents"][child.external_id]
    assert child.parent == main and child.depth == 1
    assert (child.started_at, child.ended_at) == child_reading[0]
    start = min(main.started_at, child.started_at)
    span = (max(main.ended_at, child.ended_at) - start).total_seconds()
    assert run.first_spawn_pos == pytest.approx((child.started_at - start).total_seconds() / span, abs=1e-9)
    assert any("its events read from cell/trajectory.jsonl" in w for w in run.warnings)
    # the main agent's events cite the stream's lines, and those anchors open them ("cite" writes them)
    assert main.source_file == "cell/trajectory.jsonl"
    event = Event.objects.filter(context=main, kind="message").order_by("seq").first()
    resolved = resolve_anchor(
        run=run, text=f"parallel/cell/trajectory.jsonl:{event.source_line}", default_mode="concurrent"
    )
    assert event in events_at_line(file=resolved.file, start=event.source_line, end=event.source_line)


def test_a_codex_exec_stream_run_is_timed_by_the_harness(tmp_path):
    cell = tmp_path / "swebench_verified" / "django__django-10999" / "codex" / "serial"
    shutil.copytree(TASK / "codex" / "serial", cell)
    shutil.rmtree(cell / "agent")
    [result] = import_paths(paths=[tmp_path]).results
    assert result.status == "imported", result.message
    run = Run.objects.get()
    status = json.loads((cell / "cell" / "status.json").read_text())["agent_run"]
    assert (run.started_at, run.ended_at) == (when(status["started_at_utc"]), when(status["finished_at_utc"]))
    assert run.source_format == "codex_exec"
    assert any("timed by the harness's record (cell/status.json)" in w for w in run.warnings)


def test_a_status_json_that_is_not_json_leaves_the_run_untimed_and_says_so(tmp_path):
    cell = tmp_path / "swebench_verified" / "django__django-10999" / "codex" / "serial"
    shutil.copytree(TASK / "codex" / "serial", cell)
    shutil.rmtree(cell / "agent")
    (cell / "cell" / "status.json").write_text("{not json")
    [result] = import_paths(paths=[tmp_path]).results
    assert result.status == "imported", result.message
    run = Run.objects.get()
    assert run.started_at is None
    assert any("cell/status.json: not valid JSON" in w and "not taken from it" in w for w in run.warnings)


def test_the_workflow_call_links_to_its_agents_in_slot_order(runs, browser_client):
    run = runs[("claude", "parallel")]
    main = AgentContext.objects.get(run=run, role="main")
    page = browser_client.get(f"/trajectories/runs/{run.pk}/contexts/{main.pk}/events/").content.decode()
    listing = page.split('<details class="workflow-agents">')[1].split("</details>")[0]
    assert "workflow <code>wf_f6715fa9-66d</code>: 11 agents" in listing
    order = claude_reading(TASK / "claude" / "parallel")["order"]
    pks = dict(AgentContext.objects.filter(run=run).values_list("external_id", "pk"))
    links = [int(part.split('"')[0]) for part in listing.split('href="#agent-')[1:]]
    assert links == [pks[agent] for agent in order]
    agents = browser_client.get(f"/trajectories/runs/{run.pk}/contexts/").content.decode()
    assert all(f'id="agent-{pk}"' in agents for pk in links)  # each link lands on its agent


def test_a_workflow_state_line_opens_indented_and_the_timeline_names_slots(runs, browser_client):
    run = runs[("claude", "parallel")]
    state = f"parallel/{CLAUDE_SESSION}/workflows/wf_f6715fa9-66d.json:1"
    page = browser_client.get(resolve_anchor(run=run, text=state, default_mode="concurrent").url).content.decode()
    assert "No event was read from this line" in page
    indented = page.split('<details class="json-view" open>')[1].split("</details>")[0]
    assert "&quot;runId&quot;: &quot;wf_f6715fa9-66d&quot;," in indented  # one key a line
    timeline = browser_client.get(f"/trajectories/runs/{run.pk}/timeline/").content.decode()
    reading = claude_reading(TASK / "claude" / "parallel")
    names = [
        f"{slot} {number}/{total}" if total > 1 else slot
        for slot, number, total in (reading["slots"][agent][1:] for agent in reading["order"])
    ]
    drawn = [part.split("</div>")[0].split("</span> ")[1] for part in timeline.split('class="lane-label')[2:]]
    assert drawn == names
