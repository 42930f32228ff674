"""How the command line says that something went wrong: one line on stderr (red on a
terminal), never on stdout, which carries what a command produces (tables, JSON, reports).
Every command reports its errors through `error`; `CommandError` is the same from code that
cannot return an exit code, and `cli.main` turns it (and a ConfigError nobody caught) into
that line and the exit status."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

USAGE = 2  # the input cannot work: a bad argument, file, key or id; nothing was started
FAILED = 1  # it was tried and did not work


class CommandError(Exception):
    """An error that ends the command: `message` on stderr, exit status `code`."""

    def __init__(self, message: str, code: int = USAGE) -> None:
        super().__init__(message)
        self.code = code


def error(message: str, code: int = USAGE, *, label: str = "") -> int:
    """Say `message` on stderr as one line (its line breaks joined with "; "), `label` in red
    before it; returns `code` (`return error(...)`)."""
    text = "; ".join(line.strip() for line in str(message).splitlines() if line.strip())
    head = f"[red]{escape(label)}[/red] " if label else ""
    body = escape(text) if label else f"[red]{escape(text)}[/red]"
    _stderr().print(head + body, soft_wrap=True, highlight=False)
    return code


def _stderr() -> Console:
    # made per call: it writes to sys.stderr as it is then (a test's capture, a redirect)
    return Console(stderr=True)
