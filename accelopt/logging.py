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
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(level_no, logging.WARNING), stream=sys.stderr)
    _configured = True


def get_logger(**context: Any) -> structlog.typing.FilteringBoundLogger:
    if not _configured:
        configure_logging()
    return structlog.get_logger().bind(**context)


def bind_run(run_id: str, **context: Any) -> None:
    """Bind run_id (and more) to every log line of this task/thread."""
    structlog.contextvars.bind_contextvars(run_id=run_id, **context)
