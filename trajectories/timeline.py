"""Swimlane geometry for the run timeline (pure: plain values in, plain values out).

Every lane is one agent context, drawn as its own row: the agent's name and role on the left, its
bar on the right. x positions are percentages of the run's span (the same normalisation as the
process metrics), so the concurrent run and its sequential twin can be read on the same 0–1 axis.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

LANE_HEIGHT = 14
COMPACT_LANE_HEIGHT = 9  # used when a run has many sub-agents: still a row its label can sit beside
COMPACT_THRESHOLD = 60
AXIS_TICKS = (0.0, 0.25, 0.5, 0.75, 1.0)
ROLE_NAMES = {"main": "main agent", "sub": "sub-agent"}


@dataclass(frozen=True, slots=True)
class LaneInput:
    id: int
    label: str
    role: str
    depth: int
    status: str
    started_at: datetime | None
    ended_at: datetime | None
    full_label: str = ""  # when `label` is a short name (a workflow slot and attempt): the agent's whole label


@dataclass(frozen=True, slots=True)
class Lane:
    id: int
    label: str
    role: str
    status: str
    height: int
    x: float  # percent
    width: float  # percent
    duration_s: float | None
    start_pos: float | None  # 0..1
    end_pos: float | None
    depth: int
    full_label: str = ""

    @property
    def title(self) -> str:
        return self.full_label or self.label

    @property
    def end_x(self) -> float:
        return round(self.x + self.width, 3)

    @property
    def role_name(self) -> str:
        """What the lane's label says the agent is: main agent, sub-agent (nested: its depth)."""
        name = ROLE_NAMES.get(self.role, self.role)
        return f"{name}, depth {self.depth}" if self.role == "sub" and self.depth > 1 else name

    @property
    def failed(self) -> bool:
        return self.status in ("failed", "killed")

    @property
    def tooltip(self) -> str:
        duration = "unknown duration" if self.duration_s is None else f"{self.duration_s:.1f} s"
        span = "" if self.start_pos is None else f", {self.start_pos:.2f}→{self.end_pos:.2f} of the run"
        status = f", {self.status}" if self.status else ""
        return f"{self.title or self.role} ({self.role_name}) — {duration}{span}{status}"


@dataclass(frozen=True, slots=True)
class Timeline:
    lanes: list[Lane]
    span_s: float | None
    compact: bool

    @property
    def n_sub(self) -> int:
        return sum(1 for lane in self.lanes if lane.role == "sub")

    @property
    def n_main(self) -> int:
        return len(self.lanes) - self.n_sub

    @property
    def ticks(self) -> list[str]:
        """The x axis: shares of the run's span (the axis title says how many seconds 1 is)."""
        return [f"{t:g}" for t in AXIS_TICKS]

    @property
    def legend(self) -> list[tuple[str, str]]:
        """(css class, meaning) of each mark the lanes use, in the order they appear."""
        marks = [("main", "main agent, running")]
        if self.n_sub:
            marks.append(("sub", "sub-agent, running"))
        if any(lane.failed for lane in self.lanes):
            marks.append(("failed", "failed or killed"))
        if self.n_sub:
            marks += [("spawn", "sub-agent started"), ("join", "sub-agent ended")]
        return [*marks, ("track", "not running")]


def build_timeline(contexts: list[LaneInput]) -> Timeline:
    times = [t for c in contexts for t in (c.started_at, c.ended_at) if t is not None]
    compact = len(contexts) > COMPACT_THRESHOLD
    height = COMPACT_LANE_HEIGHT if compact else LANE_HEIGHT
    if not times:
        origin = None
        span = None
    else:
        origin, finish = min(times), max(times)
        span = (finish - origin).total_seconds()
    lanes = []
    for ctx in contexts:
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
                height=height,
                x=round(x, 3),
                width=round(width, 3),
                duration_s=duration,
                start_pos=start_pos,
                end_pos=end_pos,
                depth=ctx.depth,
                full_label=ctx.full_label,
            )
        )
    return Timeline(lanes=lanes, span_s=span, compact=compact)
