"""The states of runs and campaigns: their names, what each means, and how each is derived
from the log and the driver's lock (`replay/runstate.py`), in one place. `accelopt runs`,
`accelopt campaign status`, the dashboard, the reports and the campaign driver ask here,
so a run is called the same everywhere, and so is its resume command.

    running      a live process drives it (its lock is held); for a campaign, also while its
                 driver waits for its agents
    paused       (a campaign) driven, and waiting for the next UTC day's budget
    completed    it reached its end: a run's RunCompleted (`completed (budget)`: its budget
                 ended it), a campaign's CampaignStopped (`completed (max_runs)`: the stop rule)
    failed       a run's RunFailed, or a run its campaign could not drive (the reason beside it)
    interrupted  its driver died before its end (kill -9, a crash, Ctrl-C): resumable, and the
                 command is given (a campaign's run: `accelopt campaign resume`)
    stopped      its driver ended it on purpose before its end: its time was up (a run's
                 --timeout: resumable; a campaign's deadline: the campaign is done with it)
    stalled      no driver's lock to ask, read from the stream, no event for 15 minutes
    incomplete   its log has no end and no lock says why (a log from another machine)

A run's log says whether it ended; the lock says whether a live process still drives it and,
where its driver let it go before its end on purpose, why (`LockInfo.ended`): a driver that
dies cannot say anything. A campaign's runs are also read from the campaign's own log
(`CampaignRunFinished.status`); `campaign_run_state` maps those, and the campaign's driver
writes the state it gives a run whose log has no end into that run's lock (`mark_ended`), so
`accelopt runs` says what `campaign status` says.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import msgspec

from replay.runstate import (
    LockInfo,
    LockState,
    campaign_resume_command,
    lock_state,
    read_lock,
    run_resume_command,
)

if TYPE_CHECKING:
    from accelopt import catalog as ev

StateName = Literal[
    "running", "paused", "completed", "failed", "interrupted", "stopped", "stalled", "incomplete"
]
STATES: tuple[StateName, ...] = (
    "running",
    "paused",
    "completed",
    "failed",
    "interrupted",
    "stopped",
    "stalled",
    "incomplete",
)
STALLED_AFTER_S = 15 * 60  # no terminal event, no lock, no news on the stream for this long
TIME_UP = "its time was up"
BY_CAMPAIGN = "by its campaign"


class State(msgspec.Struct, frozen=True, kw_only=True):
    """A run's or campaign's state: its name (one of STATES), why in a few words, and the
    command that goes on with it where one does ("" where nothing does)."""

    name: StateName
    detail: str = ""
    resume: str = ""

    @property
    def label(self) -> str:
        """`completed (budget)`, `interrupted`: what a table's status cell shows."""
        return f"{self.name} ({self.detail})" if self.detail else self.name

    @property
    def live(self) -> bool:
        return self.name in ("running", "paused")


def resume_hint(what: str, state: State) -> str:
    """The line that says how to go on with `what` ("run X", "campaign Y"), "" where nothing
    goes on (a state without a resume command)."""
    if not state.resume:
        return ""
    why = "its driver died" if state.name == "interrupted" else state.detail
    return f"{what} is {state.name}" + (f" ({why})" if why else "") + f"; to go on: {state.resume}"


class Driver(msgspec.Struct, frozen=True, kw_only=True):
    """What the lock says: held by a live driver, released, or no lock file at all."""

    lock: LockState = "none"
    info: LockInfo = msgspec.field(default_factory=LockInfo)


DRIVEN = Driver(lock="held")  # asked by the driver itself


def driver_at(lock_path: str | Path) -> Driver:
    state = lock_state(lock_path)
    return Driver(lock=state, info=read_lock(lock_path) if state != "none" else LockInfo())


# --- a run ------------------------------------------------------------------------------------


def run_state(
    log_status: str,
    driver: Driver,
    *,
    source: str = "file",
    last_ts: float | None = None,
    run_id: str = "",
    root: str = "runs",
    now: float | None = None,
) -> State:
    """A run's state from its log (`log_status`: `RunView.status`, "completed (budget)",
    "failed", "running" while it has no terminal event) and its driver's lock. `source`: where
    the log was read ("file", "stream", or "lock": only its lock file is there)."""
    if log_status == "failed":
        return State(name="failed")
    if log_status.startswith("completed"):
        return State(name="completed", detail=_inner(log_status))
    info = driver.info
    resume = info.resume or run_resume_command(run_id, root)
    if driver.lock == "held":
        return State(name="running")
    if driver.lock == "released":
        if info.ended in STATES and info.ended not in ("running", "paused", "interrupted"):
            # ended on purpose: a run of its own stays resumable, a campaign's run is its campaign's
            goes_on = info.ended == "stopped" and not info.campaign
            return State(name=info.ended, detail=info.ended_why, resume=resume if goes_on else "")
        return State(name="interrupted", resume=resume)
    if source == "stream":
        if last_ts and (now or time.time()) - last_ts > STALLED_AFTER_S:
            from replay.render.fmt import ago

            return State(name="stalled", detail=f"last event {ago(last_ts, now)}")
        return State(name="running")
    return State(name="incomplete")


