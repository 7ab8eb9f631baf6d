"""Gemini CLI sessions (`~/.gemini/tmp/<project>/chats/session-*.json`): a real session read against its own
JSON, sub-agents (the CLI's agent tools) as lanes with the metrics of the same shape natively, bad input
refused with its place (docs/format.md#gemini-cli-geminitmpprojectchatssession-json)."""

from __future__ import annotations

import json
import shutil
from datetime import datetime

import pytest

from tests.factories import (
    REAL,
    client_for,
    ctx,
    gemini_agent_call,
    gemini_at,
    gemini_session,
    header,
    t,
    write_jsonl,
)
from trajectories.metrics import METRIC_FIELDS
from trajectories.models import Run
from trajectories.services import import_paths

pytestmark = pytest.mark.django_db

SESSION = REAL / "gemini-cli" / "session-2026-01-15T20-51-f7633853.json"


def _when(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_a_real_session_is_found_and_read_from_its_messages(tmp_path):
    folder = tmp_path / "chats"
    folder.mkdir()
    shutil.copy(SESSION, folder / SESSION.name)
    assert import_paths(paths=[folder]).count("imported") == 1
    run = Run.objects.get()
    raw = json.loads(SESSION.read_text())
    turns = [m for m in raw["messages"] if m["type"] == "gemini"]
    calls = [c for m in turns for c in m.get("toolCalls", [])]
    assert (run.source_format, run.agent.name, run.task.external_id) == ("gemini_cli", "Gemini CLI", raw["sessionId"])
    assert run.backbone_model == turns[0]["model"]
    (main,) = run.contexts.all()
    stamps = [raw["startTime"], raw["lastUpdated"], *(m["timestamp"] for m in raw["messages"])]
    stamps += [c["timestamp"] for c in calls]
    assert main.started_at.timestamp() == pytest.approx(min(map(_when, stamps)))
    assert main.ended_at.timestamp() == pytest.approx(max(map(_when, stamps)))
    kinds = [e.kind for e in run.events.all()]
    assert kinds.count("reasoning") == sum(len(m.get("thoughts", [])) for m in turns)
    users = sum(1 for m in raw["messages"] if m["type"] == "user")
    assert kinds.count("message") == users + sum(1 for m in turns if m.get("content"))
    assert kinds.count("other") == sum(1 for m in raw["messages"] if m["type"] not in ("user", "gemini", "error"))
    assert kinds.count("tool_call") + kinds.count("file_write") == len(calls)
    assert kinds.count("tool_result") + kinds.count("error") == len(calls)
    writes = [c for c in calls if c["name"] == "write_file"]
    assert [e.files for e in run.events.filter(kind="file_write")] == [[c["args"]["file_path"]] for c in writes]
    assert run.shell_calls == sum(1 for c in calls if c["name"] == "run_shell_command")
    assert run.tokens == sum(m["tokens"]["total"] for m in turns)


def test_agent_tools_are_sub_agents_with_the_metrics_of_the_same_shape_natively(tmp_path):
    turn = {"id": "g1", "timestamp": gemini_at(10), "type": "gemini", "content": "Investigating in parallel.",
            "model": "gemini-2.5-pro", "tokens": {"total": 50},
            "toolCalls": [gemini_agent_call("ci-1", "map the parser", 50), gemini_agent_call("ci-2", "map tests", 70),
                          {"id": "sh-1", "name": "run_shell_command", "args": {"command": "pytest"},
                           "status": "error", "timestamp": gemini_at(12), "resultDisplay": "1 failed"}]}  # fmt: skip
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "session.json").write_text(json.dumps(gemini_session([turn]), indent=2))
    native = [header("gemini-shape", "concurrent", "Native"), ctx("main", start=t(0), end=t(100)),
              ctx("a", "main", start=t(10), end=t(50)), ctx("b", "main", start=t(10), end=t(70))]  # fmt: skip
    write_jsonl(tmp_path / "n" / "native.jsonl", native)
    assert import_paths(paths=[tmp_path / "g", tmp_path / "n"]).count("imported") == 2
    gemini, same = Run.objects.get(source_format="gemini_cli"), Run.objects.get(source_format="parallax")
    assert sorted(c.label for c in gemini.contexts.all()) == ["Codebase Investigator Agent"] * 2 + ["Gemini CLI"]
    subs = gemini.contexts.filter(role="sub").order_by("ended_at")
    assert [(s.parent.label, s.started_at.timestamp(), s.ended_at.timestamp()) for s in subs] == [
        ("Gemini CLI", _when(gemini_at(10)), _when(gemini_at(done))) for done in (50, 70)
    ]
    assert {f: getattr(gemini, f) for f in METRIC_FIELDS} == {f: getattr(same, f) for f in METRIC_FIELDS}
    assert gemini.peak_concurrency == 2 and gemini.mode == "concurrent"
    spawns = list(gemini.events.filter(kind="spawn").order_by("seq"))
    assert [e.text for e in spawns] == ["map the parser", "map tests"]
    assert {e.target for e in spawns} == {s.external_id for s in subs}
    assert gemini.events.get(kind="error").text == "1 failed" and gemini.shell_calls == 1


@pytest.mark.parametrize(
    ("break_it", "says"),
    [
        (lambda doc: doc["messages"][1].update(timestamp="soon"), "field 'messages[1].timestamp'"),
        (lambda doc: doc["messages"][1].update(toolCalls={"name": "x"}), "field 'messages[1].toolCalls'"),
        (lambda doc: doc["messages"][1]["toolCalls"].append({"args": {}}), "field 'messages[1].toolCalls[3]'"),
        (lambda doc: doc["messages"].append("hello"), "field 'messages[2]': expected a message object"),
    ],
)
def test_a_malformed_session_is_refused_naming_its_field_and_nothing_is_stored(tmp_path, break_it, says):
    turn = {"id": "g1", "timestamp": gemini_at(10), "type": "gemini", "content": "x",
            "toolCalls": [gemini_agent_call("ci-1", "a", 20), gemini_agent_call("ci-2", "b", 30),
                          gemini_agent_call("ci-3", "c", 40)]}  # fmt: skip
    document = gemini_session([turn])
    break_it(document)
    (tmp_path / "session.json").write_text(json.dumps(document, indent=2))
    failed = [r.message for r in import_paths(paths=[tmp_path / "session.json"]).results if r.status == "failed"]
    assert len(failed) == 1 and failed[0].startswith("session.json") and says in failed[0], failed
    assert not Run.objects.exists()


def test_a_cut_session_and_one_without_its_id_are_refused(tmp_path):
    whole = json.dumps(gemini_session([]), indent=2)
    (tmp_path / "cut.json").write_text(whole[: len(whole) // 2])
    (tmp_path / "anon.json").write_text(whole.replace('"sessionId"', '"sessionIdentifier"').replace(
        '"projectHash"', '"sessionId": 7, "projectHash"'))  # fmt: skip
    messages = sorted(r.message for r in import_paths(paths=[tmp_path]).results if r.status == "failed")
    assert len(messages) == 2
    assert messages[0].startswith("anon.json: field 'sessionId': not a Gemini CLI session")
    assert messages[1].startswith("cut.json: not valid JSON")
    assert not Run.objects.exists()


def test_only_those_who_may_browse_runs_see_a_session(tmp_path, annotator, adjudicator):
    shutil.copy(SESSION, tmp_path / SESSION.name)
    import_paths(paths=[tmp_path / SESSION.name])
    page = f"/trajectories/runs/{Run.objects.get().pk}/"
    assert client_for(annotator).get(page).status_code == 404
    assert client_for(adjudicator).get(page).status_code == 200
