"""The inline SVG charts: well-formed, ticks that cover the data, gaps, empty charts, bars."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET

from replay.render.svg import BarSeries, Series, bar_chart, line_chart, nice_ticks

NS = {"s": "http://www.w3.org/2000/svg"}


def test_nice_ticks_cover_the_range():
    for lo, hi in [(0, 0.29), (1, 2.98), (0, 41.3), (-3, 7), (5, 5), (0, 0), (0, 1e-6), (12.5, 1234.0)]:
        ticks = nice_ticks(lo, hi)
        assert ticks[0] <= lo and ticks[-1] >= hi and 2 <= len(ticks) <= 12
        steps = {round(b - a, 9) for a, b in itertools.pairwise(ticks)}
        assert len(steps) == 1
    assert nice_ticks(0, 0)[0] == 0, "an all-zero series is not padded below zero"


def test_line_chart_points_gaps_and_tooltips():
    svg = line_chart(
        [Series("a <b>", [(0, 1.0), (1, None), (2, 3.0), (3, 4.0)]), Series("c", [(0, 2.0)])],
        title="t & u",
        name="demo",
        integer_x=True,
    )
    root = ET.fromstring(svg)
    assert root.get("data-chart") == "demo" and root.find("s:title", NS).text == "t & u"
    groups = root.findall("s:g", NS)
    assert [g.get("data-series") for g in groups] == ["a <b>", "c"]
    assert len(groups[0].findall("s:polyline", NS)) == 1  # (0) alone, then (2)-(3): the gap breaks the line
    assert len(groups[0].findall("s:circle", NS)) == 3 and len(groups[1].findall("s:circle", NS)) == 1
    tips = [c.find("s:title", NS).text for c in groups[0].findall("s:circle", NS)]
    assert tips[-1] == "a <b>: 3 \u2192 4"


def test_empty_and_bar_charts():
    empty = ET.fromstring(line_chart([Series("x", [])], title="nothing"))
    assert "no data" in "".join(empty.itertext())
    bars = ET.fromstring(
        bar_chart(
            ["planner", "executor"],
            [BarSeries("prompt", [3.0, 1.0]), BarSeries("completion", [1.0, 1.0])],
            title="tokens",
            stacked=True,
        )
    )
    rects = [r for r in bars.iter("{http://www.w3.org/2000/svg}rect") if r.find("s:title", NS) is not None]
    assert len(rects) == 4
    heights = [float(r.get("height")) for r in rects]
    assert heights[0] == max(heights) and abs(heights[1] - heights[2]) < 1e-6


def test_the_legend_sits_under_the_plot_and_covers_no_data():
    series = [Series(f"run {i}", [(x, float(x * (i + 1))) for x in range(6)]) for i in range(3)]
    for svg in (
        line_chart(series, title="t", integer_x=True),
        bar_chart(["a", "b"], [BarSeries(f"s{i}", [1.0, 2.0]) for i in range(3)], title="b"),
    ):
        root = ET.fromstring(svg)
        box = next(r for r in root.iter("{http://www.w3.org/2000/svg}rect") if r.get("class") == "legend-box")
        top = float(box.get("y"))
        axis_y = max(
            float(ln.get("y1"))
            for ln in root.iter("{http://www.w3.org/2000/svg}line")
            if ln.get("class") == "axis"
        )
        assert top > axis_y  # below the x axis, so below every point and bar
        assert float(box.get("y")) + float(box.get("height")) <= float(root.get("height"))
        for c in root.iter("{http://www.w3.org/2000/svg}circle"):
            assert float(c.get("cy")) < top
    single = ET.fromstring(line_chart([Series("only", [(0, 1.0), (1, 2.0)])], title="one"))
    assert single.get("height") == "260" and not [r for r in single.iter() if r.get("class") == "legend-box"]
