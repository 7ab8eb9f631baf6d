"""Swimlane geometry for the run timeline (pure: plain values in, plain values out).

Every lane is one agent context; x positions are percentages of the run's span (the same
normalisation as the process metrics), so the concurrent run and its sequential twin can
be read on the same 0–1 axis.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

LANE_HEIGHT = 14
LANE_GAP = 4
COMPACT_LANE_HEIGHT = 5  # used when a run has many sub-agents
COMPACT_THRESHOLD = 60


@dataclass(frozen=True, slots=True)
class LaneInput:
    id: int
    label: str
    role: str
    depth: int
    status: str
    started_at: datetime | None
    ended_at: datetime | None


@dataclass(frozen=True, slots=True)
class Lane:
    id: int
    label: str
    role: str
    status: str
    y: int
    height: int
    x: float  # percent
    width: float  # percent
    duration_s: float | None
    start_pos: float | None  # 0..1
    end_pos: float | None
    depth: int

    @property
    def end_x(self) -> float:
        return round(self.x + self.width, 3)

    @property
    def tooltip(self) -> str:
        duration = "unknown duration" if self.duration_s is None else f"{self.duration_s:.1f} s"
        span = "" if self.start_pos is None else f", {self.start_pos:.2f}→{self.end_pos:.2f} of the run"
        status = f", {self.status}" if self.status else ""
        return f"{self.label or self.role} — {duration}{span}{status}"


@dataclass(frozen=True, slots=True)
class Timeline:
    lanes: list[Lane]
    height: int
    span_s: float | None
    compact: bool


def build_timeline(contexts: list[LaneInput]) -> Timeline:
    times = [t for c in contexts for t in (c.started_at, c.ended_at) if t is not None]
    compact = len(contexts) > COMPACT_THRESHOLD
    height = COMPACT_LANE_HEIGHT if compact else LANE_HEIGHT
    gap = 1 if compact else LANE_GAP
    if not times:
        origin = finish = None
        span = None
    else:
        origin, finish = min(times), max(times)
        span = (finish - origin).total_seconds()
    lanes = []
    for index, ctx in enumerate(contexts):
        start = ctx.started_at or ctx.ended_at
        end = ctx.ended_at or ctx.started_at
        if start is None or origin is None:
            x = width = 0.0
            start_pos = end_pos = duration = None
        else:
            start_pos = 0.0 if not span else (start - origin).total_seconds() / span
            end_pos = 0.0 if not span else (end - origin).total_seconds() / span
            x = 100 * start_pos
            width = max(100 * (end_pos - start_pos), 0.3)  # a zero-length context stays visible
            duration = (end - start).total_seconds()
        lanes.append(
            Lane(
                id=ctx.id,
                label=ctx.label,
                role=ctx.role,
                status=ctx.status,
                y=index * (height + gap),
                height=height,
                x=round(x, 3),
                width=round(width, 3),
                duration_s=duration,
                start_pos=start_pos,
                end_pos=end_pos,
                depth=ctx.depth,
            )
        )
    total = len(contexts) * (height + gap)
    return Timeline(lanes=lanes, height=max(total, height), span_s=span, compact=compact)
