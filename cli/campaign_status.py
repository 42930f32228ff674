"""A campaign in the terminal (`accelopt campaign status ID`, `replay ID`, the end of `campaign
run`/`resume`), and its state as its log and its driver's lock say (also `accelopt report ID`)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from replay.states import State, campaign_driver, campaign_state, resume_hint

RECENT_RUNS = 12


def state_of(view, root: str) -> State:
    """The campaign's state (replay/states.py): its log and its driver's lock."""
    from events.runsource import LOG_NAME
    from replay.campaign import campaign_dir

    cid = view.campaign_id or ""
    source = "file" if (campaign_dir(root, cid) / LOG_NAME).is_file() else "stream"
    return campaign_state(view, campaign_driver(root, cid), source=source, root=root)


def geomeans(s: dict) -> str:
    parts = []
    if s["geomean_speedup_measured"] is not None:
        parts.append(f"{s['geomean_speedup_measured']:.2f}x")
    if s["geomean_speedup_estimated"] is not None:
        parts.append(f"est. {s['geomean_speedup_estimated']:.2f}x")
    return " · ".join(parts) or "-"


def _pct(x: float | None) -> str:
    return f"{x:.1%}" if x is not None else "-"


def print_queues(console: Console, root: str) -> None:
    """The device queues the MCP servers of `root` hold (agent sessions' profiles), a line each."""
    from replay.device_queues import queue_lines

    for line in queue_lines(root):
        console.print(escape(line), highlight=False, soft_wrap=True)


def print_status(console: Console, view, root: str) -> State:
    """The campaign in the terminal; its state (the one its header line says)."""
    from replay.campaign import FIGURES_NOTE, item_rows, run_states, summary

    state = state_of(view, root)
    s = summary(view, state)
    runs_state = run_states(view, state)
    spec = view.spec
    budget = ""
    if spec is not None and spec.budget.total_usd is not None:
        budget = f" of ${spec.budget.total_usd:.2f}"
    if spec is not None and spec.budget.daily_usd is not None:
        budget += f" (${spec.budget.daily_usd:.2f} a day)"
    counts = f" ({s['run_states']})" if s["run_states"] else ""
    console.print(
        f"campaign [bold]{view.campaign_id}[/bold]: {state.label} · {len(view.runs)} runs{counts} "
        f"· LLM spend ${view.spent_usd:.4f}{budget} · policy {s['policy']} · speedup (geomean) {geomeans(s)}",
        highlight=False,
        soft_wrap=True,
    )
    if view.stopped is not None:
        console.print(f"{state.name}: {view.stopped.reason}: {escape(view.stopped.detail)}", soft_wrap=True)
    for p in {p.device: p for p in view.parked}.values():
        console.print(f"[yellow]parked {p.device}:[/yellow] {escape(p.reason)}", soft_wrap=True)
    print_queues(console, root)
    t = Table(
        title="items",
        caption=FIGURES_NOTE + "; why: its place in its device's queue at the last decision",
    )
    for col in ("item", "runs", "speedup", "% of peak", "how measured", "state", "why"):
        t.add_column(col, justify="right" if col in ("runs", "speedup", "% of peak") else "left")
    for r in item_rows(view, state):
        est = "est. " if r.estimated else ""
        t.add_row(
            r.item, str(r.runs), f"{est}{r.speedup:.2f}x", _pct(r.pct_peak), r.figures, r.state, escape(r.why)
        )
    console.print(t)
    runs = list(view.runs.values())[-RECENT_RUNS:]
    if runs:
        rt = Table(title=f"runs (the last {len(runs)} of {len(view.runs)})")
        for col in ("run", "item", "status", "gain", "LLM cost", "s", "why it ran"):
            rt.add_column(col, justify="right" if col in ("gain", "LLM cost", "s") else "left")
        for r in runs:
            f = r.finished
            rt.add_row(
                r.scheduled.run,
                r.scheduled.item,
                escape(runs_state[r.scheduled.run].label),
                f"{f.gain:.2f}x" if f and f.gain is not None else "-",
                f"${f.cost_usd:.4f}" if f else "-",
                f"{f.duration_s:.0f}" if f else "-",
                escape(r.scheduled.reason.why),
            )
        console.print(rt)
    days = view.spend_per_day()
    if days:
        console.print(
            "spend per day: " + ", ".join(f"{d} ${v:.4f}" for d, v in days.items()), highlight=False
        )
    hint = resume_hint(f"campaign {view.campaign_id}", state)
    if hint:
        console.print(f"[yellow]{escape(hint)}[/yellow]", soft_wrap=True, highlight=False)
    return state
