"""A campaign's runs carried out (see `actors/runtime/campaign.py`, the driver that schedules
them): each scheduled run driven on a thread of the campaign's process to its end (started,
resumed from its log, or only read where it ended while no driver ran), what it came to read
from its own log, and its item measured at its end (`actors/runtime/item_measure.py`). Each end
comes back on `CampaignRuns.ended`: the driver's loop turns it into the campaign's events (the
scheduler core is only read and written on the driver's thread).
"""

from __future__ import annotations

import asyncio
import dataclasses
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from accelopt import catalog as ev
from accelopt.config import RunConfig, recorded_config
from accelopt.logging import get_logger
from accelopt.problem import Problem
from events.log import EventLog
from events.runsource import load_events
from replay.campaign import run_outcome
from replay.fold import RunView
from replay.runstate import RunBusy

log = get_logger(component="campaign")

Setup = tuple[RunConfig, Problem] | Exception  # a run's config and problem, or why it has none


async def run_state(url: str, run_id: str) -> tuple[ev.RunStarted | None, bool]:
    """(its RunStarted, whether it has ended) of a run on the log."""
    elog = await EventLog.connect(url, name="accelopt-campaign")
    try:
        started = await elog.last_event(run_id, "run.started")
        ended = any(
            [
                await elog.last_event(run_id, ev.RunCompleted.subject),
                await elog.last_event(run_id, ev.RunFailed.subject),
            ]
        )
        return started if isinstance(started, ev.RunStarted) else None, ended
    finally:
        await elog.close()


@dataclass
class RunEnd:
    run_id: str
    timed_out: bool = False
    error: str | None = None
    outcome: dict | None = None  # the run's CampaignRunFinished fields, read on its thread
    measured: dict | None = None  # its item's CampaignItemMeasured fields (None: not measured)
    remeasured: ev.ProblemRemeasured | None = None  # the run's own end-of-problem re-measure


class CampaignRuns:
    """The runs of campaign `campaign_id` under way, one thread each, on the log at `url` (set
    by the driver once it opened it); `note(text)` is told what happens to them."""

    def __init__(
        self, campaign_id: str, root: str, *, log_level: str | None, note: Callable[[str], None]
    ) -> None:
        self.campaign_id = campaign_id
        self.root = root
        self.log_level = log_level
        self.note = note
        self.url = ""
        self.ended: queue.Queue[RunEnd] = queue.Queue()
        self.threads: dict[str, threading.Thread] = {}

    def start(
        self,
        s: ev.CampaignRunScheduled,
        origin: Problem,
        setup: Setup,
        start: str,
        last: ev.CampaignItemMeasured | None,
    ) -> None:
        """Run `s` on its own thread: `origin` its item's problem as the suite has it; `setup`
        its config and problem (made on the driver's thread); `start` the source it starts from;
        `last` its item's last measurement. The thread drives it to its end, then reads what it
        came to and measures its item."""
        from actors.runtime.item_measure import measure_after_run

        def run() -> None:
            ended = self._drive(s, origin, setup)
            try:
                ended.outcome = self.outcome_fields(s, ended)
                ended.measured = measure_after_run(
                    origin,
                    scheduled=s,
                    outcome=ended.outcome,
                    remeasured=ended.remeasured,
                    start=start,
                    cfg=setup[0] if not isinstance(setup, Exception) else RunConfig(),
                    last=last,
                    note=self.note,
                )
            except Exception as e:  # the loop reads it again and publishes the run's end unmeasured
                log.warning("campaign run's outcome or measurement failed", run_id=s.run, error=repr(e))
            self.ended.put(ended)

        t = threading.Thread(target=run, name=f"campaign-run-{s.index}", daemon=True)
        self.threads[s.run] = t
        t.start()

    def done(self, run_id: str) -> None:
        self.threads.pop(run_id, None)

    def _drive(self, s: ev.CampaignRunScheduled, origin: Problem, setup: Setup) -> RunEnd:
        """Start run `s`, resume it, or only note that it ended."""
        from actors.runtime.session import SessionOptions, run_session

        try:
            started, ended = asyncio.run(run_state(self.url, s.run))
            if ended:
                return RunEnd(s.run)
            timeout = max(1.0, s.deadline_ts - time.time()) if s.deadline_ts is not None else None
            common = SessionOptions(
                nats_url=self.url,
                run_id=s.run,
                start_workers=False,
                coordinator="local",
                timeout_s=timeout,
                log_level=self.log_level,
                on_warning=lambda text: self.note(f"{s.run}: {text}"),
                campaign=self.campaign_id,
                # the suite's own baseline, timed in the run's end-of-problem re-measure: its
                # item's measurement (actors/runtime/item_measure.py `from_run_remeasure`)
                origins={origin.name: origin.baseline.entry_file().content},
            )
            if started is not None:
                cfg = recorded_config(started.config)
                resumed = dataclasses.replace(
                    common,
                    resume=True,
                    started_event=started,
                    devices=sorted({t.device for t in started.targets}),
                )
                outcome = run_session(cfg, [t.problem for t in started.targets], resumed)
            else:
                if isinstance(setup, Exception):
                    raise setup
                cfg, problem = setup
                outcome = run_session(cfg, [problem], common)
            return RunEnd(s.run, timed_out=outcome.timed_out)
        except RunBusy as e:  # another process drives it (a second driver of this campaign)
            return RunEnd(s.run, error=str(e))
        except Exception as e:
            log.warning("campaign run failed", run_id=s.run, error=repr(e))
            return RunEnd(s.run, error=f"{type(e).__name__}: {e}")

    def outcome_fields(self, s: ev.CampaignRunScheduled, ended: RunEnd) -> dict:
        """The run's outcome, read from its own log (its export, else the stream); its
        end-of-problem re-measure on the item's device goes into `ended.remeasured`."""
        fields: dict = {}
        try:
            events = load_events(ended.run_id, self.root, nats_url=self.url, prefer_stream=True)
            view = RunView.from_events(events)
            fields = run_outcome(view, s.item, timed_out=ended.timed_out)
            ended.remeasured = next(
                (p.remeasured for p in view.problems.values() if p.device == s.device), None
            )
        except Exception as e:  # no events: it never started
            fields = {"status": "error", "reason": ended.error or f"{type(e).__name__}: {e}"}
        if ended.error and fields.get("status") in ("running", "empty", None):
            fields.update(status="error", reason=ended.error[:500])
        return fields
