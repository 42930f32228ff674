"""A run's log for the commands that read one: its events, the `--valid-prefix` flag, and
what a damaged log's error tells the user."""

from __future__ import annotations

import argparse

from accelopt import catalog as ev
from cli.errors import error


def add_valid_prefix_arg(p: argparse.ArgumentParser) -> None:
    """`--valid-prefix` for the commands that read a run's log."""
    p.add_argument(
        "--valid-prefix",
        action="store_true",
        help="where the log is damaged, use the events before the damage (with a warning) instead of "
        "stopping with an error",
    )


def damage_message(e: Exception) -> str:
    """A damaged log's error (it names where), and what the user can do."""
    from events.codec import EventDecodeError, StreamIntegrityError
    from events.logfile import LogIntegrityError

    if isinstance(e, LogIntegrityError | StreamIntegrityError | EventDecodeError):
        return f"{e}\nthe log is damaged there; --valid-prefix works on the events before it"
    return str(e)


def load_run_events(args: argparse.Namespace, *, prefer_stream: bool = False) -> list[ev.Event] | None:
    """The events of run `args.run` (under `args.root`, or on `args.nats`), or None after
    saying why there are none (the command then exits 2)."""
    from events.runsource import RunNotFound, load_events

    try:
        return load_events(args.run, args.root, nats_url=args.nats, prefer_stream=prefer_stream)
    except RunNotFound as e:
        error(str(e))
        return None
