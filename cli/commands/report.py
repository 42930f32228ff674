"""`accelopt report RUN [RUN2 ...]`: a self-contained HTML report (plots, tables, lineage
with diffs) built from the runs' event logs; two or more runs are shown side by side."""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

from cli.options import NATS_HELP, ROOT_HELP
from cli.run_log import add_valid_prefix_arg, damage_message


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report", help="write a self-contained HTML report of one run, or several side by side"
    )
    p.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="run id (under --root, then on the event stream), run directory or exported .aolog file; "
        "or a campaign's id (its report: items, queues, spend, runs)",
    )
    p.add_argument(
        "--out",
        help="HTML file to write (default: <root>/<run>/report.html for one exported run, "
        "else report-<runs>.html here)",
    )
    p.add_argument("--root", default="runs", help=ROOT_HELP)
    p.add_argument("--nats", help=NATS_HELP)
    p.add_argument("--iteration", type=int, help="report the state at the end of this iteration")
    p.add_argument("--title", help="page title")
    add_valid_prefix_arg(p)
    p.set_defaults(func=run)


def default_out(run_args: list[str], sources: list[Path | None], ids: list[str]) -> Path:
    if len(run_args) == 1 and sources[0] is not None:
        src = sources[0]
        return src.with_name("report.html") if src.name == "log.aolog" else src.with_suffix(".html")
    name = "-vs-".join(re.sub(r"[^A-Za-z0-9_.-]", "_", i) for i in ids)
    return Path(f"report-{name[:150]}.html")


def run(args: argparse.Namespace) -> int:
    from cli.console import wide_console
    from cli.errors import error
    from events.runsource import LOG_DAMAGE, RunNotFound
    from replay.render.report import build_report
    from replay.runs import open_run

    console = wide_console()
    t0 = time.perf_counter()
    views, sources = [], []
    for r in args.runs:
        warnings: list[str] = []
        try:
            view, source = open_run(
                r,
                args.root,
                nats_url=args.nats,
                until_iteration=args.iteration,
                valid_prefix=args.valid_prefix,
                warnings=warnings,
            )
        except LOG_DAMAGE as e:
            return error(damage_message(e))
        except (RunNotFound, ConnectionError) as e:
            return error(str(e))
        for w in warnings:
            console.print(f"[yellow]warning:[/yellow] {w}", soft_wrap=True)
        views.append(view)
        sources.append(source)
    if len(views) == 1 and views[0].started is None:  # not a run: a campaign?
        campaign = _campaign(args)
        if campaign is not None:
            from cli.campaign_status import state_of
            from replay.render.campaign import build_campaign_report

            html = build_campaign_report(campaign, state_of(campaign, args.root), title=args.title)
            out = (
                Path(args.out)
                if args.out
                else default_out(args.runs, sources, [campaign.campaign_id or "campaign"])
            )
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(html, encoding="utf-8")
            console.print(
                f"report of campaign {campaign.campaign_id} ({len(campaign.runs)} runs, {campaign.events:,} events) "
                f"written to {out} ({len(html) / 1024:.0f} KiB, {time.perf_counter() - t0:.2f} s)"
            )
            return 0
    html = build_report(views, title=args.title, states=_states(views, sources, args.root))
    out = Path(args.out) if args.out else default_out(args.runs, sources, [v.run_id or "run" for v in views])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    events = sum(v.events for v in views)
    console.print(
        f"report of {len(views)} run(s), {events:,} events, written to {out} "
        f"({len(html) / 1024:.0f} KiB, {time.perf_counter() - t0:.2f} s)"
    )
    return 0


def _states(views: list, sources: list[Path | None], root: str) -> list:
    """Each run's state, as `accelopt runs` says it (replay/states.py)."""
    from replay.runs import RunListing
    from replay.states import run_driver
    from replay.summary import summarize

    return [
        RunListing(
            summarize(v), "file" if src else "stream", driver=run_driver(root, v.run_id or ""), root=root
        ).state()
        for v, src in zip(views, sources, strict=True)
    ]


def _campaign(args: argparse.Namespace):
    """The campaign `args.runs[0]` names, or None where it is not one."""
    from events.runsource import RunNotFound
    from replay.campaign import load_campaign

    try:
        return load_campaign(args.runs[0], args.root, nats_url=args.nats)
    except RunNotFound:
        return None
