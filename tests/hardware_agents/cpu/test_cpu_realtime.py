"""Timed intervals at real-time priority (hardware_agents/sandbox/realtime.py): real children,
real scheduling policies. On a host that refuses real-time priority (not root, throttling off)
the tests that need it are skipped with the reason; CI runs as root, where it is available."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cpu_helpers import c_solution, kernel_output
from cpu_helpers import c_solution_source_scale_shift as src

from accelopt.problem import Problem
from hardware_agents.cpu import CpuAgent
from hardware_agents.sandbox import Sandbox, SandboxPolicy, realtime
from hardware_agents.sandbox.driven import SandboxChild

HERE = str(Path(__file__).resolve().parent)
REASON = realtime.unavailable_reason()
needs_rt = pytest.mark.skipif(REASON is not None, reason=f"real-time priority unavailable here: {REASON}")


# an honest scale_shift kernel that prints its scheduling policy (reset-on-fork flag masked) in
# its first call: the correctness batch's
SAYS_ITS_POLICY = src(
    prelude="#include <sched.h>",
    setup='static int said; if (!said++) { fprintf(stderr, "POLICY=%d\\n", '
    "sched_getscheduler(0) & ~0x40000000); fflush(stderr); }",
)


@contextlib.contextmanager
def _stopped_child(payload: bytes, *, no_fork: bool = True) -> Iterator[SandboxChild]:
    """A `sandbox_targets:stop_loop` child (its payload), at its first stop; ended on the way out."""
    policy = SandboxPolicy(wall_timeout_s=30, python_path=(HERE,), no_fork=no_fork)
    with Sandbox(policy) as box:
        child = box.spawn("sandbox_targets:stop_loop", payload)
        try:
            assert child.wait_stopped()
            yield child
        finally:
            child.finish()


def _base(policy: int) -> int:
    return policy & ~os.SCHED_RESET_ON_FORK


@needs_rt
def test_the_child_is_real_time_only_while_it_runs_and_the_parent_gets_its_policy_back() -> None:
    own = os.sched_getscheduler(0), os.sched_getparam(0).sched_priority
    with _stopped_child(b"thread") as child:  # two threads, both running
        window = child.time_at_realtime()
        threads = [int(t) for t in os.listdir(f"/proc/{child.pid}/task")]
        assert len(threads) >= 2
        for _ in range(5):
            child.resume()
            # between the continue and the wait: the interval's policies (the child may
            # already have stopped itself; they are reset only once the stop is taken)
            for tid in threads:  # no_fork: the threads it makes inherit it (see the next test)
                assert os.sched_getscheduler(tid) == os.SCHED_FIFO
                assert os.sched_getparam(tid).sched_priority == realtime.CHILD_PRIORITY
            assert _base(os.sched_getscheduler(0)) == os.SCHED_FIFO
            assert os.sched_getparam(0).sched_priority == realtime.PARENT_PRIORITY
            assert child.wait_stopped()
            for tid in threads:  # held stopped: ordinary again
                assert os.sched_getscheduler(tid) == os.SCHED_OTHER
            assert (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority) == own
        assert window.used == 5 and window.describe() == "real-time priority"
        assert child.isolation()["timing"] == "real-time priority"
    out = child.finish()  # (its outcome, kept)
    assert out.isolation["timing"] == "real-time priority" and out.freeze_breach is None


@needs_rt
def test_threads_made_inside_an_interval_have_its_priority_and_lose_it_at_the_stop() -> None:
    """A kernel that starts its threads in every call is timed as one that keeps a pool: in a
    child that cannot fork they inherit the interval's priority, and are reset with the others
    at its stop. A child that may fork gets reset-on-fork: what it makes starts ordinary."""
    for no_fork, expected in ((True, os.SCHED_FIFO), (False, os.SCHED_OTHER)):
        with _stopped_child(b"spawn", no_fork=no_fork) as child:
            child.time_at_realtime()
            before = set(os.listdir(f"/proc/{child.pid}/task"))
            child.resume()
            deadline = time.monotonic() + 10
            while not set(os.listdir(f"/proc/{child.pid}/task")) - before:  # its new thread
                assert time.monotonic() < deadline
                time.sleep(0.01)
            (new,) = {int(t) for t in set(os.listdir(f"/proc/{child.pid}/task")) - before}
            assert _base(os.sched_getscheduler(new)) == expected, no_fork
            assert child.wait_stopped()
            for tid in os.listdir(f"/proc/{child.pid}/task"):  # held stopped: every one ordinary
                assert os.sched_getscheduler(int(tid)) == os.SCHED_OTHER


@needs_rt
def test_an_honest_kernel_is_timed_at_real_time_priority(cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    with kernel_output(cpu_agent) as output:
        prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, SAYS_ITS_POLICY))
    assert prof.status == "passed", prof.log
    assert "POLICY=1" in output[0], output  # SCHED_FIFO inside its first call (correctness)
    assert prof.isolation["timing"] == "real-time priority"
    # every command of the profile ran in its own interval: the correctness batch, the
    # handshakes, the sizing batch and the timed batches at least
    assert prof.counters["realtime_intervals"] >= prof.counters["batches"] + 2


def test_with_real_time_turned_off_the_profile_says_so(
    cpu_agent: CpuAgent, scale_shift: Problem, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(realtime.OFF_ENV, "0")
    realtime.unavailable_reason.cache_clear()
    try:
        with kernel_output(cpu_agent) as output:
            prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, SAYS_ITS_POLICY))
    finally:
        monkeypatch.delenv(realtime.OFF_ENV)
        realtime.unavailable_reason.cache_clear()
    assert prof.status == "passed", prof.log
    assert "POLICY=0" in output[0], output
    assert prof.isolation["timing"] == f"ordinary priority ({realtime.OFF_ENV}=0)"
    assert prof.counters["realtime_intervals"] == 0


def test_without_real_time_throttling_it_is_not_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A spinning real-time kernel could hold a host without throttling: then no real time."""
    (tmp_path / "sched_rt_runtime_us").write_text("-1\n")
    (tmp_path / "sched_rt_period_us").write_text("1000000\n")
    monkeypatch.setattr(realtime, "KERNEL_SETTINGS", tmp_path)
    realtime.unavailable_reason.cache_clear()
    try:
        assert realtime.unavailable_reason() == "real-time throttling is off (sched_rt_runtime_us=-1)"
        window = realtime.RealtimeWindow(os.getpid())
        assert not window.enter() and window.used == 0
        assert window.describe().startswith("ordinary priority (real-time throttling is off")
    finally:
        monkeypatch.undo()
        realtime.unavailable_reason.cache_clear()


