"""A campaign, presented: its charts (per device, each item's speedup and % of peak over the
campaign's time; spend per day), its tables (items, each device's queue and why each item is
where it is, runs), and the static report (`accelopt report CAMPAIGN`). The dashboard's
campaign page (replay/dashboard/models.py) shows the same charts and rows.
"""

from __future__ import annotations

from collections.abc import Callable

from replay.campaign import FIGURES_NOTE, CampaignView, ItemPoint, ItemRow, item_rows, run_states, summary
from replay.render import fmt
from replay.render.htmlkit import esc, page, table
from replay.render.svg import BarSeries, Series, bar_chart, line_chart
from replay.states import State


def _hours(view: CampaignView, ts: float) -> float:
    start = view.started.ts if view.started is not None else ts
    return (ts - start) / 3600.0


def devices(view: CampaignView) -> list[str]:
    return sorted({it.item.device for it in view.items.values()})


def speedup_chart(view: CampaignView, device: str) -> str:
    """Each item of `device`: its speedup over the suite's baseline after each of its runs."""
    est = (
        " (estimated)" if any(it.estimated for it in view.items.values() if it.item.device == device) else ""
    )
    return _items_chart(
        view,
        device,
        lambda p: p.speedup,
        start=1.0,  # where every item starts: the baseline
        title=f"best speedup{est}",
        name="speedup",
        y_label="speedup over the baseline",
        y_fmt=lambda y: f"{y:.2f}x",
    )


def peak_chart(view: CampaignView, device: str) -> str:
    return _items_chart(
        view,
        device,
        lambda p: p.pct_peak * 100 if p.pct_peak is not None else None,
        title="best % of peak",
        name="peak",
        y_label="% of peak",
        y_fmt=lambda y: f"{y:.0f}%",
    )


def _items_chart(
    view: CampaignView,
    device: str,
    value: Callable[[ItemPoint], float | None],
    *,
    start: float | None = None,
    title: str,
    name: str,
    y_label: str,
    y_fmt: Callable[[float], str],
) -> str:
    """A line per item of `device`: `value` after each of its runs, over the hours since the
    campaign's start (from `start` at hour 0 where given)."""
    series = []
    for key, it in view.items.items():
        if it.item.device != device:
            continue
        points: list[tuple[float, float | None]] = [(0.0, start)] if start is not None else []
        points += [(_hours(view, p.ts), value(p)) for p in view.history.get(key, [])]
        series.append(Series(it.item.problem, points))
    return line_chart(
        series,
        title=f"{device}: {title}",
        name=f"{name}-{device}",
        x_label="hours since the start",
        y_label=y_label,
        y_fmt=y_fmt,
    )


def spend_chart(view: CampaignView) -> str:
    days = view.spend_per_day()
    return bar_chart(
        list(days),
        [BarSeries("LLM spend", list(days.values()))],
        title="LLM spend per day (of the runs scheduled that day)",
        name="spend-per-day",
        y_label="USD",
        y_fmt=lambda y: f"${y:.2f}",
    )


def item_cells(r: ItemRow) -> list[str]:
    est = "est. " if r.estimated else ""
    return [
        r.item,
        str(r.runs),
        f"{est}{r.speedup:.2f}x",
        f"{r.pct_peak:.1%}" if r.pct_peak is not None else "-",
        r.figures,
        f"${r.cost_usd:.4f}",
        r.state,
        r.why,
    ]


ITEM_HEADERS = [
    "item",
    "runs",
    "speedup",
    "% of peak",
    "how measured",
    "LLM cost",
    "state",
    "why (its queue at the last decision)",
]


def queue_rows(view: CampaignView, device: str) -> list[list[str]]:
    d = view.queues.get(device)
    if d is None:
        return []
    return [
        [str(i + 1), q.item, q.state, f"{q.score:.4g}" if q.score is not None else "-", q.why]
        for i, q in enumerate(d.queue)
    ]


QUEUE_HEADERS = ["#", "item", "state", "score", "why"]


def run_cells(view: CampaignView, run_id: str, state: State) -> list[str]:
    """A run's row; `state`: its state (replay.campaign.run_states)."""
    r = view.runs[run_id]
    f = r.finished
    gain = "-"
    if f is not None and f.gain is not None:
        gain = f"{'est. ' if f.estimated else ''}{f.gain:.2f}x ({f.gain_source})"
    return [
        str(r.scheduled.index),
        run_id,
        r.scheduled.item,
        fmt.stamp(r.scheduled.ts),
        state.label,
        gain,
        f"${f.cost_usd:.4f}" if f else "-",
        f"{f.duration_s:.0f} s" if f else "-",
        r.scheduled.reason.why,
    ]


RUN_HEADERS = [
    "#",
    "run",
    "item",
    "scheduled",
    "status",
    "gain over its start",
    "LLM cost",
    "length",
    "why it ran",
]


def build_campaign_report(
    view: CampaignView, state: State, *, title: str | None = None, now: float | None = None
) -> str:
    """The static report of a campaign in its `state` (replay/states.py): one self-contained
    HTML page (inline CSS and SVG)."""
    s = summary(view, state)
    runs = run_states(view, state)
    title = title or f"AccelOpt campaign {view.campaign_id}"
    facts = [
        ("status", state.label),
        ("runs", f"{len(view.runs)} ({s['run_states']})" if s["run_states"] else "0"),
        ("LLM spend", f"${view.spent_usd:.4f}"),
        ("policy", s["policy"]),
        ("resumed", str(len(view.resumed))),
    ]
    if view.stopped is not None:
        facts.append(("why it ended", f"{view.stopped.reason}: {view.stopped.detail}"))
    if state.resume:
        facts.append(("to go on", state.resume))
    overview = table(["", ""], [[k, v] for k, v in facts], numeric_from=9)
    overview += table(ITEM_HEADERS, [item_cells(r) for r in item_rows(view, state)], numeric_from=1)
    overview += f"<p class=note>{esc(FIGURES_NOTE)}</p>"
    charts = "".join(
        f'<div class="grid2">{speedup_chart(view, d)}{peak_chart(view, d)}</div>' for d in devices(view)
    )
    queues = "".join(
        f"<h3>{esc(d)}</h3>" + table(QUEUE_HEADERS, queue_rows(view, d), numeric_from=3)
        for d in devices(view)
    )
    parked = "".join(f"<p class=note>parked {esc(p.device)}: {esc(p.reason)}</p>" for p in view.parked)
    sections = [
        ("overview", "Overview", overview + parked),
        ("progress", "Speedup and % of peak over time, per device", charts),
        ("spend", "Spend per day", spend_chart(view)),
        ("queue", "The queues: where each item is, and why", queues),
        (
            "runs",
            "Runs",
            table(RUN_HEADERS, [run_cells(view, r, runs[r]) for r in view.runs], numeric_from=9),
        ),
    ]
    return page(title, sections, view.events, now)
