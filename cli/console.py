"""Where a command prints what it produces (its errors: `cli/errors.py`)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from rich.console import Console
from rich.table import Table


def wide_console() -> Console:
    """A console that does not squeeze tables to 80 columns when output is not a terminal."""
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    return console


def columns_table(title: str, columns: Sequence[str], right: Collection[str] = ()) -> Table:
    """A table of `columns`, those in `right` (the figures) right-justified."""
    t = Table(title=title)
    for col in columns:
        t.add_column(col, justify="right" if col in right else "left")
    return t