@needs_rt
def test_a_kernel_spinning_at_real_time_is_still_killed_at_its_deadline(
    cpu_agent: CpuAgent, scale_shift: Problem
) -> None:
    """Every thread spins inside its call: the parent's watchdog, above the child, ends it."""
    spin = src(body="for (volatile int s = 1; s;) {} out[i] = 0;")
    t0 = time.monotonic()
    prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, spin), timeout_s=4.0)
    assert prof.status == "timeout", prof.log
    assert time.monotonic() - t0 < 30  # about 4 s when idle
    assert prof.isolation["timing"] == "real-time priority"


@needs_rt
def test_an_interval_past_its_budget_is_demoted_and_a_spent_child_gets_no_more() -> None:
    """A kernel that spins holds the host's cores for a budget, not for its whole deadline:
    past `interval_budget_s` its threads go back to ordinary ones while it still runs (a timer
    above the child), and once the child has spent `child_budget_s` its intervals run ordinary;
    the profile's isolation record says both."""
    with _stopped_child(b"slow") as child:  # each interval works 1 s
        window = child.time_at_realtime()
        window.interval_budget_s, window.child_budget_s = 0.3, 0.5
        child.resume()
        assert os.sched_getscheduler(child.pid) == os.SCHED_FIFO
        time.sleep(0.6)  # past the interval's budget, before its second of work ends
        assert os.sched_getscheduler(child.pid) == os.SCHED_OTHER
        assert child.wait_stopped()
        assert window.demoted == 1 and 0.25 <= window.spent_s < 0.9
        child.resume()  # 0.2 s of the child's budget left: cut by it, not by the interval's
        time.sleep(0.4)
        assert os.sched_getscheduler(child.pid) == os.SCHED_OTHER
        assert child.wait_stopped()
        assert window.demoted == 2 and window.spent_s >= 0.5
        child.resume()  # spent: not real-time at all
        assert os.sched_getscheduler(child.pid) == os.SCHED_OTHER
        assert child.wait_stopped()
        assert (window.used, window.over_budget) == (2, 1)
        assert window.describe() == (
            "real-time priority (2 of 2 intervals demoted after 0.3 s; "
            "1 at ordinary priority past the child's 0.5 s)"
        )
    out = child.finish()  # (its outcome, kept)
    assert out.isolation["timing"].startswith("real-time priority (2 of 2 intervals demoted")


