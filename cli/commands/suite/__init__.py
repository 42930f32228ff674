"""`accelopt suite ...`: the suite command group.

Every module in this package (`cli/commands/suite/`) exposes `register(subparsers)`, adds
its own parser and sets `func(args) -> int`, exactly like the top-level commands; `list` is
one of them (`listing.py`). `SUBCOMMANDS` lists them: a new one is its module and its entry
there.
"""

from __future__ import annotations

import argparse

from cli.commands.suite import export_flashinfer, import_flashinfer, import_nkibench, listing

# in the order `accelopt suite --help` lists them
SUBCOMMANDS = (export_flashinfer, import_flashinfer, import_nkibench, listing)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("suite", help="problem suites: list, import, ...")
    group = p.add_subparsers(dest="suite_command", metavar="SUITE_COMMAND")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
    for command in SUBCOMMANDS:
        command.register(group)
