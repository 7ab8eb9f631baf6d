from __future__ import annotations

from datetime import UTC, datetime, timedelta

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
    assert sub.y > main.y
    assert "50.0 s" in sub.tooltip


def test_untimed_context_gets_an_empty_bar():
    tl = build_timeline([lane(1, 0, 10, "main"), lane(2, None, None)])
    assert tl.lanes[1].duration_s is None and tl.lanes[1].width == 0.0


def test_many_lanes_switch_to_compact_rows():
    lanes = [lane(0, 0, 100, "main")] + [lane(i, i, i + 5) for i in range(1, COMPACT_THRESHOLD + 2)]
    tl = build_timeline(lanes)
    assert tl.compact and tl.lanes[1].height < 10
