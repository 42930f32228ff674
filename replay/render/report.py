"""The HTML report of one or more runs: pure, RunView(s) in, one self-contained HTML string
out (inline CSS and SVG, no scripts, nothing fetched).

Sections: overview (one row per run); with two or more runs, a side-by-side comparison
(config differences, final figures per problem with ratios to the first run, LLM calls and
cost); progress per problem (best % of peak and speedup per iteration, one series per run,
and the per-iteration table); LLM cost over time and token use per role; the best kernel's
lineage with a diff per step and the search tree; memory snapshots; failures.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelopt.catalog import LLM_ROLES
from replay.fold import RunView
from replay.render import fmt
from replay.render.htmlkit import Cell, esc, page, table
from replay.render.kernels import failures_section, lineage_section, memory_section
from replay.render.svg import BarSeries, Series, bar_chart, line_chart
from replay.states import Driver, State, run_state
from replay.summary import config_differences, geomean, summarize


def run_labels(views: Sequence[RunView]) -> list[str]:
    labels = []
    for i, v in enumerate(views):
        label = v.run_id or f"run {i + 1}"
        if v.until_iteration is not None:
            label += f" @ iteration {v.until_iteration}"
        if label in labels:
            label += f" #{i + 1}"
        labels.append(label)
    return labels


def _pct100(x: float) -> str:
    return f"{x:.0f}%" if abs(x) >= 10 or x == 0 else f"{x:.1f}%"


def _x(x: float) -> str:
    return f"{x:.2f}x" if x < 10 else f"{x:.1f}x"


def _usd_g(y: float) -> str:
    return f"${y:g}"


def _k(y: float) -> str:
    return f"{y:g}k"


def _ratio_cell(new: float | None, old: float | None) -> tuple[str, str]:
    if not new or not old:
        return "-", ""
    r = new / old
    return f"{r:.2f}x", "good" if r > 1.005 else ("bad" if r < 0.995 else "")


def overview(views: Sequence[RunView], labels: list[str], states: Sequence[State] | None = None) -> str:
    """Two tables (one that wide would not fit a page): the runs' figures, and their settings
    and LLM use. `states`: each run's (replay/states.py; default: from its log alone)."""
    rows, settings = [], []
    for i, (v, label) in enumerate(zip(views, labels, strict=True)):
        s = summarize(v)
        fork = f"{s.parent_run} @ iteration {s.fork_iteration}" if s.parent_run else "-"
        state = states[i] if states is not None else run_state(s.status, Driver(), source="stream")
        rows.append(
            [
                label,
                state.label,
                fmt.stamp(s.started_ts),
                fmt.duration(s.duration_s),
                s.device,
                str(s.problems),
                s.iterations,
                str(s.kernels),
                fmt.pct(s.baseline_pct_peak_geomean),
                fmt.pct(s.pct_peak_geomean),
                s.labelled_speedup_text,
                fork,
            ]
        )
        settings.append(
            [
                label,
                s.search,
                ", ".join(s.models) or "-",
                str(s.seed) if s.seed is not None else "-",
                str(s.llm_calls),
                fmt.tokens(s.tokens),
                fmt.usd(s.cost_usd),
            ]
        )
    head = [
        "run",
        "status",
        "started",
        "duration",
        "device",
        "problems",
        "iterations",
        "kernels",
        "baseline %peak (geomean)",
        "best %peak (geomean)",
        "speedup (geomean)",
        "forked from",
    ]
    return (
        table(head, rows, cls="runs", numeric_from=5)
        + table(
            ["run", "search", "models", "seed", "LLM calls", "tokens", "LLM cost"],
            settings,
            cls="run-settings",
            numeric_from=3,
        )
        + isolation_notes(views, labels)
    )


def isolation_notes(views: Sequence[RunView], labels: list[str]) -> str:
    """A warning for every run that let LLM-written code run without full isolation, or
    whose profiles record kernels that ran without it (see hardware_agents/README.md)."""
    out = []
    for v, label in zip(views, labels, strict=True):
        allowed = v.settings.sandbox.allow_unisolated
        bare = sum(
            1
            for k in v.kernels.values()
            if k.profile is not None and k.profile.isolation and not k.profile.isolation.get("landlock_abi")
        )
        if allowed or bare:
            out.append(
                f'<p class="warn">{esc(label)}: sandbox.allow_unisolated was '
                f"{'set' if allowed else 'not set'}; {bare} kernel(s) ran without filesystem isolation</p>"
            )
    return "".join(out)


