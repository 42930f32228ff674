"""structlog, configured once: JSON lines or a pretty console, with context bound per run."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import structlog

_configured = False


def configure_logging(fmt: str | None = None, level: str | None = None) -> None:
    """Configure structlog and stdlib logging once per process.

    fmt: "json" (one JSON object per line) or "console"; default from ACCELOPT_LOG_FORMAT,
    else console on a TTY and JSON otherwise. Logs go to stderr so stdout stays for results.
    """
    global _configured
    fmt = fmt or os.environ.get("ACCELOPT_LOG_FORMAT") or ("console" if sys.stderr.isatty() else "json")
    level_name = (level or os.environ.get("ACCELOPT_LOG_LEVEL") or "WARNING").upper()
    level_no = getattr(logging, level_name, logging.WARNING)
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if fmt == "json":
        processors += [structlog.processors.dict_tracebacks, structlog.processors.JSONRenderer()]
    else:
        processors += [structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level_no),
        logger_factory=_StderrLogger,
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(level_no, logging.WARNING), stream=sys.stderr)
    _configured = True


class _StderrLogger:
    """Writes each line to the stderr of the moment (not the one at configure time, which a
    test harness or a daemonizing parent may have closed since), and never raises: a log
    line that cannot be written must not fail the work it describes."""

    def __init__(self, *_args: Any) -> None:
        pass

    def msg(self, message: str) -> None:
        try:
            print(message, file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass

    log = debug = info = warn = warning = error = critical = exception = fatal = msg


def get_logger(**context: Any) -> structlog.typing.FilteringBoundLogger:
    if not _configured:
        configure_logging()
    return structlog.get_logger().bind(**context)


def bind_run(run_id: str, **context: Any) -> None:
    """Bind run_id (and more) to every log line of this task/thread."""
    structlog.contextvars.bind_contextvars(run_id=run_id, **context)