@needs_rt
def test_short_intervals_are_never_demoted_whatever_the_child_lives() -> None:
    """The budget is per interval: a child that lives well past it, in short intervals, keeps
    real time in every one; and a budget timer that fires after its interval ended (too late
    to be cancelled) does not cut the next one."""
    with _stopped_child(b"") as child:
        window = child.time_at_realtime()
        window.interval_budget_s = 0.2
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.0:  # 5 budgets of life, in short intervals
            child.resume()
            assert child.wait_stopped()
            time.sleep(0.02)
        assert window.used > 10 and window.demoted == 0, (window.used, window.demoted)
        child.resume()
        window.demote(window.interval - 1)  # the last interval's timer, late
        assert os.sched_getscheduler(child.pid) == os.SCHED_FIFO and window.demoted == 0
        assert child.wait_stopped()


@needs_rt
def test_timed_batches_cut_by_the_budget_are_counted_and_the_profile_says_so(
    cpu_agent: CpuAgent, scale_shift: Problem, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An honest kernel whose batches outlast the interval budget (here a budget far below
    any batch) is still judged, and what its figure was timed at is on the record."""
    monkeypatch.setattr(realtime, "INTERVAL_BUDGET_S", 1e-4)
    prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, src()))
    assert prof.status == "passed", prof.log
    assert prof.counters["timed_batches_ordinary"] >= 1
    assert prof.counters["realtime_demoted"] >= prof.counters["timed_batches_ordinary"]
    assert (
        prof.isolation["timing"].startswith("real-time priority (")
        and "demoted after 0.0001 s" in (prof.isolation["timing"])
    )


@needs_rt
def test_a_kernel_the_budget_timer_cannot_reach_is_killed_by_the_kernels_own_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The backstop that needs no thread of ours (RLIMIT_RTTIME): with the budget timer out of
    the way, as if it were starved, a thread that spins on at real time is killed by the
    kernel at its limit, long before the child's deadline."""
    monkeypatch.setattr(realtime, "INTERVAL_BUDGET_S", 1000.0)
    monkeypatch.setattr(realtime, "CHILD_BUDGET_S", 1000.0)
    monkeypatch.setattr(realtime, "RTTIME_LIMIT_S", 1.0)
    with _stopped_child(b"forever") as child:
        child.time_at_realtime()
        t0 = time.monotonic()
        child.resume()
        assert not child.wait_stopped()  # it ended
        assert time.monotonic() - t0 < 10 and not child.timed_out
        assert child.exit_status is not None and os.WIFSIGNALED(child.exit_status)
        assert os.WTERMSIG(child.exit_status) == 9
