"""Where a run's events come from: an exported log file, or the event stream."""

from __future__ import annotations

import asyncio
from pathlib import Path

from events import catalog as ev
from events.logfile import read_events


class RunNotFound(LookupError):
    pass


def run_log_path(run: str, root: str | Path) -> Path | None:
    """`run` as a path to an exported log, or `<root>/<run>/log.aolog` if it exists."""
    p = Path(run)
    if p.suffix == ".aolog" and p.is_file():
        return p
    candidate = Path(root) / run / "log.aolog"
    return candidate if candidate.is_file() else None


async def stream_events(url: str, run_id: str) -> list[ev.Event]:
    import nats.js.errors

    from events.log import EventLog

    elog = await EventLog.connect(url, create=False)
    try:
        return await elog.history(run_id)
    except nats.js.errors.NotFoundError:  # no stream yet: no runs
        return []
    finally:
        await elog.close()


def load_events(run: str, root: str | Path, *, nats_url: str | None = None, prefer_stream: bool = False,
                ) -> list[ev.Event]:
    """The run's events: from its exported file, else (or with prefer_stream, first) from the
    log (the given NATS URL, or the root's embedded server, started if needed)."""
    path = run_log_path(run, root)
    if path is not None and not prefer_stream:
        return read_events(path)
    from actors.session import open_log_endpoint

    endpoint = open_log_endpoint(nats_url, root)
    try:
        events = asyncio.run(stream_events(endpoint.url, Path(run).name))
    finally:
        endpoint.close()
    if events:
        return events
    if path is not None:
        return read_events(path)
    raise RunNotFound(f"run {run!r}: no exported log under {root} and no events on the stream")


def ensure_on_stream(events: list[ev.Event], root: str | Path, *, nats_url: str | None = None) -> None:
    """Make sure a run read from a file is also on the log (import it if it is not)."""
    if not events:
        return
    from actors.session import open_log_endpoint

    endpoint = open_log_endpoint(nats_url, root)
    try:
        asyncio.run(_ensure(endpoint.url, events))
    finally:
        endpoint.close()


async def _ensure(url: str, events: list[ev.Event]) -> None:
    from events.log import EventLog

    elog = await EventLog.connect(url)
    try:
        if await elog.last_event(events[0].run_id, "run.started") is None:
            await elog.publish_many(events)
    finally:
        await elog.close()
