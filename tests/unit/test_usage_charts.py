"""The server-drawn SVG charts: bars scaled to the data, the forecast as a dashed step line
over the periods it covers, and every label escaped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from entryway.dashboard.charts import EMPTY_NOTE, Bar, bar_list, column_chart, nice_ceiling

SVG = "{http://www.w3.org/2000/svg}"


def parsed(markup: str) -> ET.Element:
    return ET.fromstring(markup)  # noqa: S314 - markup this test made


def rects(svg: ET.Element, cls: str) -> list[ET.Element]:
    return [r for r in svg.iter(f"{SVG}rect") if r.get("class") == cls]


def test_columns_are_as_tall_as_their_values_relative_to_each_other() -> None:
    svg = parsed(column_chart([Bar("a", 10), Bar("b", 5), Bar("c", 0)], title="t"))
    bars = rects(svg, "bar")
    assert len(bars) == 2  # an empty period draws no column
    heights = [float(r.get("height", "0")) for r in bars]
    assert heights[0] == pytest.approx(2 * heights[1], rel=0.01)
    assert svg.get("role") == "img" and svg.get("aria-label") == "t"


def test_the_forecast_is_a_dashed_step_line_over_the_periods_it_covers() -> None:
    bars = [Bar("d1", 4), Bar("d2", 6), Bar("d3", 0), Bar("d4", 0)]
    svg = parsed(column_chart(bars, title="t", forecast=[None, 8, 5, 5]))
    lines = [p for p in svg.iter(f"{SVG}polyline") if p.get("class") == "forecast"]
    assert len(lines) == 1
    points = [tuple(map(float, p.split(","))) for p in lines[0].get("points", "").split()]
    assert len(points) == 6  # two per period d2..d4
    xs = [x for x, _ in points]
    assert xs == sorted(xs)
    first_bar_x = float(rects(svg, "bar")[0].get("x", "0"))
    assert points[0][0] > first_bar_x  # starts at d2, not d1
    assert points[0][1] < points[2][1]  # 8 stands higher than 5 (SVG y grows downward)
    assert points[2][1] == points[4][1]
    title = lines[0].find(f"{SVG}title")
    assert title is not None and "d2: 8" in (title.text or "")


def test_a_forecast_above_every_bar_still_fits_the_chart() -> None:
    svg = parsed(column_chart([Bar("a", 1)], title="t", forecast=[1000], height=240))
    line = next(svg.iter(f"{SVG}polyline"))
    ys = [float(p.split(",")[1]) for p in line.get("points", "").split()]
    assert all(0 <= y <= 240 for y in ys)


def test_a_forecast_must_match_the_bars() -> None:
    with pytest.raises(ValueError, match="one value"):
        column_chart([Bar("a", 1), Bar("b", 2)], title="t", forecast=[1])


def test_labels_and_titles_are_escaped() -> None:
    hostile = '<script>alert("x")</script>&'
    for markup in (
        column_chart([Bar(hostile, 3)], title=hostile),
        bar_list([Bar(hostile, 3)], title=hostile),
    ):
        assert "<script>" not in markup
        svg = parsed(markup)  # still well-formed XML
        assert any(t.text == hostile for t in svg.iter(f"{SVG}text"))


def test_horizontal_bars_scale_to_the_largest_and_show_each_figure() -> None:
    svg = parsed(bar_list([Bar("notarize", 1200), Bar("read", 300)], title="t", width=400))
    widths = [float(r.get("width", "0")) for r in rects(svg, "bar")]
    assert widths[0] == pytest.approx(398, abs=1)
    assert widths[1] == pytest.approx(398 / 4, abs=1)
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    assert "1,200" in texts and "300" in texts and "notarize" in texts


def test_empty_charts_render() -> None:
    assert parsed(column_chart([], title="t")).tag == f"{SVG}svg"
    assert parsed(bar_list([], title="t")).tag == f"{SVG}svg"


def test_x_labels_thin_out_on_long_trends() -> None:
    bars = [Bar(f"2026-01-{d:02d}", d) for d in range(1, 31)]
    labels = [t.text for t in parsed(column_chart(bars, title="t")).iter(f"{SVG}text")]
    days = [t for t in labels if t and re.fullmatch(r"2026-01-\d\d", t)]
    assert 4 <= len(days) <= 8


@given(st.integers(min_value=0, max_value=10**15))
def test_the_axis_top_is_a_round_number_at_or_above_the_value(value: int) -> None:
    top = nice_ceiling(value)
    assert top >= max(value, 1)
    assert top < max(value, 1) * 5 + 1
    assert str(top).rstrip("0") in ("1", "2", "5")


def test_axis_figures_stay_short_and_exact_for_round_ticks() -> None:
    svg = parsed(column_chart([Bar("a", 4_000_000)], title="t"))
    ticks = [t.text for t in svg.iter(f"{SVG}text") if t.get("text-anchor") == "end"]
    assert ticks == ["0", "2.5M", "5M"]
    small = parsed(column_chart([Bar("a", 700)], title="t"))
    assert [t.text for t in small.iter(f"{SVG}text") if t.get("text-anchor") == "end"] == [
        "0",
        "500",
        "1,000",
    ]


def test_a_trend_with_nothing_in_it_says_so_instead_of_a_bare_axis() -> None:
    svg = parsed(column_chart([Bar("a", 0), Bar("b", 0)], title="t", forecast=[None, 0]))
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    assert texts == [EMPTY_NOTE]
    assert not list(svg.iter(f"{SVG}line"))  # no 0-1 axis
    drawn = parsed(column_chart([Bar("a", 0), Bar("b", 0)], title="t", forecast=[None, 5]))
    assert EMPTY_NOTE not in [t.text for t in drawn.iter(f"{SVG}text")]  # a forecast to show
