"""Where a run's events come from, in one place: the log endpoint (a given NATS URL, the runs
root's embedded server if it is up, or one started for it), an exported log file, or the
stream. Session, replay, report, dashboard and the CLI all find runs through here.

The embedded server of a root keeps its URL, pid and owner (the process that started it)
in `<root>/.nats/server.json`; `running_server_url` says whether it is up without ever
starting one, and stops a server whose owner is gone (a `kill -9`ed run's), so no embedded
server outlives its run.

A damaged log (a file whose hash chain breaks, a stream message whose checksum does not
match) is an error naming where (`LOG_DAMAGE`); with `valid_prefix` the readers here stop
there instead and append a warning to the `warnings` list they are given.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from accelopt import catalog as ev
from accelopt.folders import private_folder
from accelopt.procfs import proc_stat
from events.codec import EventDecodeError, StreamIntegrityError, decode
from events.logfile import LogFileError, LogReader
from events.server import NatsServer, check_url, port_open

LOG_NAME = "log.aolog"
LOG_DAMAGE = (LogFileError, StreamIntegrityError, EventDecodeError)  # a log that is not what was written


class RunNotFound(LookupError):
    """No exported log and no events on the stream for the run asked for."""


# --- the log endpoint -----------------------------------------------------------------------


def _server_info(root: str | Path) -> Path:
    return Path(root) / ".nats" / "server.json"


def process_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, exited but not reaped yet, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def running_server_url(root: str | Path) -> str | None:
    """The URL of the root's embedded NATS server if it is up (never starts one). A server
    whose owner (the command that started it) is gone is an orphan of a killed run: it is
    stopped here, and the caller starts its own."""
    with contextlib.suppress(Exception):
        info = _server_info(root)
        data = json.loads(info.read_text())
        host, port = data["url"].removeprefix("nats://").split(":")
        pid, owner = int(data["pid"]), int(data.get("owner", 0))
        if not process_alive(pid):
            return None
        if owner and not process_alive(owner):
            stop_orphan_server(pid)
            info.unlink(missing_ok=True)
            return None
        if port_open(host, int(port)):
            return str(data["url"])
    return None


def stop_orphan_server(pid: int, timeout_s: float = 10.0) -> None:
    """SIGTERM (then SIGKILL) an embedded nats-server whose owner died; only if it is one."""
    import signal
    import time

    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return
    if not cmd.endswith(b"nats-server"):
        return  # the pid was reused by something else
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and process_alive(pid):
            time.sleep(0.05)
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)


def _zombie(pid: int) -> bool:
    st = proc_stat(pid)
    return st is None or st.state in ("Z", "X")


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
    server = NatsServer(private_folder(root) / ".nats", die_with_owner=True)
    server.start()
    _server_info(root).write_text(
        json.dumps({"url": server.url, "pid": server.proc.pid if server.proc else 0, "owner": os.getpid()})
    )
    return LogEndpoint(server.url, server)


# --- one run ----------------------------------------------------------------------------------


CAMPAIGNS_DIR = "campaigns"  # <root>/campaigns/<id>/log.aolog: a campaign's own log (docs/campaigns.md)


def run_log_path(run: str, root: str | Path) -> Path | None:
    """`run` as an exported log file, a run directory, or a run (or campaign) id under `root`."""
    p = Path(run)
    if p.is_file():
        return p
    if p.is_dir() and (p / LOG_NAME).is_file():
        return p / LOG_NAME
    for candidate in (Path(root) / run / LOG_NAME, Path(root) / CAMPAIGNS_DIR / run / LOG_NAME):
        if candidate.is_file():
            return candidate
    return None


async def _stream_each(
    url: str,
    run_id: str,
    on_event: Callable[[ev.Event], object],
    valid_prefix: bool,
    warnings: list[str] | None,
) -> int:
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
    except (StreamIntegrityError, EventDecodeError) as e:
        if not valid_prefix:
            raise
        _warn(warnings, f"{e}; using the {n} events before it (the valid prefix): what came after is lost")
    finally:
        await elog.close()
    return n


def _warn(warnings: list[str] | None, text: str) -> None:
    if warnings is not None:
        warnings.append(text)


def file_events(
    path: Path, *, valid_prefix: bool = False, warnings: list[str] | None = None
) -> Iterator[ev.Event]:
    """An exported log's events, decoded one at a time. Damage raises a LogFileError naming
    where (`valid_prefix`: they stop there, with a warning)."""
    reader = LogReader(path, valid_prefix=valid_prefix)
    n = 0
    for n, (subject, data) in enumerate(reader.records(), 1):
        try:
            event = decode(data, subject, n)
        except EventDecodeError as e:
            if not valid_prefix:
                raise LogFileError(f"{path}: record {n}: {e}") from e
            _warn(
                warnings, f"{path}: record {n}: {e}; using the {n - 1} records before it (the valid prefix)"
            )
            return
        yield event
    text = reader.warning()
    if text:
        _warn(warnings, text)


def file_each(
    path: Path,
    on_event: Callable[[ev.Event], object],
    *,
    valid_prefix: bool = False,
    warnings: list[str] | None = None,
) -> int:
    """Hand an exported log's events to `on_event` (see `file_events`); how many."""
    n = 0
    for event in file_events(path, valid_prefix=valid_prefix, warnings=warnings):
        on_event(event)
        n += 1
    return n


