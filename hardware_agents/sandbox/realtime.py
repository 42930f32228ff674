"""Timed intervals at real-time priority, so the host's other work cannot preempt the kernel.

On a shared host the wall clock around a batch counts the time the kernel's threads waited for
a CPU: at a load average of 6 on 2 cores the same two kernels' ratio moved by 20-60% from one
window to the next. For the interval of one timed command, `RealtimeWindow` puts every thread
of the (stopped) child under SCHED_FIFO at `CHILD_PRIORITY`, and the parent's timing thread
above it at `PARENT_PRIORITY`, so no ordinary (SCHED_OTHER) process of the host runs on a
core the kernel wants while it is timed; when the child has stopped again, both go back to
the policies they had. The clock stays the parent's wall clock: nothing is estimated.

Why this is safe against a hostile kernel:
- the child's threads are real-time only between the parent's continue and the child's
  stop (reset while it is held stopped, threads it made meanwhile included);
- a thread the kernel creates during the interval inherits the priority (a kernel that starts
  its threads in every call is timed as one that keeps a pool), and is reset with the others
  at the stop: only in a child that cannot fork (seccomp no_fork), whose every thread is in
  its /proc task list; a child that may fork gets SCHED_RESET_ON_FORK, so a thread or
  process it creates starts as an ordinary one (it cannot carry the priority past the
  interval in a process of its own);
- the parent's thread, and the deadline watchdog it starts while real-time, are above the
  child: a kernel that spins forever is still killed at its deadline;
- it is used only where the kernel's real-time throttling is on (sched_rt_runtime_us below
  its period), which keeps a share of every second for everything else;
- a budget: an interval still running after `INTERVAL_BUDGET_S` is demoted (its threads go
  back to ordinary ones; a timer thread above the child does it), and a child that has spent
  `CHILD_BUDGET_S` at real-time priority gets no more: a kernel that spins holds the host's
  cores for seconds, not for its whole deadline. An honest batch lasts milliseconds; a profile
  with a demoted or refused interval says so (`describe`).

Not available (not root / no CAP_SYS_NICE, throttling off, a container that refuses it, or
ACCELOPT_REALTIME_TIMING=0): the interval runs at ordinary priority and the profile says so
(`unavailable_reason`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

CHILD_PRIORITY = 1  # any real-time priority is above every ordinary process
PARENT_PRIORITY = 2  # the parent's timing thread and its watchdog preempt the child
OFF_ENV = "ACCELOPT_REALTIME_TIMING"  # "0": time at ordinary priority
KERNEL_SETTINGS = Path("/proc/sys/kernel")
INTERVAL_BUDGET_S = 5.0  # one interval at real-time priority at most this long
# the kernel's own backstop, needing no thread of ours: a thread of the child that runs this
# long at real-time priority without blocking (a stop ends every interval) is killed by the
# kernel (RLIMIT_RTTIME, `resources.rlimits`); the budget timer demotes it long before, unless
# it cannot run
RTTIME_LIMIT_S = 3 * INTERVAL_BUDGET_S
MAX_RESET_PASSES = 64  # a child's threads are bounded by its RLIMIT_NPROC (64 for a kernel server)
CHILD_BUDGET_S = 30.0  # one child's intervals at real-time priority at most this long in all


def _rt_throttling() -> str | None:
    """None when the kernel keeps a share of each period for ordinary processes; else why not."""
    try:
        runtime = int((KERNEL_SETTINGS / "sched_rt_runtime_us").read_text())
        period = int((KERNEL_SETTINGS / "sched_rt_period_us").read_text())
    except (OSError, ValueError):
        return "the kernel's real-time throttling settings cannot be read"
    if runtime < 0 or runtime >= period:
        return f"real-time throttling is off (sched_rt_runtime_us={runtime})"
    if runtime < period // 2:  # 0: real-time tasks never run; small: every batch stretched
        return f"real-time runtime too small (sched_rt_runtime_us={runtime} of {period})"
    return None


@functools.cache
def unavailable_reason() -> str | None:
    """None where timed intervals can run at real-time priority here; else a short reason."""
    if os.environ.get(OFF_ENV, "1") == "0":
        return f"{OFF_ENV}=0"
    why = _rt_throttling()
    if why:
        return why
    try:  # the calling thread, briefly: a refusal here is a refusal for the child too
        before = os.sched_getscheduler(0), os.sched_getparam(0)
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(PARENT_PRIORITY))
        os.sched_setscheduler(0, before[0], before[1])
    except OSError as e:
        return f"real-time priority refused ({e.strerror or e})"
    return None


def _threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


class RealtimeWindow:
    """Real-time priority for one timed interval of the child `pid`: `enter` while the child
    is stopped, just before it is continued (from the thread that will wait for its stop);
    `leave` once it has stopped or ended. `enter` returns False (and changes nothing) where
    it cannot be had; `used` counts the intervals that ran real-time, `demoted` those cut at
    `interval_budget_s`, `over_budget` those refused once `child_budget_s` was spent."""

    def __init__(self, pid: int, *, threads_only: Callable[[], bool] = lambda: False) -> None:
        self.pid = pid
        # whether the child cannot fork (its threads then inherit the interval's priority):
        # asked at its first interval
        self._threads_only = threads_only
        self.child_policy: int | None = None
        self.interval = 0  # the number of the last interval entered (a budget timer names its own)
        self.used = 0
        self.demoted = 0
        self.over_budget = 0
        self.spent_s = 0.0  # at real-time priority, over the intervals so far
        self.interval_budget_s = INTERVAL_BUDGET_S
        self.child_budget_s = CHILD_BUDGET_S
        self.refused: str | None = unavailable_reason()
        self._own: tuple[int, os.sched_param] | None = None
        self._entered_at: float | None = None  # the open interval's start, while it is real-time
        self._lock = threading.Lock()  # the budget timer and the waiting thread both end an interval

    def describe(self) -> str:
        """How its intervals were timed, for the profile's isolation record."""
        if self.refused is not None:
            return f"ordinary priority ({self.refused})"
        cut = []
        if self.demoted:
            cut.append(f"{self.demoted} of {self.used} intervals demoted after {self.interval_budget_s:g} s")
        if self.over_budget:
            cut.append(f"{self.over_budget} at ordinary priority past the child's {self.child_budget_s:g} s")
        return "real-time priority" + (f" ({'; '.join(cut)})" if cut else "")

    def counters(self) -> dict[str, float]:
        """What its intervals had, for the profile's counters."""
        out = {"realtime_intervals": float(self.used), "realtime_s": self.spent_s}
        if self.demoted or self.over_budget:
            out.update(realtime_demoted=float(self.demoted), realtime_over_budget=float(self.over_budget))
        return out

    def budget_left_s(self) -> float:
        """How long the open interval may stay real-time (0: it is not real-time)."""
        with self._lock:
            if self._entered_at is None:
                return 0.0
            return max(0.0, min(self.interval_budget_s, self.child_budget_s - self.spent_s))

    def enter(self) -> bool:
        if self.refused is not None:
            return False
        if self.spent_s >= self.child_budget_s:
            self.over_budget += 1
            return False
        try:
            if self._own is None:  # else a window not left yet: its saved policy is the one to restore
                self._own = os.sched_getscheduler(0), os.sched_getparam(0)
            # not reset on fork: the deadline watchdog and the budget timer this thread starts
            # must be above the child
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(PARENT_PRIORITY))
            rt = os.sched_param(CHILD_PRIORITY)
            if self.child_policy is None:
                self.child_policy = os.SCHED_FIFO | (0 if self._threads_only() else os.SCHED_RESET_ON_FORK)
            with self._lock:
                for tid in _threads(self.pid):
                    with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
                        os.sched_setscheduler(tid, self.child_policy, rt)
                self._entered_at = time.monotonic()
                self.interval += 1
        except OSError as e:
            self.refused = f"real-time priority refused for the kernel ({e.strerror or e})"
            self.leave()
            return False
        self.used += 1
        return True

    def demote(self, interval: int) -> None:
        """Interval number `interval` has spent its budget: the child's threads ordinary again
        until its stop (run by a timer thread above the child; the parent's own policy stays).
        Nothing if that interval has ended: a timer that woke too late to be cancelled must not
        cut the next one."""
        with self._lock:
            if interval == self.interval and self._end_interval():
                self.demoted += 1
                self._child_ordinary()

    def leave(self, child_alive: bool = True) -> None:
        """Every thread of the child back to an ordinary one (not once it has been reaped: its
        pid may name another process), then the parent's thread."""
        with self._lock:
            self._end_interval()
            if child_alive:
                self._child_ordinary()
        if self._own is not None:
            with contextlib.suppress(OSError):
                os.sched_setscheduler(0, *self._own)
            self._own = None

    def _end_interval(self) -> bool:
        """(With the lock held.) Whether an interval was open; its time counted."""
        if self._entered_at is None:
            return False
        self.spent_s += time.monotonic() - self._entered_at
        self._entered_at = None
        return True

    def _child_ordinary(self) -> None:
        """Every thread of the child ordinary. A running child (a demotion) may make threads
        while they are reset, which inherit the priority of their maker: passes until one
        finds no thread it had not seen."""
        ordinary = os.sched_param(0)
        seen: set[int] = set()
        for _ in range(MAX_RESET_PASSES):
            tids = set(_threads(self.pid))
            if tids <= seen:
                return
            for tid in tids:
                with contextlib.suppress(OSError):
                    os.sched_setscheduler(tid, os.SCHED_OTHER, ordinary)
            seen |= tids


__all__ = [
    "CHILD_BUDGET_S",
    "CHILD_PRIORITY",
    "INTERVAL_BUDGET_S",
    "OFF_ENV",
    "PARENT_PRIORITY",
    "RealtimeWindow",
    "unavailable_reason",
]
