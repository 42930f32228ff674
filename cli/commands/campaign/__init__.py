"""`accelopt campaign ...`: many runs over many problems and devices, scheduled, resumable
(docs/campaigns.md). Like `accelopt suite`, each module here is one subcommand (`run`,
`resume`, `status`, `export`), found by name."""

from __future__ import annotations

import argparse
import importlib
import pkgutil


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "campaign", help="days of optimization over many problems and devices: run, resume, status, export"
    )
    group = p.add_subparsers(dest="campaign_command", metavar="CAMPAIGN_COMMAND")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}").register(group)
