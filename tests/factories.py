"""The builders tests share: users and their clients, runs (Parallax JSONL, native logs, the artifact's cells),
studies, codings, and the forms and helpers several test modules post or call. Fixtures that use them are in
the conftest.py files; no test module imports another."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
from django.contrib.auth.models import Group, User
from django.test import Client

FIXTURES = Path(__file__).parent / "fixtures"
REAL = FIXTURES / "real"
ROOT = Path(__file__).resolve().parents[1]
HTMX = {"HTTP_HX_REQUEST": "true"}


# -- users ----------------------------------------------------------------------------------------


def new_user(username: str, role: str | None = None, **extra) -> User:
    """A user whose password is "pw-<username>", in the group of `role` (accounts.roles) if given."""
    created = User.objects.create_user(username=username, password="pw-" + username, **extra)
    if role:
        created.groups.add(Group.objects.get_or_create(name=role)[0])
    return created


def client_for(who: User) -> Client:
    client = Client()
    client.force_login(who)
    return client


# -- runs in Parallax JSONL -----------------------------------------------------------------------


def header(
    task: str = "t-1", mode: str = "concurrent", agent: str = "Codex", benchmark: str = "SWE-bench Verified", **outcomes
) -> dict:
    return {
        "type": "run",
        "format": "parallax/1",
        "task": {"benchmark": benchmark, "id": task, "difficulty": "hard"},
        "agent": {"system": agent, "model": "m"},
        "mode": mode,
        "outcomes": outcomes or {"task_pass": True, "tests_passed": 9, "tests_total": 10, "duration_s": 60.0},
    }


def ctx(cid: str, parent: str | None = None, start: str | None = None, end: str | None = None, **extra) -> dict:
    line = {
        "type": "context",
        "id": cid,
        "role": "main" if parent is None else "sub",
        "parent": parent,
        "label": extra.pop("label", cid),
    }
    if start:
        line["started_at"] = start
    if end:
        line["ended_at"] = end
    line.update(extra)
    return line


def ev(context: str, seq: int, ts: str, kind: str = "tool_call", **extra) -> dict:
    return {"type": "event", "context": context, "seq": seq, "ts": ts, "kind": kind, **extra}


def t(seconds: float) -> str:
    """Timestamp `seconds` after a fixed origin, ISO with Z."""
    minutes, sec = divmod(seconds, 60)
    return f"2026-08-01T10:{int(minutes):02d}:{sec:06.3f}Z"


def simple_run(task: str = "t-1", mode: str = "concurrent", agent: str = "Codex", n_sub: int = 2) -> list[dict]:
    lines = [header(task, mode, agent), ctx("main", start=t(0), end=t(100))]
    lines.append(ev("main", 0, t(0), "message", text="go"))
    for i in range(n_sub):
        cid = f"sub-{i}"
        lines.append(ev("main", i + 1, t(10 + i), "spawn", target=cid))
        lines.append(ctx(cid, "main", start=t(10 + i), end=t(50 + i)))
        lines.append(ev(cid, 0, t(12 + i), "file_write", tool="Edit", files=[f"src/f{i}.py"]))
    return lines


def write_jsonl(path: Path, lines: list[dict | bytes | str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        for line in lines:
            if isinstance(line, bytes):
                out.write(line + b"\n")
            elif isinstance(line, str):
                out.write(line.encode() + b"\n")
            else:
                out.write(orjson.dumps(line) + b"\n")
    return path


# -- OpenTelemetry GenAI traces (OTLP/JSON) --------------------------------------------------------

OTLP_ORIGIN_NS = 1_785_000_000_000_000_000  # 2026-07-25T17:20:00Z


def otlp_span(
    span_id: str, parent: str | None, start: float, end: float, op: str = "", name: str = "", attrs: dict | None = None
) -> dict:
    """One OTLP/JSON span, `start`/`end` seconds after OTLP_ORIGIN_NS; `attrs` are gen_ai.* attributes
    without their prefix ({"agent.name": "lead"} → gen_ai.agent.name)."""
    attributes = [{"key": "gen_ai.operation.name", "value": {"stringValue": op}}] if op else []
    for key, value in (attrs or {}).items():
        typed = {"intValue": str(value)} if isinstance(value, int) else {"stringValue": value}
        attributes.append({"key": f"gen_ai.{key}", "value": typed})
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": span_id,
        "name": name or op,
        "kind": 1,
        "startTimeUnixNano": str(OTLP_ORIGIN_NS + int(start * 1e9)),
        "endTimeUnixNano": str(OTLP_ORIGIN_NS + int(end * 1e9)),
        "attributes": attributes,
        "status": {},
    }
    if parent:
        span["parentSpanId"] = parent
    return span


def otlp_request(spans: list[dict], service: str = "team-harness") -> dict:
    """An OTLP/JSON export request holding `spans` under one resource."""
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": {"name": "harness"}, "spans": spans}]}]}


def otlp_team_trace() -> list[dict]:
    """A lead agent that starts two workers at once through a tool (agents as tools), one of which starts a
    checker of its own: lead [0, 100] s; worker-a [10, 50], worker-b [12, 70], checker [20, 40] inside worker-a.
    The same shape as PARALLAX_TEAM_RUN."""
    usage = lambda i, o: {"request.model": "m", "usage.input_tokens": i, "usage.output_tokens": o}  # noqa: E731
    return [
        otlp_span("a0", None, 0, 100, "invoke_agent", "invoke_agent lead", {"agent.name": "lead"}),
        otlp_span("c1", "a0", 1, 5, "chat", "chat m", usage(100, 20)),
        otlp_span("t1", "a0", 9, 71, "execute_tool", "execute_tool delegate", {"tool.name": "delegate"}),
        otlp_span("a1", "t1", 10, 50, "invoke_agent", "invoke_agent worker-a", {"agent.name": "worker-a"}),
        otlp_span("t2", "a1", 11, 12, "execute_tool", "execute_tool bash", {"tool.name": "bash",
                  "tool.call.arguments": '{"command": "pytest -q"}', "tool.call.result": "3 passed"}),
        otlp_span("a3", "a1", 20, 40, "invoke_agent", "invoke_agent checker", {"agent.name": "checker",
                  "output.messages": '[{"role": "assistant", "parts": [{"type": "text", "content": "all green"}]}]'}),
        otlp_span("c3", "a3", 21, 22, "chat", "chat m", usage(50, 5)),
        otlp_span("a2", "t1", 12, 70, "invoke_agent", "invoke_agent worker-b", {"agent.name": "worker-b"}),
        otlp_span("t3", "a2", 13, 14, "execute_tool", "execute_tool write_file", {"tool.name": "write_file",
                  "tool.call.arguments": '{"file_path": "src/app.py", "content": "x = 1"}'}),
        otlp_span("c2", "a2", 15, 16, "chat", "chat m", usage(70, 7)),
    ]  # fmt: skip


PARALLAX_TEAM_RUN = [
    header("otel-team", "concurrent", "team-harness"),
    ctx("main", start=t(0), end=t(100)),
    ctx("worker-a", "main", start=t(10), end=t(50)),
    ctx("worker-b", "main", start=t(12), end=t(70)),
    ctx("checker", "worker-a", start=t(20), end=t(40)),
    ev("main", 0, t(10), "spawn", target="worker-a"),
]


# -- Gemini CLI sessions -----------------------------------------------------------------------------


def gemini_at(seconds: float) -> str:
    return f"2026-07-01T09:{int(seconds // 60):02d}:{seconds % 60:06.3f}Z"


def gemini_session(turns: list[dict], session_id: str = "3f2d9c41-0000-4000-8000-00000000beef") -> dict:
    """A Gemini CLI session document (chats/session-*.json) holding `turns` (messages) after one user prompt."""
    prompt = {"id": "u0", "timestamp": gemini_at(0), "type": "user", "content": "fix the failing test"}
    return {"sessionId": session_id, "projectHash": "ab" * 32, "startTime": gemini_at(0),
            "lastUpdated": gemini_at(100), "messages": [prompt, *turns]}  # fmt: skip


def gemini_agent_call(call_id: str, objective: str, done: float) -> dict:
    """A call of the CLI's built-in sub-agent that finished `done` seconds into the session."""
    return {"id": call_id, "name": "codebase_investigator", "args": {"objective": objective}, "status": "success",
            "timestamp": gemini_at(done), "displayName": "Codebase Investigator Agent",
            "resultDisplay": "Subagent codebase_investigator Finished"}  # fmt: skip


