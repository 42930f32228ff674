"""`accelopt campaign resume ID`: go on with a campaign after a crash or a reboot, from its log:
nothing it did is lost or done again (docs/campaigns.md)."""

from __future__ import annotations

import argparse

from cli.commands.campaign._drive import add_common_args, drive


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("resume", help="go on with a campaign after a crash, from its log")
    p.add_argument("campaign", help="the campaign's id")
    add_common_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cli.commands.run import wide_console
    from replay.campaign import campaign_dir
    from replay.runstate import driver_state

    console = wide_console()
    if driver_state(campaign_dir(args.root, args.campaign).parent, args.campaign) == "running":
        console.print(
            f"[red]campaign {args.campaign} is being driven by a live process: nothing to resume[/red]"
        )
        return 2
    console.print(f"resuming campaign [bold]{args.campaign}[/bold]")
    return drive(console, args, args.campaign)