def run_driver(root: str | Path, run_id: str) -> Driver:
    from replay.runstate import run_lock_path

    return driver_at(run_lock_path(root, run_id))


def _inner(status: str) -> str:
    """`completed (budget)` -> `budget`."""
    _, _, rest = status.partition(" (")
    return rest[:-1] if rest.endswith(")") else ""


# --- a campaign -----------------------------------------------------------------------------------


class CampaignLog(Protocol):
    """What a campaign's state is read from in its folded log (`replay.campaign.CampaignView`)."""

    campaign_id: str | None
    stopped: ev.CampaignStopped | None
    paused: ev.CampaignPaused | None


def campaign_driver(root: str | Path, campaign_id: str) -> Driver:
    from events.runsource import CAMPAIGNS_DIR
    from replay.runstate import LOCK_NAME

    return driver_at(Path(root) / CAMPAIGNS_DIR / campaign_id / LOCK_NAME)


def campaign_state(view: CampaignLog, driver: Driver, *, source: str = "file", root: str = "runs") -> State:
    """A campaign's state from its log (`CampaignView`) and its driver's lock."""
    if view.stopped is not None:
        return State(name="completed", detail=view.stopped.reason)
    resume = driver.info.resume or campaign_resume_command(view.campaign_id or "", root)
    if driver.lock == "held":
        return State(name="paused") if view.paused is not None else State(name="running")
    if driver.lock == "released":
        return State(name="interrupted", resume=resume)
    if source == "stream":
        return State(name="paused") if view.paused is not None else State(name="running")
    return State(name="incomplete")


def campaign_run_state(finished: ev.CampaignRunFinished | None, campaign: State) -> State:
    """The state of one of a campaign's runs, from the campaign's log: what the campaign
    recorded it came to (`CampaignRunFinished.status`), or, while it has no record, the
    campaign's own state (a run of an interrupted campaign is interrupted, and goes on with
    the campaign)."""
    if finished is None:
        if campaign.name in ("running", "paused"):
            return State(name="running")
        if campaign.name == "interrupted":
            return State(name="interrupted", resume=campaign.resume)
        if campaign.name == "completed":
            return State(name="stopped", detail=BY_CAMPAIGN)
        return State(name=campaign.name)
    status = finished.status
    if status.startswith("completed"):
        return State(name="completed", detail=_inner(status))
    if status in ("failed", "error"):
        return State(name="failed", detail=finished.reason[:120])
    if status == "incomplete":  # the campaign's deadline ended it (catalog: "stopped at the deadline")
        return State(name="stopped", detail=f"{BY_CAMPAIGN}: {TIME_UP}")
    return State(name="incomplete", detail=status)


def time_up(campaign: str = "") -> State:
    """The state a run's driver leaves it in when its time is up before its end (a run's
    `--timeout`, or `campaign`'s deadline), written into its lock as it lets go."""
    return State(name="stopped", detail=f"{BY_CAMPAIGN}: {TIME_UP}" if campaign else TIME_UP)


def record_campaign_run(root: str | Path, finished: ev.CampaignRunFinished) -> bool:
    """What a campaign's driver does as it records what a run came to: a run whose log has no
    end gets the state the campaign gives it (`campaign_run_state`) written into its lock, so
    `accelopt runs` says what `campaign status` says. True if written."""
    if finished.status not in ("incomplete", "error"):
        return False  # its log ended: the log says it
    return mark_ended(root, finished.run, campaign_run_state(finished, State(name="running")))


def mark_ended(root: str | Path, run_id: str, state: State) -> bool:
    """Write into a run's released lock that it ended as `state` (a run its campaign is done
    with, whose log has no end: `stopped` at the deadline, `failed` where it could not be
    driven). Nothing where no lock file is there or a live driver holds it; True if written."""
    from replay.runstate import run_lock_path

    path = run_lock_path(root, run_id)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        info = read_lock(path)
        marked = msgspec.structs.replace(info, ended=state.name, ended_why=state.detail, ended_ts=time.time())
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, msgspec.json.encode(marked) + b"\n", 0)
            return True
        return False
    finally:
        os.close(fd)