def six_pairs(folder: Path) -> None:
    """Six paired tasks (12 runs) over two agents and two benchmarks, imported from `folder`."""
    from trajectories.services import import_paths

    for i in range(6):
        agent = "Codex" if i % 2 else "Kimi Code"
        bench = "LoopsBench" if i < 3 else "NL2Repo"
        for mode in ("concurrent", "sequential"):
            lines = simple_run(f"task-{i}", mode, agent, n_sub=2 if mode == "concurrent" else 0)
            lines[0]["task"]["benchmark"] = bench
            write_jsonl(folder / f"{i}-{mode}.jsonl", lines)
    import_paths(paths=[folder])


def more_pairs(folder: Path, n: int) -> list[int]:
    """`n` more Codex pairs (tasks late-00, late-01, …) imported from `folder`/more: their concurrent runs' ids."""
    from trajectories.models import Run
    from trajectories.services import import_paths

    for i in range(n):
        for mode in ("concurrent", "sequential"):
            write_jsonl(folder / "more" / f"{i}-{mode}.jsonl", simple_run(f"late-{i:02d}", mode, "Codex"))
    import_paths(paths=[folder / "more"])
    return list(
        Run.objects.filter(task__external_id__startswith="late-", mode="concurrent")
        .order_by("pk")
        .values_list("pk", flat=True)
    )


