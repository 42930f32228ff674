"""`accelopt campaign export ID --out DIR`: what a user takes away from a campaign: the best
kernel of every problem in its native form, and the memory's slow->fast pairs as a Parquet
dataset with their profiles and insights (replay/campaign_export.py)."""

from __future__ import annotations

import argparse

from cli.options import NATS_HELP, ROOT_HELP


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export", help="a campaign's best kernels (native form) and its memory as a Parquet dataset"
    )
    p.add_argument("campaign", help="the campaign's id")
    p.add_argument("--out", required=True, help="the folder to write (created; files in it are replaced)")
    p.add_argument("--root", default="runs", help=ROOT_HELP)
    p.add_argument("--nats", help=NATS_HELP)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.markup import escape

    from cli.console import wide_console
    from cli.errors import error
    from events.runsource import LOG_DAMAGE, RunNotFound
    from replay.campaign import load_campaign
    from replay.campaign_export import export_campaign

    console = wide_console()
    try:
        view = load_campaign(args.campaign, args.root, nats_url=args.nats)
    except (RunNotFound, *LOG_DAMAGE) as e:
        return error(str(e))
    manifest = export_campaign(view, args.root, Path(args.out), nats_url=args.nats)
    console.print(
        f"exported {len(manifest['kernels'])} best kernel(s) and {manifest['pairs']['rows']} memory pair(s) "
        f"to {args.out} (kernels/, {manifest['pairs']['file']}, manifest.json)",
        highlight=False,
    )
    for w in manifest["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}", soft_wrap=True)
    return 0
