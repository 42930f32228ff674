"""Proof that a stopped sandbox stayed stopped: the parent's check between SIGSTOP and SIGCONT.

A sandboxed child the parent drives (`SandboxChild`: the CPU kernel server, the Triton and
Neuron timing harnesses) stops itself when it is done with a command, and the parent
continues it for the next one. Outside the timed interval the kernel must run no code:
otherwise it could precompute the next call's outputs while the parent writes its inputs,
or change the outputs while the parent reads them. A stop is not such a proof by itself:
SIGCONT from anywhere ends it (a POSIX timer, an I/O signal, another process of the
sandbox), and the kernel may restop itself before the parent looks.

So the parent reads, at every stop, the CPU time of every process of the sandbox (the
process CPU clock: every thread, living or ended, in nanoseconds) and freezes with SIGSTOP
any other process of it (where the sandbox may fork); just before it continues the child it
reads them again. The child ran while stopped if any of these holds:

- a process's CPU time grew (`cpu_time`);
- a wait status is pending: the child was continued by someone else, or stopped again
  (`continued`);
- the child is not in the stopped state (`state`);
- a process of the sandbox appeared or ended (`processes`);
- a helper process would not stop (`unstoppable`).

Any of these is a `FreezeBreach`; `SandboxChild.resume` then kills the child and raises
`RanWhileStopped`. The seccomp profile `stoppable` (`seccomp.py`) removes the
usual ways to do it; this check is what proves it did not happen.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable

import msgspec

from accelopt.procfs import proc_stat

_CPUCLOCK_SCHED = 2
_HELPER_STOP_S = 1.0  # how long a helper process may take to stop before it counts as a breach
# Where the stop reading cannot be exact (see settled_cpu_ns), CPU time that grows by less than
# this (a scheduler tick at HZ=250) is the tail of the stop, not a breach.
INEXACT_TOLERANCE_NS = 4_000_000


class FreezeBreach(msgspec.Struct, kw_only=True, frozen=True):
    """Evidence that a process of a sandbox ran while the parent held it stopped."""

    reason: str  # "cpu_time", "continued", "state", "processes", "unstoppable"
    pid: int
    cpu_ns_at_stop: int = 0
    cpu_ns_now: int = 0
    stopped_s: float = 0.0  # how long the parent had held it stopped
    detail: str = ""

    def describe(self) -> str:
        head = f"the kernel's process (pid {self.pid}) ran while it was stopped between calls"
        if self.reason == "cpu_time":
            grew = (self.cpu_ns_now - self.cpu_ns_at_stop) / 1e6
            what = (
                f"its CPU time grew by {grew:.3f} ms in the {self.stopped_s * 1e3:.1f} ms it was held stopped "
                "(something continued it: a timer, a signal)"
            )
        else:
            what = self.detail
        return f"{head}: {what}"


class RanWhileStopped(RuntimeError):
    """Raised by `SandboxChild.resume` when the sandbox ran while stopped (it has been killed)."""

    def __init__(self, breach: FreezeBreach) -> None:
        super().__init__(breach.describe())
        self.breach = breach


def cpu_ns(pid: int) -> int | None:
    """The process's CPU time (all its threads, ended ones included), ns; None once it is gone."""
    try:
        return time.clock_gettime_ns(((~pid) << 3) | _CPUCLOCK_SCHED)
    except OSError:
        return None


def settled_cpu_ns(pid: int) -> tuple[int | None, bool]:
    """The CPU time of a process that has just stopped, and whether it is exact. The last
    thread to stop reports the stop before it is off the CPU, and a thread's CPU time is only
    brought up to date when it leaves the CPU (or at a scheduler tick): read too early, the
    clock would later grow by a tail the thread ran before its stop. Reading a thread's
    /proc/<pid>/task/<tid>/syscall waits until that thread is off the CPU (the kernel's
    wait_task_inactive), so after that the clock is final. That read needs ptrace access
    (root, or a dumpable process): without it the reading is not exact."""
    exact = True
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return cpu_ns(pid), False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/syscall", "rb") as f:
                f.read()
        except FileNotFoundError:
            continue  # a thread that is gone
        except OSError:
            exact = False
    return cpu_ns(pid), exact


def proc_state(pid: int) -> str | None:
    """The state letter of /proc/<pid>/stat (R, S, D, T, t, Z, ...), None if it is gone."""
    st = proc_stat(pid)
    return None if st is None else st.state


def _stopped(state: str | None) -> bool:
    return state in ("T", "t")


