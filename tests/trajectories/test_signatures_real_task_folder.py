"""The detectors on the study's own task folder, read whole from the shared folder where it lies
(swebench_verified/django__django-10999: three agents' parallel and serial runs, each pair's published
review.json). Against the study's published decisions: no hit names a mode that the pair's review.json
rejects; every mode it retains that some detector claims to cover is found; every piece of evidence a hit
cites opens the line it describes. The figures are read from the native files by the small reader below,
not by Parallax's parsers. Skipped when the folder is absent."""

from __future__ import annotations

import html
import json
import re
from datetime import datetime
from pathlib import Path

import pytest

from annotation.models import Study
from annotation.selectors.queue import annotation_for
from annotation.services.hints import annotation_hints_show
from tests.factories import client_for
from trajectories.models import Run, SignatureHit
from trajectories.selectors import resolve_anchor, run_hints
from trajectories.signatures import DETECTOR_MODES

pytestmark = pytest.mark.django_db

TASK = Path("swebench_verified") / "django__django-10999"
AGENTS = {"claude": "Claude Code", "codex": "Codex", "kimi": "Kimi Code"}
CLAUDE_HOME = Path("agent/claude/.claude/projects/-testbed")
MAIN_SESSION = "e38d6828-ef38-4ccd-a8cc-540e0eec8b72"


# -- an independent reader of the native files ------------------------------------------------------


def slug(name: str) -> str:
    """A codebook name as the codebook's key (its own rule: lower case, words joined by '-')."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def decisions(root: Path, agent: str) -> dict[str, str]:
    """review.json's decision per candidate mode, by mode key."""
    document = json.loads((root / TASK / agent / "review.json").read_text(encoding="utf-8"))
    return {
        slug(candidate["third_label"]): candidate["decision"]
        for group in document["taxonomy_decisions"]
        for candidate in group["candidates"]
    }


def retained_in_annotation(root: Path, agent: str) -> dict[str, list[str]]:
    """annotation.md's retained modes (each `## Failure N` section's third_label), by mode key: the anchors its
    `parallel_evidence` line cites."""
    found: dict[str, list[str]] = {}
    mode = ""
    for line in lines(root / TASK / agent / "annotation.md"):
        if line.startswith("third_label:"):
            mode = slug(line.split(":", 1)[1])
            found[mode] = []
        elif line.startswith("parallel_evidence:") and mode:
            found[mode] += re.findall(r"`([^`]+)`", line)
    return found


def study_anchors(root: Path, agent: str, mode: str) -> set[str]:
    """The lines the study cites for a retained mode: review.json's parallel_evidence and annotation.md's."""
    document = json.loads((root / TASK / agent / "review.json").read_text(encoding="utf-8"))
    cited = {
        f"{ev['path']}:{ev['line']}"
        for pattern in document["retained_patterns"]
        if slug(pattern["third_label"]) == mode
        for ev in pattern["parallel_evidence"]
    }
    return cited | set(retained_in_annotation(root, agent).get(mode, []))


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def when(record: dict) -> datetime:
    return datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00"))


def tool_uses(record: dict) -> list[dict]:
    content = (record.get("message") or {}).get("content")
    return [c for c in content if c.get("type") == "tool_use"] if isinstance(content, list) else []


def claude_parallel(root: Path) -> Path:
    return root / TASK / "claude" / "parallel"


def workflow_attempts(root: Path) -> dict[str, list[dict]]:
    """Every sub-agent transcript of the Claude workflow, by agent id: its records."""
    folder = claude_parallel(root) / CLAUDE_HOME / MAIN_SESSION / "subagents" / "workflows"
    return {
        path.stem.removeprefix("agent-"): [json.loads(line) for line in lines(path) if line.strip()]
        for path in sorted(folder.glob("*/agent-*.jsonl"))
    }


def patch_new_files(root: Path) -> dict[str, int]:
    """The files model.patch creates, with the line of their `diff --git` header."""
    found, header = {}, None
    for number, line in enumerate(lines(claude_parallel(root) / "cell" / "model.patch"), 1):
        if line.startswith("diff --git a/"):
            header = (line.split(" b/", 1)[1], number)
        elif line.startswith("new file mode") and header:
            found[header[0]] = header[1]
    return found


def written_by(records: list[dict]) -> set[str]:
    """Files a transcript writes: its Write/Edit calls' paths and its shell commands' `cat > path`."""
    paths = set()
    for record in records:
        for use in tool_uses(record):
            if use["name"] in ("Write", "Edit", "MultiEdit"):
                paths.add(use["input"]["file_path"])
            elif use["name"] == "Bash":
                paths.update(re.findall(r"cat >\s*(\S+)", use["input"].get("command", "")))
    return paths