COLLISION = "same-file-collision"
LABELLED_TASKS = 14


def colliding_run(task: str, mode: str, collide: bool) -> list[dict]:
    """simple_run, its two sub-agents writing the same file at once when `collide`."""
    lines = simple_run(task, mode, "Codex", n_sub=2 if mode == "concurrent" else 0)
    if collide:
        for line in lines:
            if line.get("kind") == "file_write":
                line["files"] = ["src/shared.py"]
                line["text"] = "edit shared module"
    return lines


# -- runs in native formats and the artifact's cells ------------------------------------------------

CLAUDE_SID = "c6d74503-f6d8-4e90-8d4e-a0c06f8ba1c1"


def claude_ts(second: int) -> str:
    return f"2026-08-15T09:{40 + second // 60:02d}:{second % 60:02d}.000Z"


def claude_line(kind: str, second: int, content, **extra) -> dict:
    role = "assistant" if kind == "assistant" else "user"
    return {"type": kind, "sessionId": CLAUDE_SID, "timestamp": claude_ts(second),
            "message": {"role": role, "content": content}, "uuid": f"u{second}-{kind}", **extra}  # fmt: skip


def claude_call(second: int, tool: str, tool_id: str, **args) -> dict:
    return claude_line("assistant", second, [{"type": "tool_use", "id": tool_id, "name": tool, "input": args}])


def claude_result(second: int, tool_id: str, text: str) -> dict:
    return claude_line("user", second, [{"type": "tool_result", "tool_use_id": tool_id, "content": text}])


