"""Where a command prints what it produces (its errors: `cli/errors.py`)."""

from __future__ import annotations

from rich.console import Console


def wide_console() -> Console:
    """A console that does not squeeze tables to 80 columns when output is not a terminal."""
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    return console