class Freezer:
    """The freeze bookkeeping of one driven child: `stopped()` when it has reported a stop,
    `check()` before continuing it, `continue_all()` to continue it.

    `scope` is what the freeze covers: "process" (the sandbox cannot fork: seccomp no_fork),
    or "uid" / "session" (every process `others()` finds: of the sandbox's uid, or of the
    child's session when the parent is not root and cannot give it a uid of its own).
    """

    def __init__(self, pid: int, scope: str, others: Callable[[], set[int]]) -> None:
        self.pid, self.scope, self._others = pid, scope, others
        self._frozen: dict[int, int] | None = None  # pid -> CPU ns at the stop
        self._stopped_at = 0.0
        self._cpu_at_resume: int | None = None
        self._pending: FreezeBreach | None = None
        self.last_run_cpu_s: float | None = None  # CPU the sandbox used from the last continue to the stop
        self.exact = True  # every stop reading was exact (else INEXACT_TOLERANCE_NS applies)

    @property
    def holding(self) -> bool:
        return self._frozen is not None

    def stopped(self) -> None:
        """The child reported a stop: freeze the sandbox's other processes and read every clock."""
        pids = [self.pid]
        if self.scope != "process":
            helpers = self._others() - {self.pid}
            for p in helpers:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(p, signal.SIGSTOP)
            deadline = time.perf_counter() + _HELPER_STOP_S
            for p in sorted(helpers):
                while True:
                    state = proc_state(p)
                    if state is None or state in ("Z", "X") or _stopped(state):
                        break
                    if time.perf_counter() > deadline:
                        self._pending = FreezeBreach(
                            reason="unstoppable",
                            pid=p,
                            detail=f"a process of its sandbox (pid {p}, state {state}) "
                            f"did not stop within {_HELPER_STOP_S:.0f} s",
                        )
                        break
                    time.sleep(50e-6)
                if _stopped(proc_state(p)):
                    pids.append(p)
        frozen = {}
        for p in pids:
            c, exact = settled_cpu_ns(p)
            if c is not None:
                frozen[p] = c
            self.exact = self.exact and exact
        self._frozen = frozen
        self._stopped_at = time.perf_counter()
        if self._cpu_at_resume is not None:
            self.last_run_cpu_s = max(0, sum(frozen.values()) - self._cpu_at_resume) / 1e9

    def check(self, pending_status: int | None) -> FreezeBreach | None:
        """Whether anything of the sandbox ran since `stopped()`. `pending_status`: a wait
        status of the child reported since then (a continue or another stop), or None."""
        frozen = self._frozen
        if frozen is None:
            return None
        if self._pending is not None:
            return self._pending
        held = time.perf_counter() - self._stopped_at
        for p, before in frozen.items():
            now = cpu_ns(p)
            if now is None:
                return FreezeBreach(
                    reason="processes",
                    pid=p,
                    stopped_s=held,
                    detail=f"a process of its sandbox (pid {p}) ended while it was held stopped",
                )
            if now - before > (0 if self.exact else INEXACT_TOLERANCE_NS):
                return FreezeBreach(
                    reason="cpu_time", pid=p, cpu_ns_at_stop=before, cpu_ns_now=now, stopped_s=held
                )
        status = pending_status
        if status is not None:
            what = "was continued" if os.WIFCONTINUED(status) else "stopped again"
            return FreezeBreach(
                reason="continued",
                pid=self.pid,
                stopped_s=held,
                detail=f"it {what} while the parent held it stopped (wait status {status:#x}): "
                "a signal that was not the parent's continued it",
            )
        state = proc_state(self.pid)
        if state is not None and not _stopped(state):
            return FreezeBreach(
                reason="state", pid=self.pid, stopped_s=held, detail=f"it is in state {state!r}, not stopped"
            )
        if self.scope != "process":
            new = self._others() - set(frozen)
            if new:
                return FreezeBreach(
                    reason="processes",
                    pid=min(new),
                    stopped_s=held,
                    detail=f"{len(new)} process(es) of its sandbox appeared while it was held stopped",
                )
        return None

    def continue_all(self) -> float:
        """Continue the helpers, then the child; the perf_counter reading just before."""
        frozen, self._frozen = self._frozen, None
        if frozen is not None:
            self._cpu_at_resume = sum(frozen.values())
        t = time.perf_counter()
        for p in frozen or {}:
            if p != self.pid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(p, signal.SIGCONT)
        os.kill(self.pid, signal.SIGCONT)
        return t