def claude_session(tmp_path: Path) -> Path:
    """A Claude Code 2.x session in the shapes of the study's real files (tests/fixtures/real/claude-code-workflow):
    an Agent call whose sub-agent calls another, and a Workflow whose slot `try` is retried under a new agent."""
    sid, line, call, result = CLAUDE_SID, claude_line, claude_call, claude_result
    project = tmp_path / "projects" / "-testbed"
    write_jsonl(project / f"{sid}.jsonl", [
        {"type": "queue-operation", "operation": "enqueue", "sessionId": sid, "timestamp": claude_ts(0)},
        line("user", 0, "Fix the FITS card bug."),
        call(5, "Agent", "toolu_scout", description="scout the tests", prompt="Find the failing tests."),
        call(8, "Workflow", "toolu_wf", script="export const meta = { name: 'fix-it' }"),
        result(9, "toolu_wf", "Workflow fix-it started in the background as task tsk12345"),
        result(60, "toolu_scout", "Two tests fail."),
        line("assistant", 61, [{"type": "text", "text": "Done."}]),
    ])  # fmt: skip
    sub = project / sid / "subagents"
    write_jsonl(sub / "agent-a1.jsonl", [
        line("user", 6, "Find the failing tests.", agentId="a1", isSidechain=True),
        call(10, "Bash", "toolu_b1", command="pytest -x"),
        call(12, "Agent", "toolu_deep", description="read one file", prompt="Check card.py."),
        result(40, "toolu_deep", "card.py:862 unescapes twice"),
        line("assistant", 59, [{"type": "text", "text": "Two tests fail."}]),
    ])  # fmt: skip
    write_jsonl(sub / "agent-a2.jsonl", [
        line("user", 13, "Check card.py.", agentId="a2", isSidechain=True),
        line("assistant", 39, [{"type": "text", "text": "card.py:862 unescapes twice"}]),
    ])  # fmt: skip
    wf = sub / "workflows" / "wf_abc123"
    for agent, start, end in (("w1", 10, 20), ("w2", 21, 50), ("w3", 10, 45)):
        write_jsonl(wf / f"agent-{agent}.jsonl", [
            line("user", start, f"slot prompt {agent}", agentId=agent, isSidechain=True),
            line("assistant", end, [{"type": "text", "text": "ok"}]),
        ])  # fmt: skip
    write_jsonl(wf / "journal.jsonl", [
        {"type": "started", "key": "v2:slot-try", "agentId": "w1"},
        {"type": "started", "key": "v2:slot-check", "agentId": "w3"},
        {"type": "started", "key": "v2:slot-try", "agentId": "w2"},  # the same slot, a new agent: a retry
        {"type": "result", "key": "v2:slot-check", "agentId": "w3", "result": {}},
    ])  # fmt: skip
    progress = [{"type": "workflow_phase", "index": 1, "title": "Try"}]
    for agent, label, start, end in (("w1", "try", 10, 20), ("w2", "try", 21, 50), ("w3", "check", 10, 45)):
        progress.append({"type": "workflow_agent", "agentId": agent, "label": label, "phaseTitle": "Try",
                         "startedAt": 1786786800000 + start * 1000, "lastProgressAt": 1786786800000 + end * 1000,
                         "state": "completed"})  # fmt: skip
    state = {"runId": "wf_abc123", "taskId": "tsk12345", "workflowName": "fix-it", "status": "completed",
             "startTime": 1786786810000, "durationMs": 40000, "workflowProgress": progress}  # fmt: skip
    (project / sid / "workflows").mkdir(parents=True)
    (project / sid / "workflows" / "wf_abc123.json").write_text(json.dumps(state))
    return tmp_path / "projects"


CELLS = FIXTURES / "artifact-excerpts" / "cells"
EXEC = FIXTURES / "artifact-excerpts" / "codex-exec" / "trajectory__EXCERPT_lines1-9.jsonl"
PATCH = """diff --git a/parse.py b/parse.py
new file mode 100644
--- /dev/null
+++ b/parse.py
@@ -0,0 +1,3 @@
+def parse(fmt, text):
+    return None
+
diff --git a/README.rst b/README.rst
--- a/README.rst
+++ b/README.rst
@@ -1,2 +1,2 @@
 parse
-=====
+======
"""
TEST_OUTPUT = """============================= test session starts ==============================
tests/test_parse.py::test_no_match PASSED                                [ 33%]
tests/test_parse.py::test_named FAILED                                   [ 66%]
tests/test_parse.py::test_spans PASSED                                   [100%]
=========================== short test summary info ============================
FAILED tests/test_parse.py::test_named - AssertionError: assert None == {'a': 1}
"""


def parse_pair(tmp_path: Path, *, patch: bool = False):
    """The study's nl2repo/parse/codex pair, each cell with the exec excerpt as its log: (concurrent, sequential)."""
    from trajectories.models import Run
    from trajectories.services import import_paths

    root = tmp_path / "artifact"
    shutil.copytree(CELLS / "nl2repo" / "parse", root / "nl2repo" / "parse")
    pair = root / "nl2repo" / "parse" / "codex"
    for mode in ("parallel", "serial"):
        shutil.copy(EXEC, pair / mode / "cell" / "trajectory.jsonl")
    if patch:
        (pair / "serial" / "cell" / "model.patch").write_text(PATCH)
        (pair / "serial" / "cell" / "evaluation").mkdir()
        (pair / "serial" / "cell" / "evaluation" / "test_output.txt").write_text(TEST_OUTPUT)
    report = import_paths(paths=[root])
    assert [r.status for r in report.results] == ["imported", "imported"], report.results
    runs = {run.mode: run for run in Run.objects.all()}
    return runs["concurrent"], runs["sequential"]


ARTIFACT_TASK = "swebench_verified/django__django-10999"
ARTIFACT_AGENTS = ("claude", "codex", "kimi")


