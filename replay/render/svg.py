"""Small inline-SVG charts for self-contained HTML reports (no plotting dependency).

`line_chart` draws series of (x, y) points (None breaks a line) with axes, nice ticks, a
legend and a tooltip (`<title>`) on every point; `bar_chart` draws grouped or stacked bars.
Both return an `<svg>` element as a string with `class="chart ..."` and a `data-chart`
name, so a page (or a test) can find them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#7f7f7f",
    "#bcbd22",
)

Fmt = Callable[[float], str]


@dataclass
class Series:
    name: str
    points: list[tuple[float, float | None]]
    color: str | None = None
    dashed: bool = False


@dataclass
class BarSeries:
    name: str
    values: list[float]
    color: str | None = None


@dataclass
class _Frame:
    """Plot area geometry and the data->pixel mapping."""

    width: int
    height: int
    left: int = 64
    right: int = 16
    top: int = 30
    bottom: int = 44
    x0: float = 0.0
    x1: float = 1.0
    y0: float = 0.0
    y1: float = 1.0
    parts: list[str] = field(default_factory=list)

    @property
    def pw(self) -> float:
        return self.width - self.left - self.right

    @property
    def ph(self) -> float:
        return self.height - self.top - self.bottom

    def px(self, x: float) -> float:
        return self.left + (x - self.x0) / (self.x1 - self.x0 or 1.0) * self.pw

    def py(self, y: float) -> float:
        return self.top + self.ph - (y - self.y0) / (self.y1 - self.y0 or 1.0) * self.ph


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (about `count` of them)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0, 1.0]
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        pad = abs(hi) * 0.1 or 1.0
        lo, hi = (lo, hi + pad) if lo == 0 else (lo - pad, hi + pad)
    raw = (hi - lo) / max(1, count)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step + 1e-9) * step
    ticks: list[float] = []
    v = start
    while v < hi + step * 0.5 and len(ticks) < 50:
        ticks.append(round(v, 12))
        v += step
    if ticks[-1] < hi:
        ticks.append(round(ticks[-1] + step, 12))
    return ticks


def _num(v: float) -> str:
    return f"{v:.1f}"


def _g(v: float) -> str:
    return f"{v:g}"


def _open(kind: str, name: str, title: str, width: int, height: int) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart {kind}" data-chart="{escape(name)}" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<text class="chart-title" x="{width / 2:.0f}" y="18" text-anchor="middle">{escape(title)}</text>',
    ]


def _axes(
    f: _Frame,
    xticks: Sequence[float],
    yticks: Sequence[float],
    x_fmt: Fmt,
    y_fmt: Fmt,
    x_label: str,
    y_label: str,
    x_labels: Sequence[str] | None = None,
) -> None:
    out = f.parts
    for t in yticks:
        y = f.py(t)
        out.append(
            f'<line class="grid" x1="{f.left}" x2="{f.left + f.pw:.1f}" y1="{_num(y)}" y2="{_num(y)}"/>'
        )
        out.append(
            f'<text class="tick" x="{f.left - 6}" y="{_num(y + 4)}" text-anchor="end">{escape(y_fmt(t))}</text>'
        )
    for i, t in enumerate(xticks):
        x = f.px(t)
        label = x_labels[i] if x_labels is not None else x_fmt(t)
        out.append(
            f'<text class="tick" x="{_num(x)}" y="{f.top + f.ph + 16:.0f}" text-anchor="middle">'
            f"{escape(label)}</text>"
        )
    out.append(f'<line class="axis" x1="{f.left}" x2="{f.left}" y1="{f.top}" y2="{f.top + f.ph:.1f}"/>')
    out.append(
        f'<line class="axis" x1="{f.left}" x2="{f.left + f.pw:.1f}" y1="{f.top + f.ph:.1f}" '
        f'y2="{f.top + f.ph:.1f}"/>'
    )
    if x_label:
        out.append(
            f'<text class="axis-label" x="{f.left + f.pw / 2:.0f}" y="{f.top + f.ph + 36:.0f}" '
            f'text-anchor="middle">{escape(x_label)}</text>'
        )
    if y_label:
        cy = f.top + f.ph / 2
        out.append(
            f'<text class="axis-label" x="14" y="{cy:.0f}" text-anchor="middle" '
            f'transform="rotate(-90 14 {cy:.0f})">{escape(y_label)}</text>'
        )


LEGEND_ROW = 15  # px per legend entry


def _legend_height(n_series: int) -> int:
    """The room a legend of `n_series` takes below the plot (none for a single series)."""
    return LEGEND_ROW * n_series + 6 if n_series > 1 else 0


def _legend(f: _Frame, names: Sequence[tuple[str, str, bool]]) -> None:
    """One row per series under the axis label, outside the plot: it never covers data."""
    if len(names) < 2:
        return
    x = f.left + 8
    y = f.height - _legend_height(len(names)) + 8
    longest = max(len(n) for n, _, _ in names)
    f.parts.append(
        f'<rect class="legend-box" x="{x - 4}" y="{y - 8}" width="{min(26 + 6.2 * longest, f.pw - 8):.0f}" '
        f'height="{LEGEND_ROW * len(names) + 2}" fill="#ffffff" fill-opacity="0.8" rx="3"/>'
    )
    for name, color, dashed in names:
        dash = ' stroke-dasharray="5 3"' if dashed else ""
        f.parts.append(
            f'<line x1="{x}" x2="{x + 16}" y1="{y}" y2="{y}" stroke="{color}" stroke-width="2.5"{dash}/>'
        )
        f.parts.append(f'<text class="legend" x="{x + 20}" y="{y + 4}">{escape(name)}</text>')
        y += LEGEND_ROW


def line_chart(
    series: Sequence[Series],
    *,
    title: str,
    name: str = "",
    x_label: str = "",
    y_label: str = "",
    x_fmt: Fmt = _g,
    y_fmt: Fmt = _g,
    width: int = 460,
    height: int = 260,
    y_from_zero: bool = True,
    integer_x: bool = False,
) -> str:
    """A line chart of `series`; points get tooltips "<series>: <x> -> <y>"."""
    xs = [x for s in series for x, y in s.points if y is not None]
    ys = [y for s in series for _, y in s.points if y is not None]
    extra = _legend_height(len(series))
    height += extra
    f = _Frame(width, height, bottom=_Frame.bottom + extra)
    parts = _open("line-chart", name or title, title, width, height)
    if not ys:
        parts.append(
            f'<text class="empty" x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle">'
            "no data</text></svg>"
        )
        return "".join(parts)
    ylo = min(0.0, min(ys)) if y_from_zero else min(ys)
    yticks = nice_ticks(ylo, max(ys))
    if integer_x:
        lo, hi = math.floor(min(xs)), math.ceil(max(xs))
        stride = max(1, math.ceil((hi - lo + 1) / 10))
        xticks: list[float] = list(range(lo, hi + 1, stride)) or [lo]
        f.x0, f.x1 = (lo - 0.25, hi + 0.25) if hi > lo else (lo - 1, hi + 1)
    else:
        xticks = nice_ticks(min(xs), max(xs))
        f.x0, f.x1 = xticks[0], xticks[-1]
    f.y0, f.y1 = yticks[0], yticks[-1]
    f.parts = parts
    _axes(f, xticks, yticks, x_fmt, y_fmt, x_label, y_label)
    legend = []
    for i, s in enumerate(series):
        color = s.color or PALETTE[i % len(PALETTE)]
        legend.append((s.name, color, s.dashed))
        dash = ' stroke-dasharray="5 3"' if s.dashed else ""
        runs: list[list[tuple[float, float]]] = [[]]
        for x, y in s.points:
            if y is None:
                runs.append([])
            else:
                runs[-1].append((x, y))
        parts.append(f'<g class="series" data-series="{escape(s.name)}">')
        for run in runs:
            if len(run) > 1:
                d = " ".join(f"{_num(f.px(x))},{_num(f.py(y))}" for x, y in run)
                lx, ly = run[-1]
                parts.append(
                    f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{d}">'
                    f"<title>{escape(s.name)}: last {escape(x_fmt(lx))} \u2192 {escape(y_fmt(ly))}</title>"
                    "</polyline>"
                )
        if sum(len(r) for r in runs) <= 60:  # markers with tooltips, unless the series is dense
            for x, y in (p for r in runs for p in r):
                parts.append(
                    f'<circle cx="{_num(f.px(x))}" cy="{_num(f.py(y))}" r="3" fill="{color}">'
                    f"<title>{escape(s.name)}: {escape(x_fmt(x))} \u2192 {escape(y_fmt(y))}</title>"
                    "</circle>"
                )
        parts.append("</g>")
    _legend(f, legend)
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(
    categories: Sequence[str],
    series: Sequence[BarSeries],
    *,
    title: str,
    name: str = "",
    y_label: str = "",
    y_fmt: Fmt = _g,
    stacked: bool = False,
    width: int = 460,
    height: int = 260,
) -> str:
    """Bars per category: one per series side by side, or stacked."""
    extra = _legend_height(len(series))
    height += extra
    f = _Frame(width, height, bottom=_Frame.bottom + extra)
    parts = _open("bar-chart", name or title, title, width, height)
    f.parts = parts
    if not categories or not series:
        parts.append(
            f'<text class="empty" x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle">'
            "no data</text></svg>"
        )
        return "".join(parts)
    if stacked:
        top = max(sum(s.values[i] for s in series) for i in range(len(categories)))
    else:
        top = max(max(s.values, default=0.0) for s in series)
    yticks = nice_ticks(0.0, top or 1.0)
    f.y0, f.y1 = yticks[0], yticks[-1]
    f.x0, f.x1 = 0.0, float(len(categories))
    _axes(f, [i + 0.5 for i in range(len(categories))], yticks, _g, y_fmt, "", y_label, list(categories))
    slot = f.pw / len(categories)
    inner = slot * 0.7
    bw = inner if stacked else inner / len(series)
    legend = []
    for j, s in enumerate(series):
        color = s.color or PALETTE[j % len(PALETTE)]
        legend.append((s.name, color, False))
        parts.append(f'<g class="series" data-series="{escape(s.name)}">')
        for i, cat in enumerate(categories):
            v = s.values[i]
            base = sum(series[k].values[i] for k in range(j)) if stacked else 0.0
            x = f.left + i * slot + (slot - inner) / 2 + (0 if stacked else j * bw)
            y_top, y_bot = f.py(base + v), f.py(base)
            parts.append(
                f'<rect x="{_num(x)}" y="{_num(y_top)}" width="{_num(max(bw - 1, 1))}" '
                f'height="{_num(max(y_bot - y_top, 0))}" fill="{color}">'
                f"<title>{escape(cat)} \u00b7 {escape(s.name)}: {escape(y_fmt(v))}</title></rect>"
            )
        parts.append("</g>")
    _legend(f, legend)
    parts.append("</svg>")
    return "".join(parts)
