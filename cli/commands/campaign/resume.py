"""`accelopt campaign resume ID`: go on with a campaign after a crash or a reboot, from its log:
nothing it did is lost or done again (docs/campaigns.md). An id (or --root) that names no
campaign is refused before anything is created."""

from __future__ import annotations

import argparse

from cli.commands.campaign._drive import add_common_args, drive


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("resume", help="go on with a campaign after a crash, from its log")
    p.add_argument("campaign", help="the campaign's id")
    add_common_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cli.console import wide_console
    from cli.errors import error
    from replay.campaign import unknown_campaign
    from replay.states import campaign_driver

    console = wide_console()
    why = unknown_campaign(args.campaign, args.root, args.nats)
    if why:
        return error(why)
    if campaign_driver(args.root, args.campaign).lock == "held":
        return error(f"campaign {args.campaign} is being driven by a live process: nothing to resume")
    console.print(f"resuming campaign [bold]{args.campaign}[/bold]")
    return drive(console, args, args.campaign)