def artifact_run_of(study, agent: str):
    """The concurrent run of `agent` (claude, codex, kimi) in a study of the artifact's task folder."""
    names = {"claude": "Claude Code", "codex": "Codex", "kimi": "Kimi Code"}
    return study.runs.get(agent__name=names[agent])


# -- studies --------------------------------------------------------------------------------------


def assigned_study(folder: Path, codebook, annotators, adjudicator):
    """A 2-of-N study named "S" of six_pairs (imported from `folder`), assigned."""
    from annotation.services.studies import study_assign, study_create

    six_pairs(folder)
    created = study_create(name="S", codebook=codebook, annotators=annotators, adjudicator=adjudicator)
    study_assign(study=created)
    return created


def dictdb_study(folder: Path, codebook, annotators, adjudicator):
    """A study "P", not assigned, of one Codex pair of the task `dictdatabase` (benchmark nl2repo): the pair of
    the published sample PUBLISHED_SAMPLE."""
    from annotation.services.studies import study_create
    from trajectories.services import import_paths

    for mode in ("concurrent", "sequential"):
        lines = simple_run("dictdatabase", mode, "Codex", n_sub=1 if mode == "concurrent" else 0)
        lines[0]["task"]["benchmark"] = "nl2repo"
        write_jsonl(folder / f"{mode}.jsonl", lines)
    import_paths(paths=[folder])
    return study_create(name="P", codebook=codebook, annotators=annotators, adjudicator=adjudicator)


PUBLISHED_SAMPLE = REAL / "paper-annotations" / "nl2repo__dictdatabase__codex" / "annotation.md"


def labelled_study(tmp_path: Path, codebook, annotators, adjudicator):
    """A study of LABELLED_TASKS concurrent runs, one per task; every other run's sub-agents collide on one
    file. Final labels for all but the last two runs: a colliding run has same-file-collision."""
    from annotation.models import FinalCoding, FinalLabel
    from annotation.services.studies import study_create
    from trajectories.models import Run
    from trajectories.services import import_paths

    for i in range(LABELLED_TASKS):
        for mode in ("concurrent", "sequential"):
            write_jsonl(tmp_path / "lab" / f"{i}-{mode}.jsonl", colliding_run(f"lab-{i:02d}", mode, i % 2 == 0))
    import_paths(paths=[tmp_path / "lab"])
    runs = list(Run.objects.filter(task__external_id__startswith="lab-", mode="concurrent").order_by("pk"))
    study = study_create(name="Labelled", codebook=codebook, annotators=annotators, adjudicator=adjudicator,
                         run_ids=[r.pk for r in runs])  # fmt: skip
    code = mode_code(codebook, COLLISION)
    for index, run in enumerate(runs[:-2]):
        final = FinalCoding.objects.create(study=study, run=run, provenance="adjudicated", no_failure=index % 2 == 1)
        if index % 2 == 0:
            FinalLabel.objects.create(final=final, code=code, rationale="[test]", provenance="adjudicated")
    return study


# The analysis settings form as a new study has it (annotation.study_settings' defaults).
ANALYSIS_SETTINGS_FORM = {
    "kappa_universe": "codebook",
    "higher_test_pass": "on",
    "test_pass_margin": "0",
    "solved_only_concurrently": "on",
    "faster": "on",
    "faster_min_seconds": "60",
    "faster_min_fraction": "0.2",
    "mechanisms": "complementary: complementary work\nalternatives: alternative-solution selection\n"
    "verification: independent verification\nother: other\nnone: no real advantage (noise)",
}

REPRODUCE_SCRIPT = ROOT / "docs" / "reproduce_study.py"


def reproduce(bundle: Path, *args: str) -> subprocess.CompletedProcess:
    """docs/reproduce_study.py on a study's bundle."""
    # -I: isolated mode, so the script cannot import Parallax even by accident (no cwd on sys.path)
    return subprocess.run(
        [sys.executable, "-I", str(REPRODUCE_SCRIPT), str(bundle), *args], capture_output=True, text=True
    )


# -- codings --------------------------------------------------------------------------------------


def mode_code(codebook, key: str):
    return codebook.codes.get(key=key)


CITED_LINE = {"lossy-handoff": 3, "stale-handoff": 4}  # lines of a `study` run's log the tests cite


def cite(run, key: str = "") -> str:
    """An anchor that resolves: a line of the log a `study` run was imported from."""
    return f"parallel/{run.source_name}:{CITED_LINE.get(key, 1)}"