def _remeasured(r) -> str:
    """The end-of-problem interleaved re-measure: its speedup and whether the recorded one
    stands within the timing noise."""
    if r.remeasured_speedup is None:
        return "-"
    band = f" (noise ±{100 * (r.remeasure_noise or 0):.0f}%)"
    return fmt.speedup(r.remeasured_speedup) + band + ("" if r.remeasure_agrees else ", recorded disagrees")


def _or_est(f: Any, measured: float | None, estimated: float | None) -> str:
    """A measured figure, else an ESTIMATED one (a cost model's) marked `est.`."""
    return f(measured) if measured is not None or estimated is None else f"est. {f(estimated)}"


def results_tables(views: Sequence[RunView], labels: list[str]) -> str:
    out = []
    for v, label in zip(views, labels, strict=True):
        rows: list[list[Cell]] = []
        results = v.results()
        for r in results:
            rows.append(
                [
                    r.problem,
                    r.device,
                    _or_est(fmt.ms, r.baseline_ms, r.est_baseline_ms),
                    _or_est(fmt.ms, r.best_ms, r.est_best_ms),
                    _or_est(fmt.speedup, r.speedup, r.est_speedup),
                    _or_est(fmt.pct, r.baseline_pct_peak, r.est_baseline_pct_peak),
                    _or_est(fmt.pct, r.best_pct_peak, r.est_best_pct_peak),
                    str(r.kernels),
                    str(r.iterations),
                    fmt.usd(r.cost_usd),
                    (r.best_kernel_id or "-")[:12],
                    r.note or "",
                    _remeasured(r),
                ]
            )
        if len(results) > 1:
            rows.append(
                [
                    ("geomean", "total"),
                    "",
                    "",
                    "",
                    fmt.speedup(geomean(r.speedup for r in results)),
                    fmt.pct(geomean(r.baseline_pct_peak for r in results)),
                    fmt.pct(geomean(r.best_pct_peak for r in results)),
                    str(sum(r.kernels for r in results)),
                    "",
                    fmt.usd(v.cost_usd),
                    "",
                    "",
                    fmt.speedup(geomean(r.reported_speedup for r in results)),
                ]
            )
        out.append(f"<h3>{esc(label)}</h3>")
        out.append(
            table(
                [
                    "problem",
                    "device",
                    "recorded baseline",
                    "recorded best",
                    "recorded speedup",
                    "base %peak",
                    "best %peak",
                    "kernels",
                    "iterations",
                    "LLM cost",
                    "best kernel",
                    "note",
                    "re-measured speedup",
                ],
                rows,
                cls="results",
                attrs=f'data-run="{esc(v.run_id or "")}"',
                numeric_from=2,
            )
        )
    out.append(f'<p class="note">{esc(fmt.RECORDED_NOTE)}; {esc(fmt.REMEASURED_NOTE)}</p>')
    return "".join(out)


def comparison(views: Sequence[RunView], labels: list[str]) -> str:
    first = views[0]
    out = ["<h3>settings that differ</h3>"]
    diffs = config_differences(list(views))
    if diffs:
        out.append(
            table(
                ["config key", *labels],
                [[k, *(esc_json(x) for x in vals)] for k, vals in diffs],
                cls="config-diff",
                numeric_from=99,
            )
        )
    else:
        out.append('<p class="note">same configuration</p>')
    problems = sorted(set().union(*(v.problems for v in views)))
    head = ["problem"]
    for label in labels:
        head += [f"{label} best %peak", f"{label} recorded speedup"]
    for label in labels[1:]:
        head += [f"%peak {label} / {labels[0]}", f"recorded speedup {label} / {labels[0]}"]
    by_run = [{r.problem: r for r in v.results()} for v in views]
    rows = []
    for name in problems:
        row: list = [name]
        for res in by_run:
            r = res.get(name)
            row += [fmt.pct(r.best_pct_peak if r else None), fmt.speedup(r.speedup if r else None)]
        base = by_run[0].get(name)
        for res in by_run[1:]:
            r = res.get(name)
            row += [
                _ratio_cell(r.best_pct_peak if r else None, base.best_pct_peak if base else None),
                _ratio_cell(r.speedup if r else None, base.speedup if base else None),
            ]
        rows.append(row)
    out.append("<h3>final figures</h3>")
    out.append(table(head, rows, cls="comparison", numeric_from=1))
    rows = []
    for v, label in zip(views, labels, strict=True):
        s = summarize(v)
        rows.append(
            [
                label,
                s.parent_run or "-",
                str(s.fork_iteration) if s.fork_iteration is not None else "-",
                str(s.llm_calls),
                fmt.tokens(s.tokens),
                fmt.usd(s.cost_usd),
                _ratio_cell(s.cost_usd, first.cost_usd)[0] if v is not first else "-",
                str(s.kernels),
                fmt.duration(s.duration_s),
            ]
        )
    out.append("<h3>LLM use and cost</h3>")
    out.append(
        table(
            [
                "run",
                "parent run",
                "fork iteration",
                "LLM calls",
                "tokens",
                "LLM cost",
                f"cost / {labels[0]}",
                "kernels",
                "duration",
            ],
            rows,
            cls="comparison-cost",
            numeric_from=3,
        )
    )
    return "".join(out)


