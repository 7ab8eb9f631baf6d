"""OpenTelemetry GenAI traces (OTLP JSON): found by auto-detection, spans read as agents, lanes and events,
the same process metrics as the native formats for the same shape, bad input refused with its place
(docs/format.md#opentelemetry-genai-traces-otlp-json)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.factories import (
    OTLP_ORIGIN_NS,
    PARALLAX_TEAM_RUN,
    REAL,
    client_for,
    otlp_request,
    otlp_span,
    otlp_team_trace,
    write_jsonl,
)
from trajectories.metrics import METRIC_FIELDS
from trajectories.models import Run
from trajectories.services import import_paths

pytestmark = pytest.mark.django_db

OPENLLMETRY = REAL / "otel-genai" / "openllmetry-chat.json"


def _raw_spans(path: Path) -> list[dict]:
    """The spans of an OTLP/JSON file, read here with the json module, not through Parallax."""
    document = json.loads(path.read_text())
    return [span for rs in document["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]


def _attr(span: dict, key: str):
    for item in span.get("attributes", []):
        if item["key"] == key:
            value = item["value"]
            return int(value["intValue"]) if "intValue" in value else next(iter(value.values()))
    return None


def _seconds(ns: str) -> float:
    return int(ns) / 1e9


def test_a_real_openllmetry_export_is_found_and_read_from_its_spans(tmp_path):
    folder = tmp_path / "exports"
    folder.mkdir()
    shutil.copy(OPENLLMETRY, folder / OPENLLMETRY.name)
    report = import_paths(paths=[folder])
    assert report.count("imported") == 1, report.results
    run = Run.objects.get()
    spans = _raw_spans(OPENLLMETRY)
    root = next(s for s in spans if not s.get("parentSpanId"))
    calls = [s for s in spans if _attr(s, "gen_ai.operation.name") == "chat"]
    service = _attr(next(iter(json.loads(OPENLLMETRY.read_text())["resourceSpans"]))["resource"], "service.name")
    assert run.source_format == "otel_genai" and run.agent.name == service
    assert run.task.external_id == root["traceId"]
    (main,) = run.contexts.all()
    assert (main.role, main.label) == ("main", root["name"])
    assert main.started_at.timestamp() == pytest.approx(_seconds(root["startTimeUnixNano"]), abs=1e-6)
    assert main.ended_at.timestamp() == pytest.approx(_seconds(root["endTimeUnixNano"]), abs=1e-6)
    events = list(run.events.order_by("seq"))
    assert [e.kind for e in events] == ["message"] * len(calls)
    assert [e.tool for e in events] == [_attr(c, "gen_ai.response.model") for c in calls]
    called = json.loads(_attr(calls[0], "gen_ai.output.messages"))[0]["parts"][0]["name"]
    assert called in events[0].text
    tokens = sum(_attr(c, "gen_ai.usage.input_tokens") + _attr(c, "gen_ai.usage.output_tokens") for c in calls)
    assert run.tokens == tokens
    assert (run.subagents_created, run.peak_concurrency) == (0, 0)


def test_agents_inside_agents_become_lanes_with_the_metrics_of_the_same_shape_natively(tmp_path):
    spans = otlp_team_trace()
    write_jsonl(tmp_path / "otel" / "team.json", [otlp_request(spans)])
    write_jsonl(tmp_path / "native" / "team.jsonl", PARALLAX_TEAM_RUN)
    assert import_paths(paths=[tmp_path / "otel", tmp_path / "native"]).count("imported") == 2
    otel, native = Run.objects.get(source_format="otel_genai"), Run.objects.get(source_format="parallax")
    assert otel.mode == "concurrent"  # inferred from its sub-agents, as for any log that does not say
    by_span = {s["spanId"]: s for s in spans}
    agents = {s["spanId"] for s in spans if _attr(s, "gen_ai.operation.name") == "invoke_agent"}

    def agent_of(span_id):
        span = by_span[span_id].get("parentSpanId")
        while span and span not in agents:
            span = by_span[span].get("parentSpanId")
        return span

    contexts = {c.label: c for c in otel.contexts.select_related("parent")}
    assert contexts["lead"].role == "main"
    for span_id in agents - {"a0"}:
        span = by_span[span_id]
        lane = contexts[_attr(span, "gen_ai.agent.name")]
        assert lane.role == "sub"
        assert lane.parent.label == _attr(by_span[agent_of(span_id)], "gen_ai.agent.name")
        assert lane.started_at.timestamp() == pytest.approx(_seconds(span["startTimeUnixNano"]), abs=1e-6)
        assert lane.ended_at.timestamp() == pytest.approx(_seconds(span["endTimeUnixNano"]), abs=1e-6)
    # every metric as the native format gives it for the same intervals
    assert {f: getattr(otel, f) for f in METRIC_FIELDS} == {f: getattr(native, f) for f in METRIC_FIELDS}
    assert otel.subagents_created == len(agents) - 1 and otel.peak_concurrency == 3
    # tool calls, results, spawns and joins in the lanes they ran in
    events = {(e.context.label, e.kind, e.tool) for e in otel.events.select_related("context")}
    assert {("lead", "spawn", "invoke_agent"), ("worker-a", "spawn", "invoke_agent"),
            ("worker-a", "tool_call", "bash"), ("worker-a", "tool_result", "bash"),
            ("worker-b", "tool_call", "write_file"), ("checker", "message", "m")} <= events  # fmt: skip
    assert otel.events.get(tool="write_file").files == ["src/app.py"]
    checker = json.loads(_attr(by_span["a3"], "gen_ai.output.messages"))[0]["parts"][0]["content"]
    assert otel.events.get(kind="join", target=contexts["checker"].external_id).text == checker
    # every span is one event (two for a tool with its result, a spawn and a join per sub-agent), but the main
    # agent's own span, which is its lane
    results = sum(1 for s in spans if _attr(s, "gen_ai.tool.call.result"))
    assert otel.events.count() == len(spans) - 1 + results + (len(agents) - 1)
    usage = [s for s in spans if _attr(s, "gen_ai.operation.name") == "chat"]
    assert otel.tokens == sum(_attr(s, "gen_ai.usage.input_tokens") + _attr(s, "gen_ai.usage.output_tokens")
                              for s in usage)  # fmt: skip
    assert otel.shell_calls == 1


def test_a_collector_file_export_one_request_per_line_reads_the_same(tmp_path):
    spans = otlp_team_trace()
    write_jsonl(tmp_path / "lines" / "traces.jsonl", [otlp_request(spans[:4]), otlp_request(spans[4:])])
    whole = tmp_path / "whole" / "trace.json"
    whole.parent.mkdir()
    whole.write_text(json.dumps(otlp_request(spans, service="same-trace"), indent=2))  # another run
    assert import_paths(paths=[tmp_path / "lines", tmp_path / "whole"]).count("imported") == 2
    one, other = Run.objects.order_by("pk")
    assert one.source_format == other.source_format == "otel_genai"
    shape = [sorted((c.label, c.role, c.started_at, c.ended_at) for c in run.contexts.all()) for run in (one, other)]
    assert shape[0] == shape[1]
    assert [(e.kind, e.tool, e.text) for e in one.events.order_by("seq")] == [
        (e.kind, e.tool, e.text) for e in other.events.order_by("seq")
    ]


def test_agents_started_side_by_side_by_a_workflow_are_its_sub_agents(tmp_path):
    spans = [
        otlp_span("w", None, 0, 30, name="nightly.workflow"),
        otlp_span("x", "w", 1, 20, "invoke_agent", "invoke_agent x", {"agent.name": "x"}),
        otlp_span("y", "w", 2, 25, "invoke_agent", "invoke_agent y", {"agent.name": "y"}),
        otlp_span("late", "gone", 26, 27, name="flush"),  # its parent was not exported
    ]
    write_jsonl(tmp_path / "wf.json", [otlp_request(spans)])
    assert import_paths(paths=[tmp_path / "wf.json"]).count("imported") == 1
    run = Run.objects.get()
    lanes = {c.label: (c.role, c.parent.label if c.parent else None) for c in run.contexts.select_related("parent")}
    assert lanes == {"nightly.workflow": ("main", None), "x": ("sub", "nightly.workflow"),
                     "y": ("sub", "nightly.workflow")}  # fmt: skip
    assert run.peak_concurrency == 2
    assert any("span late's parent gone is not in the file; read as a root" in w for w in run.warnings)
    assert run.events.get(kind="other").text == "flush"


def _bad(tmp_path, name: str, content: str | list) -> list[str]:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content)
    else:
        write_jsonl(path, content)
    report = import_paths(paths=[path])
    return [r.message for r in report.results if r.status == "failed"]


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("startTimeUnixNano", "yesterday", "spans[1].startTimeUnixNano"),
        ("endTimeUnixNano", str(OTLP_ORIGIN_NS - 1), "spans[1].endTimeUnixNano': ends before it starts"),
        ("spanId", "", "spans[1].spanId': a span needs its spanId"),
        ("attributes", {"gen_ai.operation.name": "chat"}, "spans[1].attributes': expected a list"),
    ],
)
def test_a_malformed_span_is_refused_naming_file_and_field_and_nothing_is_stored(tmp_path, field, value, says):
    spans = otlp_team_trace()[:3]
    spans[1][field] = value
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "trace.json").write_text(json.dumps(otlp_request(spans), indent=2))
    messages = [r.message for r in import_paths(paths=[bad]).results if r.status == "failed"]
    assert len(messages) == 1 and "trace.json" in messages[0]
    assert f"resourceSpans[0].scopeSpans[0].{says}" in messages[0]
    assert not Run.objects.exists()


def test_bad_lines_duplicate_ids_cycles_and_mixed_traces_are_refused(tmp_path):
    good = otlp_request(otlp_team_trace()[:2])
    line = _bad(tmp_path, "lines.jsonl", [good, b'{"resourceSpans": [oops'])
    assert len(line) == 1 and "lines.jsonl:2" in line[0] and "not valid JSON" in line[0]
    twice = otlp_team_trace()[:2]
    twice[1]["spanId"] = "a0"
    dup = _bad(tmp_path, "dup.json", [otlp_request(twice)])
    assert "dup.json:1" in dup[0] and "span id 'a0' appears twice" in dup[0]
    loop = [otlp_span("p", "q", 0, 1), otlp_span("q", "p", 0, 1)]
    assert "form a cycle" in _bad(tmp_path, "loop.json", [otlp_request(loop)])[0]
    mixed = otlp_team_trace()[:2]
    mixed[1]["traceId"] = "0" * 32
    assert "field 'traceId': holds spans of 2 traces" in _bad(tmp_path, "mixed.json", [otlp_request(mixed)])[0]
    assert not Run.objects.exists()


def test_only_those_who_may_browse_runs_see_an_imported_trace(tmp_path, annotator, adjudicator):
    write_jsonl(tmp_path / "team.json", [otlp_request(otlp_team_trace())])
    import_paths(paths=[tmp_path / "team.json"])
    run = Run.objects.get()
    page = f"/trajectories/runs/{run.pk}/"
    assert client_for(annotator).get(page).status_code == 404
    assert client_for(adjudicator).get(page).status_code == 200
    assert client_for(annotator).get(f"{page}timeline/").status_code == 404
    lanes = client_for(adjudicator).get(f"{page}timeline/")
    assert lanes.status_code == 200
    assert all(label in lanes.content.decode() for label in ("worker-a", "worker-b", "checker"))
