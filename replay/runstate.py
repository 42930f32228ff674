"""Is a run (or a campaign) still driven by a live process? The lock its driver holds, and
what the lock file says.

The log says whether a run ended (its terminal event); it cannot say whether the process
driving an unfinished run is still alive. So the driver of a run (`accelopt run`, `resume`,
`ablate`, the demo, a campaign's runs: everything that goes through
`actors.runtime.session.run_session`) holds an exclusive `flock` on
`<root>/<run_id>/run.lock` for as long as it drives the run, and a campaign's driver on
`<root>/campaigns/<id>/run.lock`. The file says who (pid, host, start time), the command that
goes on with it (`resume`: `accelopt resume RUN`, or `accelopt campaign resume ID` for a
campaign and for each of its runs), and the campaign a run belongs to. The kernel releases
the lock when that process dies, however it dies (`kill -9` included), and the file stays.

A driver that lets a run go before the run's log ends, on purpose (its time was up: a run's
`--timeout`, a campaign's deadline), writes the state it leaves it in into the file as it
lets go (`ended`, `ended_why`); a driver that dies cannot. What a run's or campaign's state
is, from its log and this lock, is `replay/states.py`'s to say. A run can have only one
driver at a time: a second driver of a run being driven is refused (`RunBusy`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from pathlib import Path
from typing import Literal

import msgspec

from accelopt.folders import private_folder

LOCK_NAME = "run.lock"
LockState = Literal["held", "released", "none"]  # a live driver holds it; it is free; no lock file


class RunBusy(RuntimeError):
    """Another live process drives this run."""


class LockInfo(msgspec.Struct, kw_only=True):
    """What a lock file says (JSON; fields an older file lacks take their defaults)."""

    pid: int = 0
    host: str = ""
    started_ts: float | None = None
    resume: str = ""  # the command that goes on with it
    campaign: str = ""  # the campaign a run belongs to ("" for a run of its own, and a campaign's own lock)
    # where its driver let it go before its log's end on purpose: the state it left it in
    # (replay/states.py: "stopped", "failed") and why; "" while driven, and after a crash
    ended: str = ""
    ended_why: str = ""
    ended_ts: float | None = None


class RunLock:
    """`with RunLock(root, run_id, resume=...):` for as long as this process drives the run
    (or campaign). `release(ended=..., why=...)` lets it go saying how it was left before its
    log's end, on purpose."""

    def __init__(
        self, root: str | Path, run_id: str, *, resume: str | None = None, campaign: str = ""
    ) -> None:
        self.path = Path(root) / run_id / LOCK_NAME
        self.run_id, self.root = run_id, str(root)
        self.info = LockInfo(
            resume=resume if resume is not None else run_resume_command(run_id, str(root)), campaign=campaign
        )
        self._fd: int | None = None

    @classmethod
    def of_run(cls, root: str | Path, run_id: str, *, campaign: str = "") -> RunLock:
        """The lock of a run driven on its own (`accelopt resume RUN` goes on with it) or as a
        run of `campaign` (`accelopt campaign resume CAMPAIGN` does)."""
        resume = (
            campaign_resume_command(campaign, str(root))
            if campaign
            else run_resume_command(run_id, str(root))
        )
        return cls(root, run_id, resume=resume, campaign=campaign)

    @classmethod
    def of_campaign(cls, root: str | Path, campaign_id: str) -> RunLock:
        """The lock of a campaign's driver, `<root>/campaigns/<id>/run.lock` (`root`: the runs
        root the campaign runs under)."""
        from events.runsource import CAMPAIGNS_DIR

        return cls(
            Path(root) / CAMPAIGNS_DIR, campaign_id, resume=campaign_resume_command(campaign_id, str(root))
        )

    def __enter__(self) -> RunLock:
        private_folder(self.root)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            other = read_lock(self.path)
            raise RunBusy(
                f"run {self.run_id} is being driven by pid {other.pid} on {other.host or '?'}; stop that "
                "first"
            ) from None
        self._fd = fd
        self.info = msgspec.structs.replace(
            self.info, pid=os.getpid(), host=socket.gethostname(), started_ts=time.time()
        )
        self._write(self.info)
        return self

    def _write(self, info: LockInfo) -> None:
        assert self._fd is not None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, msgspec.json.encode(info) + b"\n", 0)

    def release(self, *, ended: str = "", why: str = "") -> None:
        """Let the run go; `ended`, `why`: the state its driver leaves it in before its log's
        end, on purpose (replay/states.py), and why."""
        if self._fd is None:
            return
        if ended:
            with contextlib.suppress(OSError):
                self._write(
                    msgspec.structs.replace(self.info, ended=ended, ended_why=why, ended_ts=time.time())
                )
        os.close(self._fd)  # releases the lock; the file says who drove the run last
        self._fd = None

    def __exit__(self, *exc: object) -> None:
        self.release()


def root_flag(root: str) -> str:
    """` --root R` for a command to print, where the root is not the default."""
    return "" if str(root) == "runs" else f" --root {root}"


def run_resume_command(run_id: str, root: str) -> str:
    return f"accelopt resume {run_id}{root_flag(root)}"


def campaign_resume_command(campaign_id: str, root: str) -> str:
    """The command that goes on with a campaign, and with each of its runs (`root`: the runs
    root the campaign runs under, not its `campaigns/` folder)."""
    return f"accelopt campaign resume {campaign_id}{root_flag(root)}"


def read_lock(path: str | Path) -> LockInfo:
    with contextlib.suppress(OSError, msgspec.DecodeError):
        return msgspec.json.decode(Path(path).read_bytes().strip() or b"{}", type=LockInfo)
    return LockInfo()


def lock_state(path: str | Path) -> LockState:
    """Whether a live process holds the lock at `path` (see the module docstring)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return "none"
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return "held"
    finally:
        os.close(fd)  # a shared lock we got goes with the fd
    return "released"


def run_lock_path(root: str | Path, run_id: str) -> Path:
    return Path(root) / run_id / LOCK_NAME


def locked_run_dirs(root: str | Path) -> list[Path]:
    """Run directories under `root` with a driver's lock file."""
    root = Path(root)
    return sorted(p.parent for p in root.glob(f"*/{LOCK_NAME}")) if root.is_dir() else []
