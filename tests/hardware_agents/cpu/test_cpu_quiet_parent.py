"""The parent of a CPU profile keeps off the cores while the kernel is timed.

numpy's BLAS workers busy-wait after every call; a reference matmul between two timed
batches used to leave one spinning through the next batch, so a two-thread kernel ran on
one core (hardware_agents/quiet.py). Real numpy, real threads, a real profile.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from cpu_helpers import c_solution, c_solution_source_scale_shift

import suites
from accelopt.problem import Problem
from hardware_agents import quiet
from hardware_agents.cpu import CpuAgent


def test_blas_is_single_threaded_inside_and_restored_after() -> None:
    before = quiet.blas_threads()
    with quiet.single_threaded_blas():
        assert quiet.blas_threads() == 1
        with quiet.single_threaded_blas():  # nested: still one thread
            assert quiet.blas_threads() == 1
        assert quiet.blas_threads() == 1  # the inner exit does not lift the outer limit
    assert quiet.blas_threads() == before


def test_settle_waits_for_a_spinning_blas_worker() -> None:
    if quiet.blas_threads() < 2:
        pytest.skip("numpy's BLAS runs one thread here: no worker to spin")
    a = np.random.default_rng(0).random((400, 400))
    for _ in range(3):
        a @ a  # a two-thread sgemm: its worker then busy-waits for a while
    assert quiet.running_threads(), "expected numpy's BLAS worker to be spinning right after a call"
    waited = quiet.settle(max_s=2.0)
    assert 0 < waited < 2.0
    assert not quiet.running_threads()


def test_no_batch_is_timed_while_a_parent_thread_runs(cpu_agent: CpuAgent) -> None:
    """Right after a two-thread sgemm here (its worker spinning), a profile of a two-thread
    kernel: every timed batch starts with the parent's other threads stopped."""
    a = np.random.default_rng(0).random((400, 400))
    a @ a
    p = suites.get_problem("cpu_v2/matmul")
    prof = cpu_agent.profile(p, p.baseline)
    assert prof.status == "passed", prof.log
    assert prof.counters["parent_busy_batches"] == 0.0
    assert prof.counters["batches"] >= 3


def _nice_of(pid: int) -> dict[int, int]:
    """The nice value of each thread of `pid` (/proc's stat, field 19)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError, IndexError):
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_bytes()
            out[int(tid)] = int(stat.rsplit(b")", 1)[1].split()[16])
    return out


CHILD = """
import threading, time, sys
stop = threading.Event()
threading.Thread(target=stop.wait, daemon=True).start()
time.sleep(float(sys.argv[1]))
threading.Thread(target=stop.wait, daemon=True).start()  # started inside the block
print("started", flush=True)
time.sleep(60)
"""


def test_timing_priority_raises_the_timing_thread_and_the_kernels_then_gives_them_back() -> None:
    """`quiet.TimingPriority`: inside the block the calling thread and every thread of the
    kernel's process run at the given nice value (a thread the kernel starts meanwhile
    inherits it); another thread of ours is untouched; after the block (also after an error)
    the caller has its old value and every thread of the kernel, the new one too, the value
    the kernel had. None leaves everything alone. A kernel raised longer than `max_s` gets its
    priority back then. Needs root (CAP_SYS_NICE), as the agent does."""
    if os.geteuid() != 0:
        pytest.skip("raising a priority needs CAP_SYS_NICE (root here)")
    me = threading.get_native_id()
    before = os.getpriority(os.PRIO_PROCESS, me)
    go, tids = threading.Event(), []

    def wait() -> None:
        tids.append(threading.get_native_id())
        go.wait()

    other = threading.Thread(target=wait)
    other.start()
    kernel = subprocess.Popen([sys.executable, "-c", CHILD, "0.5"], stdout=subprocess.PIPE, text=True)
    try:
        while len(_nice_of(kernel.pid)) < 2:
            time.sleep(0.01)
        spawned = os.getpriority(os.PRIO_PROCESS, kernel.pid)
        threads_of = lambda: sorted(_nice_of(kernel.pid))  # noqa: E731
        with quiet.TimingPriority(-20, threads_of) as raised:
            assert raised.applied == -20 and os.getpriority(os.PRIO_PROCESS, me) == -20
            assert os.getpriority(os.PRIO_PROCESS, tids[0]) == before  # another thread of ours
            assert kernel.stdout is not None and kernel.stdout.readline().strip() == "started"
            inside = _nice_of(kernel.pid)
        assert len(inside) == 3 and set(inside.values()) == {-20}, inside
        assert os.getpriority(os.PRIO_PROCESS, me) == before
        after = _nice_of(kernel.pid)
        assert after.keys() == inside.keys() and set(after.values()) == {spawned}, after
        assert raised.dropped_after_s is None
        with pytest.raises(RuntimeError), quiet.TimingPriority(-10, threads_of):
            raise RuntimeError("the block fails")
        assert os.getpriority(os.PRIO_PROCESS, me) == before
        assert set(_nice_of(kernel.pid).values()) == {spawned}
        with quiet.TimingPriority(None, threads_of) as raised:
            assert raised.applied is None and os.getpriority(os.PRIO_PROCESS, me) == before
            assert set(_nice_of(kernel.pid).values()) == {spawned}
        # raised past its limit: the kernel is given its priority back at once, the caller at the end
        with quiet.TimingPriority(-20, threads_of, max_s=0.2) as raised:
            assert set(_nice_of(kernel.pid).values()) == {-20}
            time.sleep(0.6)
            assert set(_nice_of(kernel.pid).values()) == {spawned}
            assert os.getpriority(os.PRIO_PROCESS, me) == -20
        assert raised.dropped_after_s is not None and 0.2 <= raised.dropped_after_s < 0.6
        assert os.getpriority(os.PRIO_PROCESS, me) == before
    finally:
        go.set()
        other.join()
        kernel.kill()
        kernel.wait()


class KernelNice(threading.Thread):
    """Watches the sandboxed kernel servers this process starts: every nice value their
    threads were seen at."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.seen: set[int] = set()
        self.done = threading.Event()

    def run(self) -> None:
        me = os.getpid()
        while not self.done.is_set():
            for d in Path("/proc").glob("[0-9]*"):
                if self._server(d, me):
                    with contextlib.suppress(OSError):  # it ended
                        self.seen.update(_nice_of(int(d.name)).values())
            time.sleep(0.005)

    @staticmethod
    def _server(d: Path, me: int) -> bool:
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (d / "stat").read_bytes().rsplit(b")", 1)[1].split()
            return int(stat[1]) == me and b"sandbox.child" in (d / "cmdline").read_bytes()
        return False