def both(study, run=None) -> list:
    """The two assignments of `run` (the study's first run if none), by slot."""
    from annotation.models import Assignment

    run = run or study.runs.order_by("pk").first()
    return list(Assignment.objects.filter(study=study, run=run).order_by("slot"))


def mine(study, who):
    """`who`'s assignments in `study`, by run."""
    from annotation.models import Assignment

    return Assignment.objects.filter(study=study, annotator=who).order_by("run_id")


def shared_run_assignments(study, a, b):
    """An assignment of `a` and one of `b` on the same run."""
    from annotation.models import Assignment

    for assignment in mine(study, a):
        other = Assignment.objects.filter(study=study, run=assignment.run, annotator=b).first()
        if other:
            return assignment, other
    raise AssertionError("no shared run")


def code_run(assignment, codes, rationale="because"):
    """Save and submit a coding of `codes` (Code rows; none: "no failure"), each label citing the run's log."""
    from annotation.selectors.queue import annotation_for
    from annotation.services.coding import LabelInput, annotation_save, annotation_submit

    annotation = annotation_for(assignment=assignment)
    run = assignment.run
    labels = [LabelInput(code_id=c.pk, rationale=f"{rationale} {c.key}", evidence=[cite(run, c.key)]) for c in codes]
    annotation_save(
        annotation=annotation,
        actor=assignment.annotator,
        version=annotation.version,
        no_failure=not codes,
        notes="",
        labels=labels,
    )
    annotation_submit(annotation=annotation, actor=assignment.annotator, version=annotation.version)
    return annotation


def code_keys(assignment, keys, *, submit=True):
    """Save (and submit) a coding of `keys` (mode keys of the study's current codebook)."""
    from annotation.models import Assignment
    from annotation.selectors.queue import annotation_for
    from annotation.services.coding import LabelInput, annotation_save, annotation_submit

    assignment = Assignment.objects.select_related("study__codebook", "annotator", "run").get(pk=assignment.pk)
    annotation = annotation_for(assignment=assignment)
    codebook = assignment.study.codebook
    labels = [LabelInput(code_id=codebook.codes.get(key=k).pk, rationale=f"because {k}") for k in keys]
    annotation_save(annotation=annotation, actor=assignment.annotator, version=annotation.version,
                    no_failure=not keys, notes="", labels=labels)  # fmt: skip
    if submit:
        annotation_submit(annotation=annotation, actor=assignment.annotator, version=annotation.version)
    return annotation


def submit_disagreement(study, run_id: int, codebook, *, rationale: str = "r", evidence: tuple[str, ...] = ()):
    """Both annotators of a run submit different modes (slot 1: lossy-handoff, slot 2: stale-handoff);
    returns the discussion that opens."""
    from annotation.models import Assignment, Discussion
    from annotation.selectors.queue import annotation_for
    from annotation.services.coding import LabelInput, annotation_save, annotation_submit

    pair = Assignment.objects.filter(study=study, run_id=run_id).order_by("slot")
    for assignment, key in zip(pair, ("lossy-handoff", "stale-handoff"), strict=True):
        annotation = annotation_for(assignment=assignment)
        label = LabelInput(code_id=mode_code(codebook, key).pk, rationale=rationale, evidence=list(evidence))
        annotation_save(
            annotation=annotation, actor=assignment.annotator, version=1, no_failure=False, notes="", labels=[label]
        )
        annotation_submit(annotation=annotation, actor=assignment.annotator, version=2)
    return Discussion.objects.get(study=study, run_id=run_id)


def code_study(study, codebook, adjudicator) -> None:
    """Every run of a `study` coded twice: runs 1–3 agree on lossy-handoff (on run 1 both saw it in two
    episodes), the rest disagree, one adjudicated. Run it inside captured on-commit callbacks (executed) for the
    worker's refresh of the statistics, as in production."""
    from annotation.models import Discussion
    from annotation.services import review as flow

    lossy, stale = mode_code(codebook, "lossy-handoff"), mode_code(codebook, "stale-handoff")
    for index, run in enumerate(study.runs.order_by("pk")):
        a, b = both(study, run)
        code_run(a, [lossy, lossy] if index == 0 else [lossy])
        code_run(b, ([lossy, lossy] if index == 0 else [lossy]) if index < 3 else [stale])
    discussion = Discussion.objects.order_by("pk").first()
    flow.discussion_escalate(discussion=discussion, actor=both(study, discussion.run)[0].annotator)
    flow.adjudicate(discussion=discussion, actor=adjudicator, rulings=[flow.Ruling(stale.pk, "adjudicated")])


