"""The dashboard's state: every run it knows, folded with `RunView`, and who to tell when
one changes.

Two sources, both only read:
- the event stream (JetStream), followed live by one ephemeral consumer on every subject:
  `--nats URL`, or the runs root's embedded server while one is up (looked for every few
  seconds; a run's embedded server stops when the run ends, and the next run starts one);
- exported logs `<root>/<run_id>/log.aolog`, re-read when they change.
A run on both is shown from the stream once the consumer has caught up with the stream's
history, from its file before. All of it runs on one asyncio loop, so the fold and the
view models built from it never race.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from accelopt import catalog as ev
from accelopt.logging import get_logger
from events.codec import EventDecodeError, decode
from events.logfile import LogFileError
from events.runsource import CAMPAIGNS_DIR, LOG_NAME, running_server_url
from events.subjects import ALL_EVENTS
from replay.campaign import CampaignView, is_campaign_event
from replay.dashboard.models import Memo
from replay.fold import RunView
from replay.runs import fold_file
from replay.states import Driver, State, campaign_driver, campaign_state, run_driver

if TYPE_CHECKING:
    from events.log import EventLog

log = get_logger(component="dashboard")
T = TypeVar("T")


@dataclass
class Tracked:
    """One run as the dashboard holds it."""

    run_id: str
    view: RunView
    source: str  # "stream" or "file"
    path: Path | None = None
    version: int = 0  # bumped on every applied event (or re-read file)
    memo: Memo = field(default_factory=Memo)  # the view models' parts kept between updates


@dataclass
class TrackedCampaign:
    """One campaign as the dashboard holds it (its own events; its runs are tracked as runs)."""

    campaign_id: str
    view: CampaignView
    source: str  # "stream" or "file"
    path: Path | None = None
    version: int = 0


@dataclass(eq=False)
class Watch:
    """A subscriber: woken when any of `run_ids` (None: any run) changes."""

    run_ids: frozenset[str] | None
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class Hub:
    def __init__(
        self, root: str | Path, nats_url: str | None = None, *, scan_interval_s: float = 2.0
    ) -> None:
        self.root = Path(root)
        self.nats_url = nats_url
        self.scan_interval_s = scan_interval_s
        self.files: dict[str, Tracked] = {}
        self.stream: dict[str, Tracked] = {}
        self.campaign_files: dict[str, TrackedCampaign] = {}
        self.campaign_stream: dict[str, TrackedCampaign] = {}
        self.stream_url = ""  # the server being followed ("" when none)
        self.connected = False
        self.caught_up = False
        self.version = 0  # bumped on any change
        self.warnings: dict[str, str] = {}
        self._file_sigs: dict[Path, tuple[int, int]] = {}
        self._last_seq = 0
        self._watches: set[Watch] = set()
        self._dirty: set[str] = set()
        self._flush_scheduled = False
        self._tasks: list[asyncio.Task] = []
        self._cache: dict[tuple, tuple[object, object]] = {}

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        await self.scan_files()
        self._tasks = [
            asyncio.create_task(self._scan_loop(), name="dashboard-files"),
            asyncio.create_task(self._stream_loop(), name="dashboard-stream"),
        ]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks = []

    # --- reading ----------------------------------------------------------------------------

    @property
    def streaming(self) -> bool:
        return self.connected and self.caught_up

    def get(self, run_id: str) -> Tracked | None:
        """The run from the stream while the dashboard follows one that has caught up, else
        from its exported log (a run's embedded server stops after the export); from the
        stream as last read where there is no log."""
        s = self.stream.get(run_id)
        f = self.files.get(run_id)
        if s is not None and (f is None or (self.caught_up and self.connected)):
            return s
        return f or s

    def campaign(self, campaign_id: str) -> TrackedCampaign | None:
        """As `get`, for a campaign."""
        s = self.campaign_stream.get(campaign_id)
        f = self.campaign_files.get(campaign_id)
        if s is not None and (f is None or (self.caught_up and self.connected)):
            return s
        return f or s

    def campaigns(self) -> list[TrackedCampaign]:
        ids = set(self.campaign_files) | set(self.campaign_stream)
        out = [t for t in (self.campaign(i) for i in ids) if t is not None]
        out.sort(key=lambda t: (t.view.first_ts or 0.0, t.campaign_id))
        return out

    def run_driver(self, t: Tracked) -> Driver:
        """What the run's lock under the root says (replay/states.py); nothing to ask for a run
        whose log ended."""
        if t.view.completed is not None or t.view.failed is not None:
            return Driver()
        return run_driver(self.root, t.run_id)

    def campaign_state(self, t: TrackedCampaign) -> State:
        """The campaign's state from its log and its driver's lock under the root."""
        return campaign_state(
            t.view, campaign_driver(self.root, t.campaign_id), source=t.source, root=str(self.root)
        )

    def runs(self) -> list[Tracked]:
        ids = set(self.files) | set(self.stream)
        out = [t for t in (self.get(i) for i in ids) if t is not None]
        out.sort(key=lambda t: (_started_ts(t.view), t.run_id))
        return out

    def cached(self, key: tuple, version: object, build: Callable[[], T]) -> T:
        """`build()` once per `version` of `key` (models shared by every open page)."""
        hit = self._cache.get(key)
        if hit is not None and hit[0] == version:
            return cast(T, hit[1])  # a key is always built by the same kind of `build`
        value = build()
        if len(self._cache) > 512:  # compare pages of many run sets: start afresh
            self._cache.clear()
        self._cache[key] = (version, value)
        return value

    # --- change notification ----------------------------------------------------------------

    def watch(self, run_ids: frozenset[str] | None = None) -> Watch:
        w = Watch(run_ids)
        self._watches.add(w)
        return w

    def unwatch(self, w: Watch) -> None:
        self._watches.discard(w)

    def _changed(self, run_id: str) -> None:
        self.version += 1
        self._dirty.add(run_id)
        if not self._flush_scheduled:  # one wake-up per loop turn, however many events it brought
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _changed_all(self) -> None:
        self._changed("*")

    def _flush(self) -> None:
        self._flush_scheduled = False
        dirty, self._dirty = self._dirty, set()
        every = "*" in dirty
        for w in self._watches:
            if w.run_ids is None or every or not w.run_ids.isdisjoint(dirty):
                w.changed.set()

    # --- exported logs ----------------------------------------------------------------------

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(self.scan_interval_s)
            try:
                await self.scan_files()
            except Exception as e:  # keep scanning: a bad directory must not stop the dashboard
                self.warnings["files"] = f"scanning {self.root}: {e}"

    async def scan_files(self) -> None:
        if not self.root.is_dir():
            return
        await self._scan_campaign_files()
        async for path, run_id, view in self._changed_logs(self.root, self.stream, fold_file):
            self.warnings.pop(str(path), None)
            rid = view.run_id or run_id
            old = self.files.get(rid)
            self.files[rid] = Tracked(rid, view, "file", path, (old.version + 1) if old else 1)
            self._changed(rid)

    async def _scan_campaign_files(self) -> None:
        folder = self.root / CAMPAIGNS_DIR
        async for path, cid, view in self._changed_logs(folder, self.campaign_stream, _fold_campaign):
            if view.started is None:  # not a campaign's log (an older version made one for a mistyped id)
                self.warnings[str(path)] = f"{path}: no CampaignStarted: not a campaign's log, not listed"
                continue
            self.warnings.pop(str(path), None)
            old = self.campaign_files.get(cid)
            self.campaign_files[cid] = TrackedCampaign(
                cid, view, "file", path, (old.version + 1) if old else 1
            )
            self._changed(cid)

    async def _changed_logs(
        self, folder: Path, streamed: Mapping[str, object], fold: Callable[[Path], T]
    ) -> AsyncIterator[tuple[Path, str, T]]:
        """(path, its folder's name, the log folded) of each `folder/*/` log changed since the
        last scan, but for one the stream has (more recent there; read once the stream is gone).
        One that does not fold is a warning, retried when it changes (an export in progress)."""
        loop = asyncio.get_running_loop()
        for path in sorted(folder.glob(f"*/{LOG_NAME}")):
            try:
                st = path.stat()
            except OSError:
                continue
            sig = (st.st_mtime_ns, st.st_size)
            if self._file_sigs.get(path) == sig:
                continue
            name = path.parent.name
            if name in streamed and self.caught_up and self.connected:
                continue
            self._file_sigs[path] = sig
            try:
                view = await loop.run_in_executor(None, fold, path)
            except (LogFileError, ValueError, OSError) as e:
                self.warnings[str(path)] = f"{path}: {e}"
                continue
            yield path, name, view

    # --- the stream -------------------------------------------------------------------------

    async def _stream_loop(self) -> None:
        from events.log import EventLog

        while True:
            url = self.nats_url or running_server_url(self.root)
            if not url:
                await asyncio.sleep(self.scan_interval_s)
                continue
            try:
                elog = await EventLog.connect(url, create=False, name="accelopt-dashboard")
            except ConnectionError as e:
                self.warnings["stream"] = str(e)
                await asyncio.sleep(self.scan_interval_s)
                continue
            try:
                await self._follow(elog, url)
            except Exception as e:
                self.warnings["stream"] = f"event stream at {url}: {type(e).__name__}: {e}"
                log.warning("stream follow ended", url=url, error=str(e))
            finally:
                self.connected = False
                self._changed_all()
                await elog.close()
            await asyncio.sleep(0.5)

    async def _follow(self, elog: EventLog, url: str) -> None:
        """Consume the stream until the connection is gone for good (a discovered server)."""
        import nats.js.errors

        try:
            info = await elog.stream_info()
        except nats.js.errors.NotFoundError:  # no run has written yet
            self.warnings["stream"] = f"event stream at {url}: no stream yet"
            await asyncio.sleep(self.scan_interval_s)
            return
        last = info.state.last_seq
        if last < self._last_seq:  # another stream than before: start over
            self.stream.clear()
            self._last_seq = 0
        self.stream_url = url
        self.connected = True
        self.warnings.pop("stream", None)
        if self._last_seq >= last:
            self._set_caught_up()
        self._changed_all()
        sub = await self._subscribe(elog, last)
        gone_since: float | None = None
        try:
            while True:
                await asyncio.sleep(0.5)
                up = elog.nc.is_connected
                if up != self.connected:
                    self.connected = up
                    self._changed_all()
                gone_since = None if up else (gone_since or time.monotonic())
                # an embedded server stops with its run: look for the next one (same store)
                if gone_since and not self.nats_url and time.monotonic() - gone_since > 3.0:
                    return
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def _subscribe(self, elog: EventLog, history_end: int) -> Any:
        """An ordered push consumer on every subject from the next unseen sequence: the
        history arrives as fast as the server sends it, then each new event at once."""
        from nats.js import api

        async def on_msg(msg: Any) -> None:
            seq = msg.metadata.sequence.stream
            if seq <= self._last_seq:
                return
            self._last_seq = seq
            try:
                self.apply(decode(msg.data, msg.subject, seq))
            except EventDecodeError as err:  # skip it, say so
                self.warnings["decode"] = str(err)
            if not self.caught_up and seq >= history_end:
                self._set_caught_up()

        return await elog.js.subscribe(
            ALL_EVENTS,
            ordered_consumer=True,
            cb=on_msg,
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
            config=api.ConsumerConfig(opt_start_seq=self._last_seq + 1),
            pending_msgs_limit=-1,
            pending_bytes_limit=-1,
        )

    def _set_caught_up(self) -> None:
        self.caught_up = True
        self._changed_all()

    def apply(self, e: ev.Event) -> None:
        """Fold one event from the stream into its run (or campaign)."""
        if is_campaign_event(e):
            c = self.campaign_stream.get(e.run_id)
            if c is None:
                c = self.campaign_stream[e.run_id] = TrackedCampaign(
                    e.run_id, CampaignView(e.run_id), "stream"
                )
            c.view.apply(e)
            c.version += 1
            self._changed(e.run_id)
            return
        t = self.stream.get(e.run_id)
        if t is None:
            t = self.stream[e.run_id] = Tracked(e.run_id, RunView(e.run_id), "stream")
        t.view.apply(e)
        t.version += 1
        self._changed(e.run_id)


def _fold_campaign(path: Path) -> CampaignView:
    from events.runsource import file_events

    return CampaignView.from_events(file_events(path))


def _started_ts(view: RunView) -> float:
    if view.started is not None:
        return view.started.ts
    return view.first_ts or 0.0
