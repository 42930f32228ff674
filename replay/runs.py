"""Finding runs and their events: exported logs under a runs root (`<root>/<run_id>/log.aolog`)
and runs that exist only on the event stream (running, or crashed before their export).

`list_runs` never starts a server: it reads the stream only through a URL it is given or
the root's embedded server if one is already up. `open_run` (for reports) may start the
root's embedded server to read a run that has no export yet.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from accelopt import catalog as ev
from events.codec import decode
from events.logfile import LogFileError, read_records
from events.runsource import LOG_NAME, load_events, run_log_path, running_server_url
from replay.fold import RunView
from replay.summary import RunSummary, summarize

STALLED_AFTER_S = 15 * 60  # a run with no terminal event and no news for this long is shown as stalled


def iter_file_events(path: str | Path) -> Iterator[ev.Event]:
    """The events of an exported log, decoded one at a time."""
    _, records = read_records(path)
    for i, (subject, data) in enumerate(records):
        yield decode(data, subject, i + 1)


def fold_file(path: str | Path, *, until_iteration: int | None = None) -> RunView:
    return RunView.from_events(iter_file_events(path), until_iteration=until_iteration)


# --- the stream -------------------------------------------------------------------------------

async def _stream_runs(url: str, skip: set[str]) -> list[tuple[str, RunView]]:
    import nats.js.errors

    from events.log import EventLog

    elog = await EventLog.connect(url, create=False, name="accelopt-runs")
    try:
        try:
            ids = await elog.run_ids()
        except nats.js.errors.NotFoundError:
            return []
        out = []
        for run_id in dict.fromkeys(ids):
            if run_id in skip:
                continue
            view = RunView(run_id)
            async for _, e in elog.iter_history(run_id):
                view.apply(e)
            out.append((run_id, view))
        return out
    finally:
        await elog.close()


# --- listing ----------------------------------------------------------------------------------

@dataclass
class RunListing:
    summary: RunSummary
    source: str  # "file" or "stream"
    path: Path | None = None

    def status(self, now: float | None = None) -> str:
        s = self.summary
        if s.status == "running" and self.source == "file":
            return "incomplete"  # exported before it ended (timed out, or a snapshot)
        if s.status == "running" and s.last_ts and (now or time.time()) - s.last_ts > STALLED_AFTER_S:
            from replay.render.fmt import ago

            return f"stalled (last event {ago(s.last_ts, now)})"
        return s.status


def list_runs(root: str | Path, *, nats_url: str | None = None) -> tuple[list[RunListing], list[str]]:
    """Every run under `root` (exported logs) plus those only on the stream; and warnings."""
    root = Path(root)
    listings: list[RunListing] = []
    warnings: list[str] = []
    if root.is_dir():
        for log in sorted(root.glob(f"*/{LOG_NAME}")):
            try:
                view = fold_file(log)
            except (LogFileError, ValueError) as e:
                warnings.append(f"{log}: {e}")
                continue
            listings.append(RunListing(summarize(view), "file", log))
    url = nats_url or running_server_url(root)
    if url:
        try:
            seen = {r.summary.run_id for r in listings}
            for _, view in asyncio.run(_stream_runs(url, seen)):
                listings.append(RunListing(summarize(view), "stream"))
        except Exception as e:  # a listing still shows the files when the server is unreachable
            warnings.append(f"event stream at {url}: {e}")
    listings.sort(key=lambda r: (r.summary.started_ts or 0.0, r.summary.run_id))
    return listings, warnings


# --- one run ------------------------------------------------------------------------------------

def open_run(run: str, root: str | Path, *, nats_url: str | None = None,
             until_iteration: int | None = None) -> tuple[RunView, Path | None]:
    """Fold a run given as a file, a run directory or a run id (under `root`, then on the
    stream: `nats_url`, the root's running server, or the root's embedded server started to
    read it). Returns the view and the exported log it came from (None: the stream)."""
    path = run_log_path(run, root)
    if path is not None:
        return fold_file(path, until_iteration=until_iteration), path
    events = load_events(run, root, nats_url=nats_url, prefer_stream=True)
    return RunView.from_events(events, until_iteration=until_iteration), None
