"""`accelopt campaign status [ID]`: a campaign in the terminal (its items, their speedups and
% of peak, why each is where it is in its queue, its runs and spend); without ID, the
campaigns under --root."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cli.options import NATS_HELP, ROOT_HELP
from replay.states import State, campaign_driver, campaign_state, resume_hint

RECENT_RUNS = 12


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="a campaign's items, runs, queue and spend (without ID: the campaigns)")
    p.add_argument("campaign", nargs="?", help="the campaign's id (default: list the campaigns under --root)")
    p.add_argument("--root", default="runs", help=ROOT_HELP)
    p.add_argument("--nats", help=NATS_HELP)
    p.add_argument("--json", action="store_true", help="print the campaign (or the list) as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cli.console import wide_console
    from cli.errors import error
    from events.runsource import LOG_DAMAGE, RunNotFound
    from replay.campaign import campaign_ids, load_campaign, summary

    console = wide_console()
    if not args.campaign and not args.nats and not Path(args.root).is_dir():
        return error(f"no runs root {args.root!r} (--root: the folder campaigns ran under)")
    ids = [args.campaign] if args.campaign else campaign_ids(args.root)
    if not ids:
        console.print(f"no campaigns under {args.root}")
        return 0
    views = []
    for cid in ids:
        try:
            views.append(load_campaign(cid, args.root, nats_url=args.nats))
        except (RunNotFound, *LOG_DAMAGE) as e:
            return error(str(e))
    if args.json:
        for v in views:
            print(json.dumps(summary(v, state_of(v, args.root))))
        return 0
    if args.campaign:
        print_status(console, views[0], args.root)
        return 0
    t = Table(title=f"campaigns under {args.root}")
    for col in ("campaign", "status", "runs", "items", "speedup (geomean)", "LLM spend"):
        t.add_column(col, justify="right" if col in ("runs", "items", "LLM spend") else "left")
    hints = []
    for v in views:
        state = state_of(v, args.root)
        s = summary(v, state)
        t.add_row(
            v.campaign_id or "",
            state.label,
            str(len(v.runs)),
            str(len(v.items)),
            geomeans(s),
            f"${v.spent_usd:.2f}",
        )
        hints.append(resume_hint(f"campaign {v.campaign_id}", state))
    console.print(t)
    for hint in filter(None, hints):
        console.print(hint, soft_wrap=True, highlight=False)
    return 0


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
