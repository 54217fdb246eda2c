"""Charts drawn on the server as inline SVG: figures in, markup out, every label escaped.

Two shapes: columns over time (a trend, with the forecast as a dashed step line over the
periods it covers) and horizontal bars for a breakdown (a label above each bar, so long
endpoint names stay readable at phone width). Styling comes from the page's CSS classes
(chart, bar, line, forecast, axis): no style attributes, which the dashboard's
Content-Security-Policy would refuse."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

MAX_X_LABELS = 8


@dataclass(frozen=True, slots=True)
class Bar:
    label: str
    value: int  # credits: never negative on a chart


def nice_ceiling(value: int) -> int:
    """The smallest 1, 2 or 5 times a power of ten at or above `value` (1 at least), so
    the axis reads in round numbers."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if step * factor >= value:
                return step * factor
        step *= 10


EMPTY_NOTE = "No usage in these periods yet."


def _figure(n: int) -> str:
    return f"{n:,}"


def _axis_figure(n: int) -> str:
    """A round axis figure kept short: 2,000 or 50k or 2.5M."""
    for size, suffix in ((10**9, "B"), (10**6, "M"), (10**4, "k")):
        if n >= size:
            unit = 1000 if suffix == "k" else size
            whole, rest = divmod(n, unit)
            return f"{whole:,}{'.' + str(rest * 10 // unit) if rest else ''}{suffix}"
    return _figure(n)


def _svg(width: int, height: int, title: str, body: list[str], kind: str) -> Markup:
    head = (
        f'<svg class="chart {kind}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{escape(title)}</title>"
    )
    return Markup(head + "".join(body) + "</svg>")  # noqa: S704 - every text is escaped above


def column_chart(
    bars: Sequence[Bar],
    *,
    title: str,
    forecast: Sequence[int | None] = (),
    width: int = 640,
    height: int = 240,
) -> Markup:
    """One column per period, oldest first. `forecast[i]`, when given and not None, is what
    period i is expected to total at the current pace: drawn as a dashed step line."""
    if len(forecast) not in (0, len(bars)):
        raise ValueError("the forecast needs one value (or None) per bar")
    left, right, top, bottom = 52, 8, 10, 28
    plot_w, plot_h = width - left - right, height - top - bottom
    planned = [f for f in forecast if f is not None]
    if not any(b.value > 0 for b in bars) and not any(planned):
        note = (
            f'<text class="empty-note" x="{width / 2:.0f}" y="48" '
            f'text-anchor="middle">{escape(EMPTY_NOTE)}</text>'
        )
        return _svg(width, 80, title, [note], "columns empty")
    scale = nice_ceiling(max([b.value for b in bars] + planned + [1]))
    slot = plot_w / max(len(bars), 1)
    base = top + plot_h

    def y(value: int) -> float:
        return base - plot_h * max(value, 0) / scale

    body = []
    for tick in (0, scale // 2, scale) if scale > 1 else (0, scale):
        ty = round(y(tick), 1)
        body.append(f'<line class="axis" x1="{left}" y1="{ty}" x2="{width - right}" y2="{ty}"/>')
        body.append(
            f'<text x="{left - 6}" y="{ty + 4}" text-anchor="end">{_axis_figure(tick)}</text>'
        )
    every = max(1, -(-len(bars) // MAX_X_LABELS))
    for i, bar in enumerate(bars):
        x = left + i * slot
        top_y = y(bar.value)
        if bar.value > 0:
            body.append(
                f'<rect class="bar" x="{x + slot * 0.15:.1f}" y="{top_y:.1f}" '
                f'width="{slot * 0.7:.1f}" height="{base - top_y:.1f}">'
                f"<title>{escape(bar.label)}: {_figure(bar.value)} credits</title></rect>"
            )
        if i % every == 0:
            minor = ' class="minor"' if (i // every) % 2 else ""  # hidden on narrow screens
            body.append(
                f'<text{minor} x="{x + slot / 2:.1f}" y="{height - 8}" text-anchor="middle">'
                f"{escape(bar.label)}</text>"
            )
    body.extend(_forecast_lines(bars, forecast, left, slot, y))
    return _svg(width, height, title, body, "columns")


def _forecast_lines(
    bars: Sequence[Bar],
    forecast: Sequence[int | None],
    left: int,
    slot: float,
    y: Callable[[int], float],
) -> list[str]:
    """A dashed step line over each run of periods that have a forecast."""
    runs: list[list[tuple[int, int]]] = []
    for i, value in enumerate(forecast):
        if value is None:
            continue
        if runs and runs[-1][-1][0] == i - 1:
            runs[-1].append((i, value))
        else:
            runs.append([(i, value)])
    lines = []
    for run in runs:
        points = []
        for i, value in run:
            vy = y(value)
            points.append(f"{left + i * slot:.1f},{vy:.1f}")
            points.append(f"{left + (i + 1) * slot:.1f},{vy:.1f}")
        described = ", ".join(f"{bars[i].label}: {_figure(v)}" for i, v in run)
        lines.append(
            f'<polyline class="forecast" points="{" ".join(points)}">'
            f"<title>Forecast at the current pace: {escape(described)} credits</title></polyline>"
        )
    return lines


def bar_list(bars: Sequence[Bar], *, title: str, width: int = 400) -> Markup:
    """Horizontal bars, one per group, in the order given; the label and figure above each."""
    row, bar_h, pad = 38, 14, 4
    height = max(len(bars), 1) * row + pad
    scale = max([b.value for b in bars] + [1])
    body = []
    for i, bar in enumerate(bars):
        top = pad + i * row
        length = (width - 2) * max(bar.value, 0) / scale
        body.append(f'<text x="0" y="{top + 12}">{escape(bar.label)}</text>')
        body.append(
            f'<text x="{width}" y="{top + 12}" text-anchor="end">{_figure(bar.value)}</text>'
        )
        body.append(f'<rect class="track" x="0" y="{top + 17}" width="{width}" height="{bar_h}"/>')
        if bar.value > 0:
            body.append(
                f'<rect class="bar" x="0" y="{top + 17}" width="{max(length, 1):.1f}" '
                f'height="{bar_h}"><title>{escape(bar.label)}: {_figure(bar.value)} credits'
                "</title></rect>"
            )
    return _svg(width, height, title, body, "bars")
