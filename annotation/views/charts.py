"""Geometry for the small server-rendered SVG charts (pure): every chart has both axes drawn, with
ticks, tick labels and a title that names the quantity and its unit."""

from __future__ import annotations

import math
from collections.abc import Sequence

TICK = 4  # tick mark length, px
FONT = 11  # tick labels, px (titles: FONT + 1)


def nice_ticks(low: float, high: float, *, count: int = 5, integer: bool = False) -> list[float]:
    """Round tick values (step 1, 2 or 5 × 10ⁿ; at least 1 for counts) from ≤ low to ≥ high, about
    `count` intervals."""
    if high <= low:
        high = low + 1
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = min((m * magnitude for m in (1, 2, 5, 10)), key=lambda s: abs(s - raw))
    if integer:
        step = max(step, 1)
    first = math.floor(low / step + 1e-9) * step
    ticks = []
    value = first
    while value < high + step - 1e-9:
        ticks.append(round(value, 10))
        if value >= high - 1e-9:
            break
        value += step
    return ticks


def _label(value: float) -> str:
    return f"{value:g}" if value != 0 else "0"


def bars(
    items: Sequence[tuple[str, float]],
    *,
    width: int = 320,
    bar: int = 16,
    gap: int = 4,
    label_width: int = 250,
    x_label: str = "",
) -> dict:
    """Horizontal bars, one per item, on a value axis from 0 with ticks; the value at each bar's end."""
    top = max((v for _, v in items), default=0) or 1
    ticks = nice_ticks(0, top, integer=True)
    high = ticks[-1]
    left = label_width + 6
    rows = [
        {
            "label": label,
            "value": value,
            "y": i * (bar + gap),
            "text_y": i * (bar + gap) + bar - 4,
            "w": round(width * value / high, 1),
            "end": round(left + width * value / high + 4, 1),
        }
        for i, (label, value) in enumerate(items)
    ]
    axis_y = max(len(rows) * (bar + gap), bar)
    return {
        "rows": rows,
        "bar": bar,
        "left": left,
        "label_x": label_width,
        "axis_y": axis_y,
        "axis_end": left + width,
        "ticks": [
            {"x": round(left + width * t / high, 1), "label": _label(t), "y1": axis_y + TICK, "y": axis_y + TICK + FONT}
            for t in ticks
        ],
        "x_label": x_label,
        "x_label_pos": {"x": left + width / 2, "y": axis_y + TICK + 2 * FONT + 6},
        "width": left + width + 40,  # room for the last value label
        "height": axis_y + TICK + 2 * FONT + 10,
    }


def line(
    points: Sequence[tuple[float, float | None]],
    *,
    width: int = 560,
    height: int = 230,
    y_min: float = -0.2,
    y_max: float = 1.0,
    x_label: str = "",
    y_label: str = "",
) -> dict:
    """A polyline on linear axes: x from 0 to past the largest x, y from y_min (lower if a value is
    lower: nothing is clamped) to y_max. Points with y None are left out."""
    known = [(x, y) for x, y in points if y is not None]
    left, right, top, bottom = 56, 14, 10, 48
    plot_w, plot_h = width - left - right, height - top - bottom
    if not known:
        return {"points": "", "dots": [], "width": width, "height": height, "x_ticks": [], "y_ticks": []}
    lowest = min(y for _, y in known)
    if lowest < y_min:
        y_min = math.floor(lowest * 5) / 5  # down to the next 0.2 below
    x_ticks = nice_ticks(0, max(x for x, _ in known), integer=True)
    x_high = x_ticks[-1]

    def px(x: float) -> float:
        return round(left + plot_w * x / x_high, 1)

    def py(y: float) -> float:
        return round(top + plot_h * (1 - (y - y_min) / (y_max - y_min)), 1)

    dots = [{"x": px(x), "y": py(y), "label": f"{x:g} runs: κ = {y:.3f}"} for x, y in known]
    y_values = [round(y_min + 0.2 * i, 10) for i in range(round((y_max - y_min) / 0.2) + 1)]
    x_axis_y = top + plot_h
    return {
        "points": " ".join(f"{d['x']},{d['y']}" for d in dots),
        "dots": dots,
        "width": width,
        "height": height,
        "plot": {"left": left, "right": left + plot_w, "top": top, "bottom": x_axis_y},
        "y_ticks": [
            {"y": py(v), "label": f"{v:.1f}", "x1": left - TICK, "text_x": left - TICK - 2, "text_y": py(v) + 4}
            for v in y_values
        ],
        "zero": py(0.0) if y_min < 0 < y_max else None,
        "x_ticks": [
            {"x": px(t), "label": _label(t), "y1": x_axis_y + TICK, "text_y": x_axis_y + TICK + FONT} for t in x_ticks
        ],
        "x_label": x_label,
        "x_label_pos": {"x": round(left + plot_w / 2, 1), "y": height - 6},
        "y_label": y_label,
        "y_label_pos": {"x": 14, "y": round(top + plot_h / 2, 1)},
    }


def calibration(bins: Sequence[dict], *, size: int = 300) -> dict:
    """A reliability diagram: each bin's mean predicted probability (x) against the fraction observed
    positive (y), both 0–1, beside the diagonal of perfect calibration; a dot's area grows with the
    bin's count. `bins` as classifier.calibration_bins gives them."""
    left, right, top, bottom = 56, 14, 10, 48
    width, height = size + left + right, size + top + bottom
    plot = {"left": left, "right": left + size, "top": top, "bottom": top + size}

    def px(x: float) -> float:
        return round(left + size * x, 1)

    def py(y: float) -> float:
        return round(top + size * (1 - y), 1)

    largest = max((b["count"] for b in bins), default=1) or 1
    dots = [
        {
            "x": px(b["predicted"]),
            "y": py(b["observed"]),
            "r": round(3 + 5 * math.sqrt(b["count"] / largest), 1),
            "label": f"predicted {b['predicted']:.2f}, observed {b['observed']:.2f} ({b['count']} run × mode cells, "
            f"p in {b['low']:.1f}–{b['high']:.1f})",
        }  # fmt: skip
        for b in bins
    ]
    ticks = [round(0.2 * i, 1) for i in range(6)]
    return {
        "width": width,
        "height": height,
        "plot": plot,
        "diagonal": {"x1": px(0), "y1": py(0), "x2": px(1), "y2": py(1)},
        "points": " ".join(f"{d['x']},{d['y']}" for d in dots),
        "dots": dots,
        "x_ticks": [
            {"x": px(t), "label": f"{t:.1f}", "y1": plot["bottom"] + TICK, "text_y": plot["bottom"] + TICK + FONT}
            for t in ticks
        ],  # fmt: skip
        "y_ticks": [
            {"y": py(t), "label": f"{t:.1f}", "x1": left - TICK, "text_x": left - TICK - 2, "text_y": py(t) + 4}
            for t in ticks
        ],  # fmt: skip
        "x_label": "predicted probability (mean of the bin)",
        "x_label_pos": {"x": round(left + size / 2, 1), "y": height - 6},
        "y_label": "observed fraction with the mode",
        "y_label_pos": {"x": 14, "y": round(top + size / 2, 1)},
    }