def coding_form(code, version, rationale="because", evidence="", **extra) -> dict:
    """The coding page's form with one mode, as its save, submit and revise receive it."""
    data = {
        "version": version,
        "code": [code.pk],
        f"rationale-{code.pk}": rationale,
        f"evidence-{code.pk}": evidence,
        "notes": "",
    }
    data.update(extra)
    return data


ROUTE_SECRET = "B-PRIVATE-RATIONALE-7f3a"  # coder2's draft on a run coder1 codes too (route_world)


def route_world(study, codebook, trio) -> dict[str, dict]:
    """coder1's own objects and someone else's, one of each for every kind of id in the URL conf.

    coder1 and coder2 both code one run: coder1 has submitted it, coder2 is drafting it with ROUTE_SECRET in a
    rationale.
    That run is coder1's own run, their coding of it their own assignment, coder2's the foreign one. coder1 takes
    part in a discussion of another run of theirs (coder3 the other side); the foreign discussion is between
    coder2 and coder3 on a run coder1 does not code, the foreign run."""
    from annotation.analysis.store import analysis_refresh
    from annotation.annotation_md import parse_annotation_md
    from annotation.models import Discussion, PublishedRecord
    from annotation.selectors.queue import annotation_for
    from annotation.services.coding import LabelInput, annotation_save
    from annotation.services.pilot import pilot_create
    from trajectories.models import AgentContext, ImportBatch, RunFile

    me, b, c = trio
    mine_shared, theirs = shared_run_assignments(study, me, b)
    code_run(mine_shared, [mode_code(codebook, "lossy-handoff")])
    draft = annotation_for(assignment=theirs)
    label = LabelInput(code_id=mode_code(codebook, "stale-handoff").pk, rationale=ROUTE_SECRET)
    annotation_save(annotation=draft, actor=b, version=1, no_failure=False, notes="", labels=[label])
    own_run = mine_shared.run_id
    discussed = mine(study, me).exclude(run_id=own_run).filter(run__assignments__annotator=c).first().run_id
    own_discussion = submit_disagreement(study, discussed, codebook)
    coded_by_me = set(mine(study, me).values_list("run_id", flat=True))
    foreign_run = study.runs.exclude(pk__in=coded_by_me).order_by("pk").first().pk
    foreign_discussion = submit_disagreement(study, foreign_run, codebook)
    own_pilot = pilot_create(name="mine", annotators=[me, b], base_codebook=codebook, run_ids=[own_run])
    foreign_pilot = pilot_create(name="theirs", annotators=[b, c], base_codebook=codebook, run_ids=[foreign_run])
    batch = ImportBatch.objects.create(created_by=None, status="done")
    text = "pair_id: t/codex\nverdict: patterns_retained\n\n# Notes\nparallel_anchor: `parallel/x.jsonl:1`\n"
    records = {  # a published annotation.md of each run, kept as data (shown on the run's history page)
        run_id: PublishedRecord.objects.create(
            study=study, run_id=run_id, name="annotation.md", text=text, data=parse_annotation_md(text).data()
        )
        for run_id in (own_run, foreign_run)
    }
    ids = {}
    for side, run_id, assignment, discussion, pilot in (
        ("own", own_run, mine_shared, own_discussion, own_pilot),
        ("foreign", foreign_run, theirs, foreign_discussion, foreign_pilot),
    ):
        ids[side] = {
            "run_id": run_id,
            "assignment_id": assignment.pk,
            "discussion_id": discussion.pk,
            "pilot_id": pilot.pk,
            "record_id": records[run_id].pk,
            "context_id": AgentContext.objects.filter(run_id=run_id).order_by("pk").first().pk,
            "file_id": RunFile.objects.filter(run_id=run_id).order_by("pk").first().pk,
            "study_id": study.pk,
            "codebook_id": codebook.pk,
            "batch_id": batch.pk,
            "kind": "labels",
        }
    assert Discussion.objects.filter(study=study, status="open").count() == 2
    analysis_refresh(study_id=study.pk)  # the statistics exports read what the worker stored
    return ids