def esc_json(x: object) -> str:
    return "-" if x is None else str(x)


def progress_charts(views: Sequence[RunView], labels: Sequence[str], problem: str) -> tuple[str, str]:
    """A problem's best % of peak and its speedup over the baseline per iteration, a line per
    run (a run without the problem is left out): the report's and the dashboard's charts."""
    pct, sp = [], []
    for v, label in zip(views, labels, strict=True):
        pts = v.best_per_iteration(problem)
        if not pts and problem not in v.problems:
            continue
        pct.append(
            Series(
                label,
                [(p.iteration, 100 * p.best_pct_peak if p.best_pct_peak is not None else None) for p in pts],
            )
        )
        sp.append(Series(label, [(p.iteration, p.speedup) for p in pts]))
    pct_svg, sp_svg = (
        line_chart(
            series,
            title=f"{problem}: {what} per iteration",
            name=f"{key}:{problem}",
            x_label="iteration",
            y_label=y_label,
            y_fmt=y_fmt,
            integer_x=True,
        )
        for series, what, key, y_label, y_fmt in (
            (pct, "best % of peak", "pct-peak", "% of peak", _pct100),
            (sp, "speedup over baseline", "speedup", "speedup", _x),
        )
    )
    return pct_svg, sp_svg


def progress(views: Sequence[RunView], labels: list[str]) -> str:
    problems = sorted(set().union(*(v.problems for v in views)))
    out = []
    for name in problems:
        out.append(f'<h3>{esc(name)}</h3><div class="charts">')
        out.extend(progress_charts(views, labels, name))
        out.append("</div>")
        for v, label in zip(views, labels, strict=True):
            pts = v.best_per_iteration(name)
            if not pts:
                continue
            p = v.problems[name]
            profiled = {it.iteration: it.kernels_profiled for it in p.iterations}
            rows = [
                [
                    str(pt.iteration),
                    pt.best_kernel_id[:12],
                    fmt.ms(pt.best_latency_ms),
                    fmt.pct(pt.best_pct_peak),
                    fmt.speedup(pt.speedup),
                    str(profiled.get(pt.iteration, 0)),
                    str(len(p.beams.get(pt.iteration, []))),
                    fmt.usd(pt.cost_usd),
                ]
                for pt in pts
            ]
            caption = f"<h4>{esc(label)}</h4>" if len(views) > 1 else ""
            out.append(
                caption
                + table(
                    [
                        "iteration",
                        "best kernel",
                        "latency",
                        "% of peak",
                        "speedup",
                        "kernels profiled",
                        "beam",
                        "LLM cost so far",
                    ],
                    rows,
                    cls="iterations",
                    attrs=f'data-run="{esc(v.run_id or "")}" data-problem="{esc(name)}"',
                )
            )
    return "".join(out)


def _downsample(
    points: list[tuple[float, float | None]], limit: int = 400
) -> list[tuple[float, float | None]]:
    if len(points) <= limit:
        return points
    step = len(points) / limit
    out = [points[int(i * step)] for i in range(limit)]
    out.append(points[-1])
    return out


def cost(views: Sequence[RunView], labels: list[str]) -> str:
    """The cost section: cost and tokens over time, tokens per role, and the usage table."""
    roles: list[str] = [r for r in LLM_ROLES if any(r in v.usage for v in views)]
    roles += sorted({r for v in views for r in v.usage} - set(roles))
    return "".join(
        [
            '<div class="charts">',
            *_over_time_charts(views, labels),
            _tokens_per_role_chart(views, labels, roles),
            "</div>",
            _usage_table(views, labels, roles),
        ]
    )


