"""`accelopt suite ...`: the suite command group.

Sub-subcommands are discovered: every module in this package (`cli/commands/suite/`)
exposes `register(subparsers)`, adds its own parser and sets `func(args) -> int`, exactly
like the top-level commands; `list` is one of them. Adding `suite import-nkibench` is a new
module here, with no edit to this file.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("suite", help="problem suites: list, import, ...")
    group = p.add_subparsers(dest="suite_command", metavar="SUITE_COMMAND")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}").register(group)
