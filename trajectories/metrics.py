"""Process metrics of one run from its agents' time intervals (docs/metrics.md).

Pure functions on plain numbers: no ORM, no datetimes. Times are seconds on any common
origin. Intervals are half-open [start, end): a sub-agent that starts exactly when another
ends does not overlap it. Positions are normalised to [0, 1] over the run's span, from the
earliest start to the latest end over the main agent and every sub-agent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

Interval = tuple[float, float]

METRIC_FIELDS = (
    "subagents_created",
    "peak_concurrency",
    "first_spawn_pos",
    "first_overlap_pos",
    "overlap_ratio",
    "last_subagent_end_pos",
    "created_without_overlap",
)


@dataclass(frozen=True, slots=True)
class ProcessMetrics:
    subagents_created: int
    peak_concurrency: int
    first_spawn_pos: float | None
    first_overlap_pos: float | None
    overlap_ratio: float
    last_subagent_end_pos: float | None
    created_without_overlap: bool

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def run_span(main: Sequence[Interval], subagents: Sequence[Interval]) -> Interval | None:
    """Earliest start and latest end over every agent, or None if nothing is timed."""
    points = [p for interval in (*main, *subagents) for p in interval]
    if not points:
        return None
    return min(points), max(points)


def process_metrics(
    subagents: Sequence[Interval | None],
    *,
    main: Sequence[Interval] = (),
    subagents_created: int | None = None,
) -> ProcessMetrics:
    """Compute the RQ2 metrics.

    `subagents` holds one interval per sub-agent context (None for a sub-agent with no
    timing at all: it still counts as created). `main` holds the main agent's interval(s).
    """
    created = len(subagents) if subagents_created is None else subagents_created
    timed = [(float(s), float(e)) for s, e in (i for i in subagents if i is not None)]
    for start, end in timed:
        if end < start:
            raise ValueError(f"interval ends before it starts: [{start}, {end})")
    span = run_span(main, timed)
    if span is None or not timed:
        return ProcessMetrics(created, 0, None, None, 0.0, None, created > 0)
    origin, finish = span
    length = finish - origin

    def pos(t: float) -> float:
        return 0.0 if length <= 0 else (t - origin) / length

    peak, first_overlap, overlap_time = _sweep(timed)
    return ProcessMetrics(
        subagents_created=created,
        peak_concurrency=peak,
        first_spawn_pos=pos(min(s for s, _ in timed)),
        first_overlap_pos=None if first_overlap is None else pos(first_overlap),
        overlap_ratio=0.0 if length <= 0 else overlap_time / length,
        last_subagent_end_pos=pos(max(e for _, e in timed)),
        created_without_overlap=created > 0 and peak < 2,
    )


def _sweep(intervals: Sequence[Interval]) -> tuple[int, float | None, float]:
    """Peak number active at once, first instant with ≥2 active, total time with ≥2 active.

    Ends sort before starts at the same instant, which is what makes intervals half-open;
    empty intervals [t, t) are never active.
    """
    points: list[tuple[float, int]] = []
    for start, end in intervals:
        if end > start:
            points.append((start, 1))
            points.append((end, -1))
    points.sort(key=lambda p: (p[0], p[1]))
    active = peak = 0
    first_overlap: float | None = None
    overlap = 0.0
    previous: float | None = None
    for time, delta in points:
        if previous is not None and active >= 2:
            overlap += time - previous
        active += delta
        previous = time
        if active > peak:
            peak = active
        if active >= 2 and first_overlap is None:
            first_overlap = time
    return peak, first_overlap, overlap
