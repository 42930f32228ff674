"""A sandboxed child the parent drives: stopped between its commands, continued by the parent,
and proved to have stayed stopped in between (`freeze.py`)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from typing import Protocol

from accelopt.procfs import pids_of_session
from hardware_agents.sandbox.cancel import adopt
from hardware_agents.sandbox.freeze import FreezeBreach, Freezer, RanWhileStopped
from hardware_agents.sandbox.launch import Launched, collect
from hardware_agents.sandbox.policy import SandboxOutcome, SandboxPolicy
from hardware_agents.sandbox.realtime import RealtimeWindow
from hardware_agents.sandbox.uids import pids_of_uid


class SandboxHome(Protocol):
    """What a driven child needs of the sandbox it runs in (`Sandbox` is one)."""

    @property
    def uid(self) -> int | None: ...

    @property
    def workdir_limit(self) -> str: ...

    @property
    def policy(self) -> SandboxPolicy: ...


class SandboxChild:
    """A spawned sandboxed child the parent drives with SIGSTOP/SIGCONT (see
    `hardware_agents.cpu.runner`): it stops itself when it is ready or done with a command,
    and the parent continues it. The parent's clock runs from `resume` to the stop.

    The freeze (`freeze.py`): at every stop `wait_stopped` reads the CPU time of
    every process of the sandbox (freezing the others too where the sandbox may fork);
    `resume` reads them again first and, if anything ran in between, kills the child,
    records `freeze_breach` and raises `RanWhileStopped`. `check_frozen()` is that check
    alone (e.g. after reading outputs at the last stop); `finish` runs it too when the child
    is still held stopped, so `finish().freeze_breach` covers the time after the last stop.
    `last_run_cpu_s` is the CPU time the sandbox used from the last `resume` to the stop
    that followed (every thread: more than wall x cores given means cores it was not given).

    A timed interval is `t0 = resume()` to `stopped_at` (the perf_counter reading taken as
    soon as the stop was reported, before the freeze readings): the freeze bookkeeping on both
    sides stays outside it.
    """

    def __init__(self, box: SandboxHome, launched: Launched, timeout_s: float) -> None:
        self.box, self._l, self.timeout_s = box, launched, timeout_s
        self.deadline = launched.t0 + timeout_s
        self.exit_status: int | None = None  # raw wait status once it has exited
        self.timed_out = False  # killed at its wall-clock deadline
        self.freeze_breach: FreezeBreach | None = None
        self._freezer: Freezer | None = None
        self._expect_continue = False  # a continue report may be ours (after `resume`)
        self.stopped_at = 0.0  # perf_counter when the last stop was reported: a timed interval ends there
        self._outcome: SandboxOutcome | None = None
        self.realtime: RealtimeWindow | None = None  # see `time_at_realtime`
        self._demoter: threading.Timer | None = None  # the open real-time interval's budget

    def time_at_realtime(self) -> RealtimeWindow:
        """From the next `resume` on, every interval the child runs is at real-time priority
        where the host allows it (`realtime.py`): the host's other work stays out of the
        clock. The window says how many intervals had it, or why none could."""
        if self.realtime is None:
            # whether it can fork is read at its first interval: after a stop, when its report
            # is in (read now, a slow start would find it missing and break the child's pipe)
            self.realtime = RealtimeWindow(self.pid, threads_only=lambda: self.freeze_scope == "process")
        return self.realtime

    @property
    def pid(self) -> int:
        return self._l.proc.pid

    @property
    def held(self) -> bool:
        """Stopped, its stop already reported to us, and not continued since."""
        return self._freezer is not None and self._freezer.holding and self.exit_status is None

    @property
    def last_run_cpu_s(self) -> float | None:
        return self._freezer.last_run_cpu_s if self._freezer is not None else None

    @property
    def freeze_scope(self) -> str:
        """What the freeze covers: "process" (the sandbox cannot fork), "uid" (every process of
        the sandbox uid) or "session" (not root: the processes of the child's session)."""
        if "no_fork" in self._l.isolation(wait_s=2.0).get("seccomp", "").split(","):
            return "process"
        return "uid" if self.box.uid is not None else "session"

    def isolation(self) -> dict[str, str]:
        """The isolation the child reported, plus what the parent applied around it."""
        return {
            **self._l.isolation(wait_s=2.0),
            "workdir": self.box.workdir_limit,
            "freeze": self._freeze_record(),
            **self._timing_record(),
        }

    def _timing_record(self) -> dict[str, str]:
        return {"timing": self.realtime.describe()} if self.realtime is not None else {}

    def _freeze_record(self) -> str:
        exact = self._freezer is None or self._freezer.exact
        return self.freeze_scope + ("" if exact else " (stop readings within a scheduler tick)")

    def _sandbox_pids(self) -> set[int]:
        if self.box.uid is not None:
            return set(pids_of_uid(self.box.uid))
        return pids_of_session(self.pid)

    def wait_stopped(self) -> bool:
        """Block until the child stops (True) or exits, or its wall-clock deadline passes
        (False: it has been killed; see `finish`). A watchdog kills it at the deadline so the
        blocking wait returns. At a stop the freeze readings are taken."""
        if self.exit_status is not None:
            return False
        remaining = self.deadline - time.perf_counter()
        if remaining <= 0:
            self._expire()
        watchdog = threading.Timer(max(remaining, 0.0), self._expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            while True:
                try:
                    pid, status = os.waitpid(self.pid, os.WUNTRACED | os.WCONTINUED)
                except ChildProcessError:
                    self.exit_status = 0
                    return False
                if pid != self.pid:
                    continue
                self.stopped_at = time.perf_counter()
                if self.freeze_breach is not None and (os.WIFSTOPPED(status) or os.WIFCONTINUED(status)):
                    continue  # killed: wait for its end
                if not os.WIFCONTINUED(status):
                    break
                if self._expect_continue:  # our own `resume`
                    self._expect_continue = False
                    continue
                # continued by someone else: a stop of its own may have been lost with it (a
                # stop report is gone once the process runs again), and waiting for the next
                # would hang
                self.freeze_breach = FreezeBreach(
                    reason="continued",
                    pid=self.pid,
                    detail="it was continued by a signal that was not the parent's (its stop was cut short)",
                )
                self.kill()
        finally:
            watchdog.cancel()
            self._cancel_demoter()
            if self.realtime is not None:
                self.realtime.leave(child_alive=self.exit_status is None)
        self._expect_continue = False
        if os.WIFSTOPPED(status) and self.freeze_breach is None:
            if self._freezer is None:
                self._freezer = Freezer(self.pid, self.freeze_scope, self._sandbox_pids)
            self._freezer.stopped()
            return True
        self._exited(status)
        return False

    def _exited(self, status: int) -> None:
        self.exit_status = status
        self._l.proc.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)

    def check_frozen(self) -> FreezeBreach | None:
        """Whether the sandbox ran since the child's last stop (None: it did not, or it is not
        held stopped). Does not continue or kill it."""
        fz = self._freezer
        if fz is None or not fz.holding or self.exit_status is not None:
            return None
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG | os.WUNTRACED | os.WCONTINUED)
        except ChildProcessError:
            pid, status = 0, 0
        pending = None
        if pid == self.pid:
            if os.WIFEXITED(status) or os.WIFSIGNALED(status):
                self._exited(status)
                if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
                    return None  # killed (the deadline, the OOM killer): nothing it did counts
                return FreezeBreach(
                    reason="state",
                    pid=self.pid,
                    detail=f"it exited while it was held stopped (wait status {status:#x})",
                )
            pending = status
        return fz.check(pending)

    def resume(self) -> float:
        """Continue the child (and, where it may fork, the sandbox's other processes it froze).
        Returns the perf_counter reading taken just before the continue: a timed interval
        starts there, after the freeze check. Raises `RanWhileStopped` (the child killed) if
        anything of the sandbox ran while it was held stopped."""
        breach = self.check_frozen()
        if breach is not None:
            self.freeze_breach = breach
            self.kill()
            raise RanWhileStopped(breach)
        self._expect_continue = True
        if self.realtime is not None and self.exit_status is None and self.realtime.enter():
            # left in `wait_stopped`, once it has stopped or ended; cut at its budget by a timer
            # this thread starts while it is above the child
            self._demoter = threading.Timer(
                self.realtime.budget_left_s(), self.realtime.demote, args=(self.realtime.interval,)
            )
            self._demoter.daemon = True
            self._demoter.start()
        if self.exit_status is not None or self._freezer is None:
            t = time.perf_counter()
            if self.exit_status is None:
                os.kill(self.pid, signal.SIGCONT)
            return t
        return self._freezer.continue_all()

    def _cancel_demoter(self) -> None:
        if self._demoter is not None:
            self._demoter.cancel()
            self._demoter = None

    def restart_clock(self, timeout_s: float) -> None:
        """Start the child's wall-clock allowance (and the outcome's wall time) now: a child
        started ahead of need and held stopped until it is given its work."""
        self._l.t0 = time.perf_counter()
        self.timeout_s = timeout_s
        self.deadline = self._l.t0 + timeout_s

    def join_cancel_scope(self) -> None:
        """This child now serves the work of the current context (a spare it claimed): a cancel
        of that work stops it too (`cancel.py`)."""
        adopt(self._l.proc)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signal.SIGKILL)

    def _expire(self) -> None:
        if self.exit_status is None:
            self.timed_out = True
            self.kill()

    def finish(self) -> SandboxOutcome:
        """Kill the child if it still runs, reap it, and describe what happened (with
        `freeze_breach` if it ran while held stopped, after its last stop included)."""
        if self._outcome is not None:
            return self._outcome
        if self.freeze_breach is None:
            self.freeze_breach = self.check_frozen()
        timed_out = self.timed_out
        self._cancel_demoter()
        if self.realtime is not None:  # a window an exception left open: the parent's thread back
            self.realtime.leave(child_alive=False)
        if self.exit_status is None:
            self.kill()
            with contextlib.suppress(ChildProcessError):
                _, status = os.waitpid(self.pid, 0)
                self._exited(status)
        out = collect(
            self._l,
            timed_out,
            self.timeout_s,
            uid=self.box.uid,
            workdir_limit=self.box.workdir_limit,
            log_bytes=self.box.policy.log_bytes,
        )
        out.isolation["freeze"] = self._freeze_record()
        out.isolation.update(self._timing_record())
        out.freeze_breach = self.freeze_breach
        self._outcome = out
        self._l.close()
        return out
