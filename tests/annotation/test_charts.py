"""The dashboard's SVG charts: both axes with ticks, tick labels and titles naming the quantity and unit."""

from __future__ import annotations

import re

import pytest

from annotation.views.charts import bars, line, nice_ticks
from tests.factories import client_for


@pytest.mark.parametrize(
    ("high", "integer", "ticks"),
    [
        (1.0, False, [0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (24, True, [0, 5, 10, 15, 20, 25]),
        (1063, True, [0, 200, 400, 600, 800, 1000, 1200]),
        (3, True, [0, 1, 2, 3]),
        (1, True, [0, 1]),  # counts never get fractional ticks
    ],
)
def test_ticks_are_round_and_cover_the_range(high, integer, ticks):
    assert nice_ticks(0, high, integer=integer) == pytest.approx(ticks)


def test_the_line_chart_has_both_axes_labelled():
    chart = line([(5, 0.5), (10, None), (20, 0.8)], x_label="runs (count)", y_label="κ")
    assert [t["label"] for t in chart["x_ticks"]] == ["0", "5", "10", "15", "20"]
    assert [t["label"] for t in chart["y_ticks"]] == ["-0.2", "0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]
    assert (chart["x_label"], chart["y_label"]) == ("runs (count)", "κ")
    plot = chart["plot"]
    # x is linear in runs: 20 runs is the right end of the axis, 5 runs a quarter of the way
    first, last = chart["dots"]
    assert last["x"] == plot["right"] and first["x"] == pytest.approx(plot["left"] + (plot["right"] - plot["left"]) / 4)
    assert len(chart["dots"]) == 2  # the undefined κ is left out, not drawn as 0


def test_a_kappa_below_the_axis_extends_it_instead_of_being_clamped():
    chart = line([(1, -0.45), (2, 0.3)])
    assert chart["y_ticks"][0]["label"] == "-0.6"
    low = chart["dots"][0]["y"]
    assert chart["plot"]["top"] < low < chart["plot"]["bottom"]


def test_no_point_no_chart():
    assert line([(3, None)])["dots"] == []


def test_the_bar_chart_has_a_value_axis_and_each_value():
    chart = bars([("Stale Handoff", 3), ("Lossy Handoff", 1)], x_label="instances (count)")
    assert [t["label"] for t in chart["ticks"]] == ["0", "1", "2", "3"]
    stale, lossy = chart["rows"]
    assert stale["w"] == pytest.approx(3 * lossy["w"], abs=0.2) and chart["ticks"][-1]["x"] == chart["axis_end"]
    assert stale["end"] > chart["left"] + stale["w"]  # the value sits after its bar


def svg(body: str, label: str) -> str:
    return re.search(rf'<svg[^>]*aria-labelledby="{label}".*?</svg>', body, re.S).group(0)


@pytest.mark.django_db
def test_the_dashboard_draws_both_axes_with_titles(coded_study, adjudicator):
    body = client_for(adjudicator).get(f"/annotate/studies/{coded_study.pk}/").content.decode()
    kappa = svg(body, "kappa-title")
    assert "runs compared (coded by two annotators" in kappa and "mean pooled κ (modes)" in kappa
    assert kappa.count('class="axis-line"') == 2 and 'transform="rotate(-90' in kappa
    x_labels = re.findall(r'text-anchor="middle">(\d+)</text>', kappa)
    assert x_labels[0] == "0" and len(x_labels) >= 3
    modes = svg(body, "modes-title")
    assert "instances in the final labels (count)" in modes and modes.count('class="axis-line"') == 2
    assert re.findall(r'class="bar-value">(\d+)</text>', modes)
