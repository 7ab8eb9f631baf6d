"""Geometry for the small server-rendered SVG charts (pure)."""

from __future__ import annotations

from collections.abc import Sequence


def bars(items: Sequence[tuple[str, float]], *, width: int = 320, bar: int = 16, gap: int = 4) -> dict:
    """Horizontal bars scaled to the largest value."""
    top = max((v for _, v in items), default=0) or 1
    rows = [
        {"label": label, "value": value, "y": i * (bar + gap), "w": round(width * value / top, 1)}
        for i, (label, value) in enumerate(items)
    ]
    return {"rows": rows, "height": max(len(rows) * (bar + gap), bar), "width": width, "bar": bar}


def line(
    points: Sequence[tuple[float, float | None]],
    *,
    width: int = 480,
    height: int = 160,
    y_min: float = -0.2,
    y_max: float = 1.0,
) -> dict:
    """A polyline for κ over time; y in [y_min, y_max], x spread evenly over the points."""
    known = [(x, y) for x, y in points if y is not None]
    if not known:
        return {"points": "", "dots": [], "width": width, "height": height, "grid": []}
    n = len(known)

    def px(i: int) -> float:
        return round(20 + (width - 30) * (i / (n - 1) if n > 1 else 0.5), 1)

    def py(y: float) -> float:
        y = min(max(y, y_min), y_max)
        return round(10 + (height - 30) * (1 - (y - y_min) / (y_max - y_min)), 1)

    dots = [{"x": px(i), "y": py(y), "label": f"{x:g} runs: κ = {y:.3f}"} for i, (x, y) in enumerate(known)]
    grid = [{"y": py(v), "label": f"{v:g}"} for v in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0) if y_min <= v <= y_max]
    return {
        "points": " ".join(f"{d['x']},{d['y']}" for d in dots),
        "dots": dots,
        "width": width,
        "height": height,
        "grid": grid,
    }