# -- the runs --------------------------------------------------------------------------------------


def concurrent(agent: str) -> Run:
    return Run.objects.get(agent__name=AGENTS[agent], mode="concurrent")


def hit_modes(run: Run) -> set[str]:
    return {mode for hit in SignatureHit.objects.filter(run=run) for mode in hit.modes}


@pytest.mark.parametrize("agent", list(AGENTS))
def test_no_hit_names_a_mode_the_published_review_rejects(artifact_runs, agent):
    decided = decisions(artifact_runs, agent)
    assert len(decided) == 32  # the review rules on every candidate mode of the codebook
    rejected = {mode for mode, decision in decided.items() if decision == "reject"}
    named = hit_modes(concurrent(agent))
    assert not named & rejected, sorted(named & rejected)


@pytest.mark.parametrize("agent", list(AGENTS))
def test_every_retained_mode_a_detector_covers_is_found(artifact_runs, agent):
    covered = {mode for modes in DETECTOR_MODES.values() for mode in modes}
    retained = {mode for mode, decision in decisions(artifact_runs, agent).items() if decision == "retain"}
    assert retained == set(retained_in_annotation(artifact_runs, agent))  # the two published records agree
    assert retained & covered <= hit_modes(concurrent(agent))
    if agent == "claude":  # the study retains two modes there, both covered
        assert retained == {"fan-out-budget-exhaustion", "artifact-leakage"} <= covered


def test_the_sequential_runs_and_the_runs_without_sub_agents_show_nothing(artifact_runs):
    for run in Run.objects.filter(mode="sequential"):
        assert not run.signature_hits.exists()
        assert run.signatures_note == "no sub-agents: the concurrency signatures do not apply"
    kimi = concurrent("kimi")  # its cell says actual_parallel_used: false
    cell = json.loads((artifact_runs / TASK / "kimi" / "parallel" / "cell.json").read_text(encoding="utf-8"))
    assert cell["actual_parallel_used"] is False
    assert not kimi.signature_hits.exists()


def test_the_fan_out_hit_counts_what_the_native_files_show(artifact_runs):
    attempts = workflow_attempts(artifact_runs)
    ends = {agent: max(when(r) for r in records if "timestamp" in r) for agent, records in attempts.items()}
    run_end = max(ends.values())
    cut = [agent for agent, end in ends.items() if (run_end - end).total_seconds() <= 5]
    main = [json.loads(line) for line in lines(claude_parallel(artifact_runs) / CLAUDE_HOME / f"{MAIN_SESSION}.jsonl")]
    main_end = max(when(r) for r in main if r.get("timestamp"))
    assert (len(attempts), len(cut)) == (11, 5)
    [hit] = SignatureHit.objects.filter(run=concurrent("claude"), detector="fanout_budget")
    assert hit.modes == ["fan-out-budget-exhaustion"]
    assert f"{len(cut)} of the {len(attempts)} sub-agents" in hit.explanation
    assert f"the run stopped at {run_end:%H:%M:%S}" in hit.explanation
    assert f"its log ends at {main_end:%H:%M:%S}" in hit.explanation
    cited = {ev["agent"] for ev in hit.evidence} - {"main", ""}  # "": the workflow's record
    assert cited and cited <= set(cut)  # the sub-agents it cites are among those cut off


def test_the_leakage_hit_names_the_files_sub_agents_wrote_into_the_patch(artifact_runs):
    new = patch_new_files(artifact_runs)
    attempts = workflow_attempts(artifact_runs)
    main_text = (claude_parallel(artifact_runs) / CLAUDE_HOME / f"{MAIN_SESSION}.jsonl").read_text(encoding="utf-8")
    leaked = {
        path: agent
        for agent, records in attempts.items()
        for written in written_by(records)
        for path in new
        if written.endswith("/" + path) and path.rsplit("/", 1)[-1] not in main_text
    }
    assert set(leaked) == {"probe/p1.py", "redos_probe.py"}
    [hit] = SignatureHit.objects.filter(run=concurrent("claude"), detector="artifact_leakage")
    assert hit.modes == ["artifact-leakage"]
    for path, agent in leaked.items():
        assert f"{path} ({agent}" in hit.explanation
    assert {(ev["source"], ev["line"]) for ev in hit.evidence if ev["source"]} == {
        ("cell/model.patch", new[path]) for path in leaked
    }


