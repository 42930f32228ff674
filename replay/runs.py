"""Finding runs and their events: exported logs under a runs root (`<root>/<run_id>/log.aolog`)
and runs that exist only on the event stream (running, or crashed before their export).

`list_runs` never starts a server: it reads the stream only through a URL it is given or
the root's embedded server if one is already up. `open_run` (for reports) may start the
root's embedded server to read a run that has no export yet.

A run's state comes from its log and, for a run whose log has not ended, from its driver's
lock (`replay/states.py`, the one vocabulary): a run whose driver died is `interrupted` (with
the command that resumes it), even where its events cannot be read now (the embedded server
went with it); one its driver ended on purpose is `stopped`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from events.runsource import LOG_DAMAGE, LOG_NAME, file_events, load_events, run_log_path, running_server_url
from replay.fold import RunView
from replay.runstate import locked_run_dirs, read_lock
from replay.states import Driver, State, run_driver, run_state
from replay.summary import RunSummary, summarize


def fold_file(
    path: str | Path,
    *,
    until_iteration: int | None = None,
    valid_prefix: bool = False,
    warnings: list[str] | None = None,
) -> RunView:
    return RunView.from_events(
        file_events(Path(path), valid_prefix=valid_prefix, warnings=warnings), until_iteration=until_iteration
    )


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
    source: str  # "file", "stream" or "lock" (only its driver's lock file: no readable events)
    path: Path | None = None
    driver: Driver = field(default_factory=Driver)  # its lock (replay/runstate.py)
    root: str = "runs"

    def state(self, now: float | None = None) -> State:
        s = self.summary
        return run_state(
            s.status,
            self.driver,
            source=self.source,
            last_ts=s.last_ts,
            run_id=s.run_id,
            root=self.root,
            now=now,
        )

    def status(self, now: float | None = None) -> str:
        return self.state(now).label

    @property
    def resume(self) -> str:
        """The command that goes on with it, where one does."""
        return self.state().resume


def _lock_only(run_dir: Path) -> RunSummary:
    """A run known only by its driver's lock file (its events are on a stream that is down)."""
    info = read_lock(run_dir / "run.lock")
    return RunSummary(
        run_id=run_dir.name,
        status="running",
        problems=0,
        iterations_done=0,
        iterations_planned=None,
        kernels=0,
        speedup_geomean=None,
        pct_peak_geomean=None,
        baseline_pct_peak_geomean=None,
        cost_usd=0.0,
        llm_calls=0,
        tokens=0,
        started_ts=info.started_ts,
        last_ts=None,
        events=0,
    )


def list_runs(root: str | Path, *, nats_url: str | None = None) -> tuple[list[RunListing], list[str]]:
    """Every run under `root` (exported logs) plus those only on the stream; and warnings."""
    root = Path(root)
    listings: list[RunListing] = []
    warnings: list[str] = []
    if root.is_dir():
        for log in sorted(root.glob(f"*/{LOG_NAME}")):
            try:
                view = fold_file(
                    log, valid_prefix=True, warnings=warnings
                )  # damage: the valid prefix, warned
            except (*LOG_DAMAGE, ValueError) as e:
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
    seen = {r.summary.run_id for r in listings}
    for run_dir in locked_run_dirs(root):
        if run_dir.name not in seen:
            listings.append(RunListing(_lock_only(run_dir), "lock"))
    for r in listings:
        r.root = str(root)
        r.driver = run_driver(root, r.summary.run_id)
    listings.sort(key=lambda r: (r.summary.started_ts or 0.0, r.summary.run_id))
    return listings, warnings


# --- one run ------------------------------------------------------------------------------------


def open_run(
    run: str,
    root: str | Path,
    *,
    nats_url: str | None = None,
    until_iteration: int | None = None,
    valid_prefix: bool = False,
    warnings: list[str] | None = None,
) -> tuple[RunView, Path | None]:
    """Fold a run given as a file, a run directory or a run id (under `root`, then on the
    stream: `nats_url`, the root's running server, or the root's embedded server started to
    read it). Returns the view and the exported log it came from (None: the stream). A
    damaged log raises one of LOG_DAMAGE (`valid_prefix`: its valid prefix, warned)."""
    path = run_log_path(run, root)
    if path is not None:
        return fold_file(
            path, until_iteration=until_iteration, valid_prefix=valid_prefix, warnings=warnings
        ), path
    events = load_events(
        run, root, nats_url=nats_url, prefer_stream=True, valid_prefix=valid_prefix, warnings=warnings
    )
    return RunView.from_events(events, until_iteration=until_iteration), None
