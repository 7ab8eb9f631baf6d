from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from tests.factories import client_for, simple_run, write_jsonl
from trajectories.models import Run
from trajectories.services import import_paths
from trajectories.timeline import COMPACT_THRESHOLD, LaneInput, build_timeline

T0 = datetime(2026, 8, 1, tzinfo=UTC)


def lane(i: int, start: int | None, end: int | None, role: str = "sub") -> LaneInput:
    return LaneInput(
        id=i,
        label=f"c{i}",
        role=role,
        depth=0 if role == "main" else 1,
        status="",
        started_at=None if start is None else T0 + timedelta(seconds=start),
        ended_at=None if end is None else T0 + timedelta(seconds=end),
    )


def test_lanes_are_positioned_on_the_normalised_axis():
    tl = build_timeline([lane(1, 0, 100, "main"), lane(2, 25, 75)])
    main, sub = tl.lanes
    assert (main.x, main.width) == (0.0, 100.0)
    assert (sub.x, sub.width, sub.end_x) == (25.0, 50.0, 75.0)
    assert "50.0 s" in sub.tooltip and "(sub-agent)" in sub.tooltip


def test_untimed_context_gets_an_empty_bar():
    tl = build_timeline([lane(1, 0, 10, "main"), lane(2, None, None)])
    assert tl.lanes[1].duration_s is None and tl.lanes[1].width == 0.0


def test_many_lanes_switch_to_compact_rows():
    lanes = [lane(0, 0, 100, "main")] + [lane(i, i, i + 5) for i in range(1, COMPACT_THRESHOLD + 2)]
    tl = build_timeline(lanes)
    assert tl.compact and tl.lanes[1].height < 10
    assert (tl.n_main, tl.n_sub) == (1, COMPACT_THRESHOLD + 1)


def test_role_names_say_main_sub_and_depth():
    main, sub, nested = build_timeline(
        [lane(1, 0, 10, "main"), lane(2, 1, 2), LaneInput(3, "grandchild", "sub", 2, "", None, None)]
    ).lanes
    assert (main.role_name, sub.role_name, nested.role_name) == ("main agent", "sub-agent", "sub-agent, depth 2")


def test_the_legend_lists_the_marks_the_lanes_use():
    alone = build_timeline([lane(1, 0, 10, "main")])
    assert [mark for mark, _ in alone.legend] == ["main", "track"]
    failed = LaneInput(2, "w", "sub", 1, "failed", T0, T0 + timedelta(seconds=5))
    busy = build_timeline([lane(1, 0, 10, "main"), failed])
    assert [mark for mark, _ in busy.legend] == ["main", "sub", "failed", "spawn", "join", "track"]


# -- the partial ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_every_lane_is_labelled_with_its_agent_and_role_and_the_legend_is_shown(browser_client, tmp_path):
    lines = simple_run("t-lanes", n_sub=3)
    lines[1]["label"] = "the orchestrator"
    import_paths(paths=[write_jsonl(tmp_path / "c.jsonl", lines)])
    run = Run.objects.get()
    response = browser_client.get(reverse("trajectories:run_timeline", args=[run.pk]), HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200 and "<html" not in body
    labels = re.findall(
        r'<div class="lane-label[^"]*" title="([^"]*)"><span class="role (\w+)">\w+</span> ([^<]*)</div>', body
    )
    assert labels == [
        ("the orchestrator · main agent", "main", "the orchestrator"),
        ("sub-0 · sub-agent", "sub", "sub-0"),
        ("sub-1 · sub-agent", "sub", "sub-1"),
        ("sub-2 · sub-agent", "sub", "sub-2"),
    ]
    assert body.count('class="bar sub') == 3 and body.count('class="bar main') == 1
    legend = re.search(r'<ul class="timeline-legend".*?</ul>', body, re.S).group(0)
    for meaning in ("main agent, running", "sub-agent, running", "sub-agent started", "sub-agent ended"):
        assert meaning in legend
    assert "failed or killed" not in legend  # no lane failed
    assert "4 agents (1 main, 3 sub-agents)" in body and "1 = end (100 s)" in body


@pytest.mark.django_db
def test_a_run_without_timestamps_says_so(browser_client, tmp_path):
    lines = [simple_run("t-untimed", n_sub=0)[0], {"type": "context", "id": "main", "role": "main", "label": "solo"}]
    import_paths(paths=[write_jsonl(tmp_path / "u.jsonl", lines)])
    body = browser_client.get(reverse("trajectories:run_timeline", args=[Run.objects.get().pk])).content.decode()
    assert "no timestamps, so no bars" in body and "None" not in body and "</span> solo</div>" in body


@pytest.mark.django_db
def test_someone_elses_run_has_no_timeline(tmp_path, trio):
    """An annotator sees only the runs of their own assignments (tests/test_routes.py)."""
    import_paths(paths=[write_jsonl(tmp_path / "c.jsonl", simple_run("t-hidden", n_sub=1))])
    response = client_for(trio[0]).get(reverse("trajectories:run_timeline", args=[Run.objects.get().pk]))
    assert response.status_code == 404
