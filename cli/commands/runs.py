"""`accelopt runs`: the runs under a root (exported logs) and those only on its event stream,
with status and headline figures."""

from __future__ import annotations

import argparse
import json
import sys
import time

from rich.table import Table

from cli.options import ROOT_HELP

SPEEDUP_CAPTION = (
    "speedup: re-measured (baseline and best timed again in interleaved rounds on fresh seeds at the "
    "end of each problem), the recorded one beside it where the two disagree beyond the noise; "
    "* recorded (the search's own profiles) for the problems the run did not re-measure"
)


RIGHT = ("problems", "iterations", "speedup (geomean)", "best %peak (geomean)", "LLM cost")
OPTIONAL = ("failed LLM calls", "forked from", "campaign item after it")  # shown when a run has one
CAMPAIGN_CAPTION = (
    "campaign item after it: a campaign's run's speedup is over the kernel it started from; its item's "
    "speedup over the suite's baseline after the run, and how it was had, is beside it"
)


def campaign_item(items: dict, run_id: str) -> dict:
    """The JSON fields of a campaign's run: its campaign, item and the item's figures after it."""
    if run_id not in items:
        return {}
    cid, item, p = items[run_id]
    return {
        "campaign": cid,
        "campaign_item": item,
        "item_speedup": p.speedup,
        "item_pct_peak": p.pct_peak,
        "item_figures": p.figures,
    }


def item_cell(items: dict, run_id: str) -> str:
    if run_id not in items:
        return ""
    _, item, p = items[run_id]
    return f"{item} {p.speedup:.2f}x {p.figures}"


def runs_table(title: str, rows: list[dict[str, str]]) -> Table:
    """The runs as a table whose cells wrap between words, never inside one: each column is at
    least as wide as its longest word (a figure, a run id, a date), so on a narrow terminal
    lines wrap instead of figures being cut or split."""
    caption = SPEEDUP_CAPTION
    if any(r.get("campaign item after it") for r in rows):
        caption += "; " + CAMPAIGN_CAPTION
    table = Table(title=title, caption=caption)
    columns = [c for c in rows[0] if c not in OPTIONAL or any(r[c] for r in rows)]
    for col in columns:
        words = [w for text in (col, *(r[col] for r in rows)) for w in text.split()]
        table.add_column(
            col,
            justify="right" if col in RIGHT else "left",
            min_width=max(map(len, words)),
            no_wrap=col in ("run", "speedup (geomean)", "forked from"),
        )
    for r in rows:
        table.add_row(*(r[c] for c in columns))
    return table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("runs", help="list runs with status and headline figures")
    p.add_argument("--root", default="runs", help=ROOT_HELP)
    p.add_argument(
        "--nats", help="NATS URL of the event log (default: the root's embedded server, if running)"
    )
    p.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cli.console import wide_console
    from replay.campaign import item_points_by_run
    from replay.render import fmt
    from replay.runs import list_runs
    from replay.states import resume_hint
    from replay.summary import failed_calls_text

    console = wide_console()
    listings, warnings = list_runs(args.root, nats_url=args.nats)
    now = time.time()
    items = item_points_by_run(args.root)
    if args.json:
        for r in listings:
            s = r.summary
            print(
                json.dumps(
                    {
                        "run_id": s.run_id,
                        "state": r.state(now).name,
                        "status": r.status(now),
                        "source": r.source,
                        "problems": s.problems,
                        "iterations_done": s.iterations_done,
                        "iterations_planned": s.iterations_planned,
                        "speedup_geomean": s.speedup_geomean,
                        "recorded_speedup_geomean": s.recorded_speedup_geomean,
                        "remeasured_problems": s.remeasured_problems,
                        "speedup_disagrees": s.speedup_disagrees,
                        "pct_peak_geomean": s.pct_peak_geomean,
                        "cost_usd": s.cost_usd,
                        "llm_calls": s.llm_calls,
                        "failed_llm_calls": s.failed_llm_calls,
                        "started_ts": s.started_ts,
                        "parent_run": s.parent_run,
                        "fork_iteration": s.fork_iteration,
                        "path": str(r.path or ""),
                        "resume": r.resume,
                        **campaign_item(items, s.run_id),
                    }
                )
            )
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)
        return 0
    rows = []
    for r in listings:
        s = r.summary
        rows.append(
            {
                "run": s.run_id,
                "status": r.status(now),
                "problems": str(s.problems),
                "iterations": s.iterations,
                "speedup (geomean)": s.speedup_text
                + ("" if s.speedup_label == fmt.REMEASURED or s.speedup_geomean is None else "*"),
                "best %peak (geomean)": fmt.pct(s.pct_peak_geomean),
                "LLM cost": fmt.usd(s.cost_usd),
                "failed LLM calls": failed_calls_text(s.failed_llm_calls),
                "started": fmt.stamp(s.started_ts),
                "forked from": f"{s.parent_run} @ {s.fork_iteration}" if s.parent_run else "",
                "campaign item after it": item_cell(items, s.run_id),
                "source": r.source,
            }
        )
    if rows:
        console.print(runs_table(f"runs in {args.root}", rows))
    else:
        console.print(f"no runs under {args.root}")
    for r in listings:
        hint = resume_hint(f"run {r.summary.run_id}", r.state(now))
        if hint:
            console.print(hint, soft_wrap=True, highlight=False)
    for w in warnings:
        console.print(f"[yellow]warning:[/yellow] {w}")
    return 0