def fold_events(
    run: str,
    root: str | Path,
    on_event: Callable[[ev.Event], object],
    *,
    nats_url: str | None = None,
    prefer_stream: bool = False,
    start_server: bool = True,
    valid_prefix: bool = False,
    warnings: list[str] | None = None,
) -> int:
    """Hand the run's events to `on_event` one at a time, holding none of them (a run of a
    million events is gigabytes as a list); returns how many. They come from its exported
    file, else (or with `prefer_stream`, first) from the stream (the given NATS URL, the
    root's running server, or, with `start_server` and a stream on disk, the root's embedded
    server started to read it, for a run or campaign with a folder under the root: one the
    root does not know starts nothing and creates nothing). Raises RunNotFound, or one of
    `LOG_DAMAGE` where the log is damaged (`valid_prefix`: the events before the damage, and
    a warning in `warnings`)."""
    path = run_log_path(run, root)
    if path is not None and not prefer_stream:
        return file_each(path, on_event, valid_prefix=valid_prefix, warnings=warnings)
    run_id = Path(run).name
    if (
        nats_url
        or running_server_url(root)
        or (start_server and (Path(root) / ".nats" / "jetstream").is_dir() and known_here(run_id, root))
    ):
        endpoint = open_log_endpoint(nats_url, root)
        try:
            n = asyncio.run(_stream_each(endpoint.url, run_id, on_event, valid_prefix, warnings))
        finally:
            endpoint.close()
        if n:
            return n
    if path is not None:
        return file_each(path, on_event, valid_prefix=valid_prefix, warnings=warnings)
    nowhere = "" if Path(root).is_dir() else f" (there is no folder {root}: --root names the runs folder)"
    raise RunNotFound(
        f"run {run!r}: not a log file, no {LOG_NAME} under {Path(root) / run_id}, and no events on the "
        f"stream{nowhere}"
    )


def known_here(run_id: str, root: str | Path) -> bool:
    """Whether the root has a folder for `run_id`, a run's or a campaign's (its driver makes it
    before its first event, and it stays)."""
    from events.subjects import check_run_id

    try:
        check_run_id(run_id)
    except ValueError:
        return False
    return (Path(root) / run_id).is_dir() or (Path(root) / CAMPAIGNS_DIR / run_id).is_dir()


def load_events(
    run: str,
    root: str | Path,
    *,
    nats_url: str | None = None,
    prefer_stream: bool = False,
    start_server: bool = True,
    valid_prefix: bool = False,
    warnings: list[str] | None = None,
) -> list[ev.Event]:
    """The run's events as a list (`fold_events` without the folding). Raises RunNotFound."""
    events: list[ev.Event] = []
    fold_events(
        run,
        root,
        events.append,
        nats_url=nats_url,
        prefer_stream=prefer_stream,
        start_server=start_server,
        valid_prefix=valid_prefix,
        warnings=warnings,
    )
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
