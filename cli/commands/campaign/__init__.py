"""`accelopt campaign ...`: many runs over many problems and devices, scheduled, resumable
(docs/campaigns.md). Like `accelopt suite`, each module here is one subcommand (`run`,
`resume`, `status`, `export`), listed in `SUBCOMMANDS`."""

from __future__ import annotations

import argparse

from cli.commands.campaign import export, resume, run, status

SUBCOMMANDS = (export, resume, run, status)  # in the order `accelopt campaign --help` lists them


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "campaign", help="days of optimization over many problems and devices: run, resume, status, export"
    )
    group = p.add_subparsers(dest="campaign_command", metavar="CAMPAIGN_COMMAND")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
    for command in SUBCOMMANDS:
        command.register(group)
