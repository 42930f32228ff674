"""The `accelopt` command line. Subcommands live in `cli/commands/`, one module (or package) each.

Every module there exposes `register(subparsers)`, which adds its parser(s) and sets
`func` (taking the parsed args, returning an exit code). `COMMANDS` lists them: a new
command is its module and its line there (tests/test_layers.py checks that every module of
`cli/commands/` is listed). Errors are one line on stderr (`cli/errors.py`): a command says
them with `error(...)`, or raises `CommandError`, which `main` reports.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Protocol

import accelopt  # noqa: F401  (applies the offline environment defaults first)
from accelopt.logging import configure_logging
from cli.commands import (
    ablate,
    calibrate,
    campaign,
    dashboard,
    demo,
    local_llm,
    mcp_server,
    memory,
    profile,
    remeasure,
    replay,
    report,
    resume,
    run,
    runs,
    suite,
    up,
    worker,
)


class Command(Protocol):
    """A module of `cli/commands/`."""

    def register(self, sub: argparse._SubParsersAction) -> None: ...


# in the order `accelopt --help` lists them
COMMANDS: tuple[Command, ...] = (
    ablate,
    calibrate,
    campaign,
    dashboard,
    demo,
    local_llm,
    mcp_server,
    memory,
    profile,
    remeasure,
    replay,
    report,
    resume,
    run,
    runs,
    suite,
    up,
    worker,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="accelopt",
        description="LLM roles that optimize compute kernels for Trainium, NVIDIA GPUs and CPUs.",
    )
    parser.add_argument(
        "--log-format",
        choices=["console", "json"],
        default=None,
        help="log line format on stderr: console (human lines, the default) or json (one object "
        "per line, for log collectors; also $ACCELOPT_LOG_FORMAT)",
    )
    parser.add_argument("--log-level", default=None, help="DEBUG, INFO, WARNING (default), ERROR")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # the command line talks to a person: human log lines unless JSON is asked for (the
    # library's own default, JSON off a terminal, is for processes whose stderr is collected)
    configure_logging(args.log_format or os.environ.get("ACCELOPT_LOG_FORMAT") or "console", args.log_level)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from accelopt.config import ConfigError
    from cli.errors import CommandError, error

    try:
        return int(args.func(args) or 0)
    except CommandError as e:
        return error(str(e), e.code)
    except ConfigError as e:  # a setting no command caught: the key and why, not a traceback
        return error(str(e), label="config error:")
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM once Ray runs (actors/runtime/signals.py)
        from actors.runtime.signals import Terminated

        if isinstance(e, Terminated):
            print("terminated", file=sys.stderr)
            return 143
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
