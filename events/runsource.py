"""Where a run's events come from, in one place: the log endpoint (a given NATS URL, the runs
root's embedded server if it is up, or one started for it), an exported log file, or the
stream. Session, replay, report, dashboard and the CLI all find runs through here.

The embedded server of a root keeps its URL and pid in `<root>/.nats/server.json`;
`running_server_url` says whether it is up without ever starting one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from accelopt import catalog as ev
from events.codec import decode
from events.logfile import read_records
from events.server import NatsServer, check_url, port_open

LOG_NAME = "log.aolog"


class RunNotFound(LookupError):
    """No exported log and no events on the stream for the run asked for."""


# --- the log endpoint -----------------------------------------------------------------------

def _server_info(root: str | Path) -> Path:
    return Path(root) / ".nats" / "server.json"


def running_server_url(root: str | Path) -> str | None:
    """The URL of the root's embedded NATS server if it is up (never starts one)."""
    with contextlib.suppress(Exception):
        data = json.loads(_server_info(root).read_text())
        host, port = data["url"].removeprefix("nats://").split(":")
        os.kill(int(data["pid"]), 0)
        if port_open(host, int(port)):
            return str(data["url"])
    return None


@dataclass
class LogEndpoint:
    url: str
    server: NatsServer | None = None  # set when this endpoint started the server (and stops it)

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            (self.server.store_dir / "server.json").unlink(missing_ok=True)


def open_log_endpoint(nats_url: str | None, root: str | Path) -> LogEndpoint:
    """The given URL (checked), the root's running embedded server, or a new one."""
    if nats_url:
        check_url(nats_url)
        return LogEndpoint(nats_url)
    url = running_server_url(root)
    if url is not None:
        return LogEndpoint(url)
    server = NatsServer(Path(root) / ".nats")
    server.start()
    _server_info(root).write_text(json.dumps({"url": server.url, "pid": server.proc.pid if server.proc else 0}))
    return LogEndpoint(server.url, server)


# --- one run ----------------------------------------------------------------------------------

def run_log_path(run: str, root: str | Path) -> Path | None:
    """`run` as an exported log file, a run directory, or a run id under `root`."""
    p = Path(run)
    if p.is_file():
        return p
    if p.is_dir() and (p / LOG_NAME).is_file():
        return p / LOG_NAME
    candidate = Path(root) / run / LOG_NAME
    return candidate if candidate.is_file() else None


async def _stream_each(url: str, run_id: str, on_event: Callable[[ev.Event], object]) -> int:
    """Hand the run's events on the stream at `url` to `on_event`, one at a time; how many
    (0 if there is no stream yet)."""
    import nats.js.errors

    from events.log import EventLog

    elog = await EventLog.connect(url, create=False, name="accelopt-reader")
    n = 0
    try:
        async for _seq, event in elog.iter_history(run_id):
            on_event(event)
            n += 1
    except nats.js.errors.NotFoundError:
        pass
    finally:
        await elog.close()
    return n


def _file_each(path: Path, on_event: Callable[[ev.Event], object]) -> int:
    n = 0
    for n, (subject, data) in enumerate(read_records(path)[1], 1):
        on_event(decode(data, subject, n))
    return n


def fold_events(run: str, root: str | Path, on_event: Callable[[ev.Event], object], *, nats_url: str | None = None,
                prefer_stream: bool = False, start_server: bool = True) -> int:
    """Hand the run's events to `on_event` one at a time, holding none of them (a run of a
    million events is gigabytes as a list); returns how many. They come from its exported
    file, else (or with `prefer_stream`, first) from the stream (the given NATS URL, the
    root's running server, or, with `start_server` and a stream on disk, the root's embedded
    server started to read it). Raises RunNotFound."""
    path = run_log_path(run, root)
    if path is not None and not prefer_stream:
        return _file_each(path, on_event)
    run_id = Path(run).name
    if nats_url or running_server_url(root) or (start_server and (Path(root) / ".nats" / "jetstream").is_dir()):
        endpoint = open_log_endpoint(nats_url, root)
        try:
            n = asyncio.run(_stream_each(endpoint.url, run_id, on_event))
        finally:
            endpoint.close()
        if n:
            return n
    if path is not None:
        return _file_each(path, on_event)
    raise RunNotFound(f"run {run!r}: not a log file, no {LOG_NAME} under {Path(root) / run_id}, "
                      "and no events on the stream")


def load_events(run: str, root: str | Path, *, nats_url: str | None = None, prefer_stream: bool = False,
                start_server: bool = True) -> list[ev.Event]:
    """The run's events as a list (`fold_events` without the folding). Raises RunNotFound."""
    events: list[ev.Event] = []
    fold_events(run, root, events.append, nats_url=nats_url, prefer_stream=prefer_stream, start_server=start_server)
    return events


def ensure_on_stream(events: list[ev.Event], root: str | Path, *, nats_url: str | None = None) -> None:
    """Make sure a run read from a file is also on the log (import it if it is not)."""
    if not events:
        return
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