def test_every_cited_event_opens_the_line_it_describes(artifact_runs, browser_client):
    """Each evidence anchor resolves to a stored file and line of the pair, that line is the native file's
    own, and it is what the evidence says: the agent's record at the cited time, naming the cited file; the
    patch's header of the cited file. The opened page marks that line."""
    run = concurrent("claude")
    cell = claude_parallel(artifact_runs)
    rows = run_hints(run=run)
    assert rows and all(row["hit"].wrong_if.startswith("Wrong if") for row in rows)
    checked = 0
    for row in rows:
        for ev in row["evidence"]:
            assert ev["note"], ev  # every piece of evidence says in words what it shows
            assert ev["anchor"].startswith("parallel/"), ev
            path, line = ev["anchor"].removeprefix("parallel/").rsplit(":", 1)
            native = lines(cell / path)[int(line) - 1]
            if ev["source"] == "cell/model.patch":  # a line of the patch
                assert native == f"diff --git a/{ev['file']} b/{ev['file']}"
            elif ev["source"]:  # a workflow's own record: how it ended
                state = json.loads(native)
                assert ev["source"].endswith(f"workflows/{state['runId']}.json") and state["result"] is None
                retried = sum("retrying" in entry for entry in state["logs"])
                assert f"status {state['status']}, no result, {retried} agents retried" in ev["note"]
            else:
                record = json.loads(native)
                assert when(record) == datetime.fromisoformat(ev["time"])
                if ev["agent"] == "main":
                    assert not record["isSidechain"] and record["sessionId"] == MAIN_SESSION
                else:
                    assert record["agentId"] == ev["agent"]
                if ev["file"]:
                    assert any(ev["file"] in json.dumps(use["input"]) for use in tool_uses(record))
                if "killed" in ev["note"]:
                    assert "[Request interrupted by user]" in native
            resolved = resolve_anchor(run=run, text=ev["anchor"], default_mode="concurrent")
            page = browser_client.get(resolved.url).content.decode()
            target = re.search(rf'<tr id="L{line}" class="[^"]*\btarget">.*?<pre>(.*?)</pre>', page, re.S)
            assert target and html.unescape(target.group(1)) == native, ev["anchor"]
            checked += 1
    assert checked >= 9


def test_the_hints_panel_says_what_each_hit_rests_on_and_what_would_make_it_wrong(artifact_study, artifact_root):
    Study.objects.filter(pk=artifact_study.pk).update(hint_policy="always")
    run = concurrent("claude")
    assignment = artifact_study.assignments.filter(run=run).select_related("annotator").first()
    annotation_hints_show(annotation=annotation_for(assignment=assignment), actor=assignment.annotator)
    page = client_for(assignment.annotator).get(f"/annotate/{assignment.pk}/").content.decode()
    panel = page.split('id="hints"')[1].split("</section>")[0]
    shown = html.unescape(panel)
    for hit in SignatureHit.objects.filter(run=run):
        assert hit.explanation in shown and hit.wrong_if in shown
        assert all(ev["note"] in shown for ev in hit.evidence)
    assert "Fan-out Budget Exhaustion" in panel and "Artifact Leakage" in panel
    # Each hit cites the very lines the study cites for its mode (review.json and annotation.md) in the agents'
    # transcripts, the workflow's record and the final patch: the lines an event or the detectors read (the study
    # also cites the workflow's script, the harness's status and the evaluation's logs, which no event is on).
    read = re.compile(r"^parallel/(agent/.*\.jsonl|agent/.*/workflows/[^/]+\.json|cell/model\.patch):\d+$")
    for hit in SignatureHit.objects.filter(run=run):
        [mode] = hit.modes
        [item] = [li for li in panel.split('<li class="hint">') if f'class="detector">{hit.detector}<' in li]
        anchors = set(re.findall(r'data-anchor="([^"]+)"', item))
        study = {a for a in study_anchors(artifact_root, "claude", mode) if read.match(a)}
        assert study and study <= anchors, (mode, sorted(study - anchors))


def test_recomputing_gives_the_hits_the_import_stored(artifact_runs):
    from django.core.management import call_command

    run = concurrent("claude")
    fields = ("detector", "modes", "evidence", "explanation", "wrong_if")
    stored = list(run.signature_hits.order_by("position").values_list(*fields))
    assert [row[0] for row in stored] == ["fanout_budget", "artifact_leakage"]
    call_command("detect_signatures", "--run", str(run.pk))  # from the stored events and the stored patch
    assert list(run.signature_hits.order_by("position").values_list(*fields)) == stored
