"""`accelopt campaign status [ID]`: a campaign in the terminal (its items, their speedups and
% of peak, why each is where it is in its queue, its runs and spend); without ID, the
campaigns under --root."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.table import Table

from cli.campaign_status import geomeans, print_queues, print_status, state_of
from cli.options import NATS_HELP, ROOT_HELP
from replay.states import resume_hint


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
        print_queues(console, args.root)
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
    print_queues(console, args.root)
    return 0