def test_a_timed_kernel_and_its_clock_run_raised_only_while_timed(cpu_agent: CpuAgent) -> None:
    """The agent's default (`timing_nice` -20): the thread that times the batches
    (`timing_nice` in the counters) and the kernel server's threads (watched from outside)
    run raised while timed, the kernel at the host's priority before (checked, compiled) and
    the caller's thread given its priority back. With `timing_nice=None` nothing is raised."""
    if os.geteuid() != 0:
        pytest.skip("raising a priority needs CAP_SYS_NICE (root here)")
    me = threading.get_native_id()
    before = os.getpriority(os.PRIO_PROCESS, me)
    p = suites.get_problem("cpu_v2/silu")
    for agent, raised in (
        (cpu_agent, True),
        (
            CpuAgent(
                cache_dir=cpu_agent.cache_dir,
                calibrate_if_missing=False,
                timing_budget_s=0.08,
                max_reruns=1,
                timing_nice=None,
            ),
            False,
        ),
    ):
        watch = KernelNice()
        watch.start()
        try:
            prof = agent.profile(p, p.baseline)
        finally:
            watch.done.set()
            watch.join()
            if not raised:
                agent.close()
        assert prof.status == "passed", prof.log
        assert os.getpriority(os.PRIO_PROCESS, me) == before
        if raised:
            assert prof.counters["timing_nice"] == -20.0
            assert watch.seen == {before, -20}, watch.seen
        else:
            assert "timing_nice" not in prof.counters and watch.seen == {before}, watch.seen


def test_a_kernel_that_spins_once_timed_holds_the_raised_priority_for_a_bounded_time(
    cpu_agent: CpuAgent, scale_shift: Problem, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Honest for the calls that check it, then spinning on every core once timed: the
    raise ends after `RAISED_MAX_S` (here 1 s; the counter says when), not at the kernel's
    time limit, and the verdict is the time limit's."""
    if os.geteuid() != 0:
        pytest.skip("raising a priority needs CAP_SYS_NICE (root here)")
    monkeypatch.setattr(quiet, "RAISED_MAX_S", 1.0)
    source = c_solution_source_scale_shift(
        prelude="static int calls = 0;",
        setup='if (++calls > 6) { _Pragma("omp parallel") for (volatile long s = 0;; s++) {} }',
    )
    prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, source), timeout_s=5.0)
    assert prof.status == "timeout", prof.log
    assert 1.0 <= prof.counters["timing_nice_dropped_after_s"] < 4.0, prof.counters