def _over_time_charts(views: Sequence[RunView], labels: list[str]) -> list[str]:
    """Cumulative LLM cost and tokens over each run's elapsed time (s, min or h)."""
    longest = max((v.duration_s for v in views), default=0.0)
    unit, scale = ("h", 3600.0) if longest > 3 * 3600 else (("min", 60.0) if longest > 180 else ("s", 1.0))
    cost_s, tok_s = [], []
    for v, label in zip(views, labels, strict=True):
        t0 = v.first_ts or 0.0
        cost_pts: list[tuple[float, float | None]] = [(0.0, 0.0)]
        tok_pts: list[tuple[float, float | None]] = [(0.0, 0.0)]
        for c in v.cost_series:
            x = (c.ts - t0) / scale
            cost_pts.append((x, c.cost_usd))
            tok_pts.append((x, c.tokens / 1000))
        cost_s.append(Series(label, _downsample(cost_pts)))
        tok_s.append(Series(label, _downsample(tok_pts)))

    def _x_fmt(x: float) -> str:
        return f"{x:g} {unit}"

    return [
        line_chart(
            series,
            title=f"LLM {what} over time",
            name=f"{what}-over-time",
            x_label=f"elapsed ({unit})",
            y_label=y_label,
            x_fmt=_x_fmt,
            y_fmt=y_fmt,
        )
        for series, what, y_label, y_fmt in (
            (cost_s, "cost", "USD (cumulative)", _usd_g),
            (tok_s, "tokens", "k tokens (cumulative)", _k),
        )
    ]


def _tokens_per_role_chart(views: Sequence[RunView], labels: list[str], roles: list[str]) -> str:
    """One run: its prompt and completion tokens per role, stacked; several: a bar per run."""
    stacked = len(views) == 1
    if stacked:
        usage = views[0].usage
        bars = [
            BarSeries("prompt", [usage[r].prompt_tokens / 1000 if r in usage else 0.0 for r in roles]),
            BarSeries(
                "completion", [usage[r].completion_tokens / 1000 if r in usage else 0.0 for r in roles]
            ),
        ]
    else:
        bars = [
            BarSeries(label, [v.usage[r].tokens / 1000 if r in v.usage else 0.0 for r in roles])
            for v, label in zip(views, labels, strict=True)
        ]
    return bar_chart(
        roles,
        bars,
        title="tokens per role",
        name="tokens-per-role",
        y_label="k tokens",
        y_fmt=lambda y: f"{y:g}k",
        stacked=stacked,
    )


def _usage_table(views: Sequence[RunView], labels: list[str], roles: list[str]) -> str:
    rows = []
    for v, label in zip(views, labels, strict=True):
        for role in roles:
            u = v.usage.get(role)
            if u is None:
                continue
            rows.append(
                [
                    label,
                    role,
                    str(u.calls),
                    str(u.failed_calls),
                    fmt.tokens(u.prompt_tokens),
                    fmt.tokens(u.completion_tokens),
                    fmt.usd(u.cost_usd),
                    f"{u.latency_s / u.calls:.2f} s" if u.calls else "-",
                ]
            )
    return table(
        ["run", "role", "calls", "failed", "prompt tokens", "completion tokens", "cost", "mean latency"],
        rows,
        cls="usage",
        numeric_from=2,
    )


def build_report(
    views: Sequence[RunView],
    *,
    title: str | None = None,
    now: float | None = None,
    states: Sequence[State] | None = None,
) -> str:
    """The report of `views` (one run, or several side by side, the first as reference);
    `states`: each run's state (replay/states.py: its log and its driver's lock)."""
    if not views:
        raise ValueError("a report needs at least one run")
    labels = run_labels(views)
    title = title or (
        "AccelOpt run " + labels[0] if len(views) == 1 else "AccelOpt runs: " + " vs ".join(labels)
    )
    sections: list[tuple[str, str, str]] = [
        ("overview", "Overview", overview(views, labels, states) + results_tables(views, labels))
    ]
    if len(views) > 1:
        sections.append(("comparison", "Side by side", comparison(views, labels)))
    sections += [
        ("progress", "Progress per problem", progress(views, labels)),
        ("cost", "LLM cost and tokens", cost(views, labels)),
        (
            "lineage",
            "Lineage of the best kernels",
            "".join(lineage_section(v, lab) for v, lab in zip(views, labels, strict=True)),
        ),
        ("memory", "Memory", "".join(memory_section(v, lab) for v, lab in zip(views, labels, strict=True))),
        (
            "failures",
            "Kernel outcomes and failures",
            "".join(failures_section(v, lab) for v, lab in zip(views, labels, strict=True)),
        ),
    ]
    return page(title, sections, sum(v.events for v in views), now)
