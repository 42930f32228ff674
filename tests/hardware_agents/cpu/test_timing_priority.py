"""A CPU kernel's timed batches run at a raised priority, and only they
(`hardware_agents/timing_priority.py`): other work on the host stays out of the figure, and
a kernel that spins outside its timed batches, or for too long inside one, does so at the
host's priority. Real processes and threads, real priorities (/proc), a real profile; the
raise needs CAP_SYS_NICE (root here), and the tests that need it say so where it is missing."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cpu_helpers import c_solution, c_solution_source_scale_shift

import suites
from accelopt.problem import Problem
from hardware_agents import timing_priority
from hardware_agents.cpu import CpuAgent
from hardware_agents.timing_priority import TimingPriority, can_raise

needs_nice = pytest.mark.skipif(not can_raise(), reason="raising a priority needs CAP_SYS_NICE")


def nice_of_threads(pid: int) -> dict[int, int]:
    """The nice value of each thread of `pid` (/proc's stat, field 19)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError, IndexError):
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_bytes()
            out[int(tid)] = int(stat.rsplit(b")", 1)[1].split()[16])
    return out


# a stand-in for a kernel's process: two threads, a third started when told (a line on stdin)
KERNEL = """
import sys, threading, time
stop = threading.Event()
threading.Thread(target=stop.wait, daemon=True).start()
print("ready", flush=True)
sys.stdin.readline()
threading.Thread(target=stop.wait, daemon=True).start()
print("started", flush=True)
time.sleep(120)
"""


@contextlib.contextmanager
def kernel_process() -> Iterator[subprocess.Popen[str]]:
    p = subprocess.Popen(
        [sys.executable, "-c", KERNEL], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        yield p
    finally:
        p.kill()
        p.wait()


def start_thread(p: subprocess.Popen[str]) -> None:
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write("go\n")
    p.stdin.flush()
    assert p.stdout.readline().strip() == "started"


@needs_nice
def test_a_batch_raises_the_caller_and_every_kernel_thread_then_gives_them_back() -> None:
    """Inside a batch: the calling thread and every thread of the kernel at the raised value,
    a thread the kernel starts meanwhile too (it inherits it); another thread of ours
    untouched. After it (also after an error): the caller's old value, and the kernel's, for
    every thread, the one started inside too."""
    me = threading.get_native_id()
    before = os.getpriority(os.PRIO_PROCESS, me)
    go, tids = threading.Event(), []

    def wait() -> None:
        tids.append(threading.get_native_id())
        go.wait()

    other = threading.Thread(target=wait)
    other.start()
    try:
        with kernel_process() as k:
            spawned = os.getpriority(os.PRIO_PROCESS, k.pid)
            raised = TimingPriority(-20, lambda: sorted(nice_of_threads(k.pid)), k.kill)
            with raised.batch():
                assert os.getpriority(os.PRIO_PROCESS, me) == -20
                assert os.getpriority(os.PRIO_PROCESS, tids[0]) == before  # another thread of ours
                start_thread(k)
                inside = nice_of_threads(k.pid)
            assert len(inside) == 3 and set(inside.values()) == {-20}, inside
            assert os.getpriority(os.PRIO_PROCESS, me) == before
            after = nice_of_threads(k.pid)
            assert after.keys() == inside.keys() and set(after.values()) == {spawned}, after
            with pytest.raises(RuntimeError), raised.batch():
                raise RuntimeError("the batch fails")
            assert os.getpriority(os.PRIO_PROCESS, me) == before
            assert set(nice_of_threads(k.pid).values()) == {spawned}
            assert (raised.applied, raised.batches, raised.dropped_after_s) == (-20, 2, None)
            plain = TimingPriority(None, lambda: sorted(nice_of_threads(k.pid)), k.kill)
            with plain.batch():
                assert os.getpriority(os.PRIO_PROCESS, me) == before
                assert set(nice_of_threads(k.pid).values()) == {spawned}
            assert plain.applied is None and plain.batches == 0
    finally:
        go.set()
        other.join()


@needs_nice
def test_a_batch_past_its_limit_gives_the_kernel_back_and_no_later_batch_is_raised() -> None:
    me = threading.get_native_id()
    before = os.getpriority(os.PRIO_PROCESS, me)
    with kernel_process() as k:
        spawned = os.getpriority(os.PRIO_PROCESS, k.pid)
        raised = TimingPriority(-20, lambda: sorted(nice_of_threads(k.pid)), k.kill, max_s=0.2)
        with raised.batch():
            assert set(nice_of_threads(k.pid).values()) == {-20}
            time.sleep(0.6)
            assert set(nice_of_threads(k.pid).values()) == {spawned}  # given back while it runs
            assert os.getpriority(os.PRIO_PROCESS, me) == -20  # the caller only waits
        assert raised.dropped_after_s is not None and 0.2 <= raised.dropped_after_s < 0.6
        assert os.getpriority(os.PRIO_PROCESS, me) == before and not raised.stuck
        with raised.batch():  # off for the rest of the profile
            assert set(nice_of_threads(k.pid).values()) == {spawned}
            assert os.getpriority(os.PRIO_PROCESS, me) == before
        assert raised.batches == 1 and k.poll() is None


@needs_nice
def test_a_kernel_that_cannot_be_given_back_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel that keeps starting threads faster than censuses can give them back (each
    inherits the raise) cannot be reproduced on demand: `give_back` reporting a thread still
    raised after its passes stands in for it (a stand-in, said so). The kernel is killed."""
    monkeypatch.setattr(timing_priority, "give_back", lambda threads, nice, passes=8: False)
    with kernel_process() as k:
        raised = TimingPriority(-20, lambda: sorted(nice_of_threads(k.pid)), k.kill, max_s=0.2)
        with raised.batch():
            k.wait(timeout=5)
        assert raised.stuck and k.returncode == -9


def test_a_refused_raise_leaves_every_priority_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without CAP_SYS_NICE (setpriority refused, as for a user without it): the batch runs at
    the old priorities, says why, and no later batch tries again. Runs anywhere."""
    calls: list[tuple[int, int]] = []

    def refuse(which: int, who: int, prio: int) -> None:
        calls.append((who, prio))
        raise PermissionError(errno.EACCES, "Permission denied")

    me = threading.get_native_id()
    before = os.getpriority(os.PRIO_PROCESS, me)
    with kernel_process() as k:
        spawned = os.getpriority(os.PRIO_PROCESS, k.pid)
        raised = TimingPriority(-20, lambda: sorted(nice_of_threads(k.pid)), k.kill)
        with monkeypatch.context() as m:
            m.setattr(timing_priority.os, "setpriority", refuse)
            with raised.batch():
                assert os.getpriority(os.PRIO_PROCESS, me) == before
            tried = len(calls)
            with raised.batch():
                pass
        assert raised.applied is None and raised.refused == "nice -20: Permission denied"
        assert tried >= 1 and len(calls) == tried  # the second batch did not try again
        assert set(nice_of_threads(k.pid).values()) == {spawned}


class KernelNice(threading.Thread):
    """Watches the sandboxed kernel servers this process starts: (seconds since the start, pid,
    the set of its threads' nice values) every few milliseconds."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, int, frozenset[int]]] = []
        self.done = threading.Event()

    def run(self) -> None:
        me, t0 = os.getpid(), time.monotonic()
        while not self.done.is_set():
            for d in Path("/proc").glob("[0-9]*"):
                if self._server(d, me):
                    with contextlib.suppress(OSError):  # it ended
                        values = frozenset(nice_of_threads(int(d.name)).values())
                        if values:
                            self.samples.append((time.monotonic() - t0, int(d.name), values))
            time.sleep(0.003)

    @staticmethod
    def _server(d: Path, me: int) -> bool:
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (d / "stat").read_bytes().rsplit(b")", 1)[1].split()
            return int(stat[1]) == me and b"sandbox.child" in (d / "cmdline").read_bytes()
        return False

    def values(self) -> set[int]:
        return {n for _, _, v in self.samples for n in v}

    def lowered_after_raised(self) -> bool:
        """Whether some kernel was seen back at a higher nice value after it was seen raised."""
        for pid in {p for _, p, _ in self.samples}:
            seq = [min(v) for _, p, v in self.samples if p == pid]
            first = next((i for i, n in enumerate(seq) if n == -20), None)
            if first is not None and any(n > -20 for n in seq[first:]):
                return True
        return False


@contextlib.contextmanager
def watching() -> Iterator[KernelNice]:
    w = KernelNice()
    w.start()
    try:
        yield w
    finally:
        w.done.set()
        w.join()


@needs_nice
def test_a_profile_raises_its_timed_batches_only(cpu_agent: CpuAgent) -> None:
    """The agent's default (`timing_nice` -20), a real profile watched from outside: the
    kernel server is seen raised and, between its batches, back at the host's priority (the
    parent's checks); the counters say so; the caller's thread keeps its priority. With
    `timing_nice=None` nothing is raised."""
    me = threading.get_native_id()
    before = os.getpriority(os.PRIO_PROCESS, me)
    p = suites.get_problem("cpu_v2/silu")
    with watching() as w:
        prof = cpu_agent.profile(p, p.baseline)
    assert prof.status == "passed", prof.log
    assert prof.counters["timing_nice"] == -20.0 and prof.counters["timing_raised_batches"] >= 4
    assert w.values() == {before, -20} and w.lowered_after_raised(), w.samples[-20:]
    assert os.getpriority(os.PRIO_PROCESS, me) == before
    plain = CpuAgent(
        cache_dir=cpu_agent.cache_dir,
        calibrate_if_missing=False,
        timing_budget_s=0.08,
        max_reruns=1,
        timing_nice=None,
    )
    try:
        with watching() as w:
            prof = plain.profile(p, p.baseline)
    finally:
        plain.close()
    assert prof.status == "passed", prof.log
    assert "timing_nice" not in prof.counters and w.values() == {before}


def test_a_profile_without_the_right_to_raise_is_timed_as_before(
    cpu_agent: CpuAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """setpriority refused (a user without CAP_SYS_NICE): the profile passes, unraised, and
    has no `timing_nice` counter. Runs anywhere."""

    def refuse(which: int, who: int, prio: int) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(timing_priority.os, "setpriority", refuse)
    p = suites.get_problem("cpu_v2/silu")
    prof = cpu_agent.profile(p, p.baseline)
    assert prof.status == "passed", prof.log
    assert "timing_nice" not in prof.counters and "timing_raised_batches" not in prof.counters


@needs_nice
def test_a_kernel_that_spins_once_timed_is_raised_for_a_bounded_time(
    cpu_agent: CpuAgent, scale_shift: Problem, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Honest for the calls that check it, then spinning on every core once timed: its batch
    gives it the host's priority back after `RAISED_MAX_S` (here 1 s; the counter says when),
    while it still spins (seen from outside), not at its time limit; the verdict is the time
    limit's."""
    monkeypatch.setattr(timing_priority, "RAISED_MAX_S", 1.0)
    source = c_solution_source_scale_shift(
        prelude="static int calls = 0;",
        setup='if (++calls > 6) { _Pragma("omp parallel") for (volatile long s = 0;; s++) {} }',
    )
    with watching() as w:
        prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, source), timeout_s=5.0)
    assert prof.status == "timeout", prof.log
    assert 1.0 <= prof.counters["timing_nice_dropped_after_s"] < 4.0, prof.counters
    assert w.lowered_after_raised(), w.samples[-20:]
