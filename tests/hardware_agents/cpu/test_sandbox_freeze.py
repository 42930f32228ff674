"""The freeze of a driven sandboxed child (hardware_agents/sandbox/freeze.py, SandboxChild) and the seccomp
profile `stoppable`: real children, real signals. The CPU, Triton and Neuron agents all drive
their timing child through this API."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from hardware_agents.sandbox import RanWhileStopped, Sandbox, SandboxPolicy, allow_unisolated, pids_of_uid
from hardware_agents.sandbox.freeze import proc_state

HERE = str(Path(__file__).resolve().parent)


def _policy(**kw: object) -> SandboxPolicy:
    return SandboxPolicy(wall_timeout_s=30, python_path=(HERE,), **kw)  # type: ignore[arg-type]


def test_an_honest_child_stays_frozen_and_resume_returns_the_clock_start() -> None:
    with Sandbox(_policy(no_fork=True)) as box:
        child = box.spawn("sandbox_targets:stop_loop", b"thread")
        try:
            assert child.wait_stopped()
            assert child.isolation()["freeze"] == "process"
            assert {"stoppable", "pdeathsig", "no_fork"} <= set(child.isolation()["seccomp"].split(","))
            for _ in range(20):
                time.sleep(0.002)
                assert child.check_frozen() is None
                before = time.perf_counter()
                t0 = child.resume()
                assert before <= t0 <= time.perf_counter()
                assert child.wait_stopped()
                assert child.last_run_cpu_s is not None and child.last_run_cpu_s > 0
        finally:
            out = child.finish()
    assert out.freeze_breach is None


def test_a_foreign_continue_is_caught_and_the_child_killed() -> None:
    """Whoever continues the child while the parent holds it (here: the test, standing in for a
    timer or an I/O signal), `resume` refuses to go on: RanWhileStopped with the figures."""
    with Sandbox(_policy(no_fork=True)) as box:
        child = box.spawn("sandbox_targets:stop_loop", b"")
        assert child.wait_stopped()
        os.kill(child.pid, signal.SIGCONT)  # it runs its loop and stops itself again
        time.sleep(0.05)
        with pytest.raises(RanWhileStopped, match="ran while it was stopped") as info:
            child.resume()
        assert info.value.breach.reason in ("cpu_time", "continued")
        assert child.freeze_breach is info.value.breach
        out = child.finish()
    assert out.freeze_breach is info.value.breach and out.signal == "SIGKILL"


def test_a_breach_after_the_last_stop_is_in_the_outcome() -> None:
    """The time after the last stop (while the parent reads outputs) is covered by `finish`."""
    with Sandbox(_policy(no_fork=True)) as box:
        child = box.spawn("sandbox_targets:stop_loop", b"")
        assert child.wait_stopped()
        os.kill(child.pid, signal.SIGCONT)
        time.sleep(0.05)
        out = child.finish()
    assert out.freeze_breach is not None


def test_forked_helpers_are_frozen_with_the_child() -> None:
    """Where the sandbox may fork, a stop of the child freezes every process of its uid; a helper
    continued by someone else is a breach."""
    if os.geteuid() != 0:
        pytest.skip("needs root: a uid of its own per sandbox")
    with Sandbox(_policy()) as box:
        child = box.spawn("sandbox_targets:stop_loop", b"fork")
        try:
            assert child.wait_stopped()
            assert child.isolation()["freeze"] == "uid"
            helpers = [p for p in pids_of_uid(box.uid or -1) if p != child.pid]
            assert helpers and all(proc_state(p) in ("T", "t") for p in helpers)
            time.sleep(0.02)
            assert child.check_frozen() is None
            child.resume()
            time.sleep(0.01)
            assert all(proc_state(p) in ("R", "S") for p in helpers)  # continued with the child
            assert child.wait_stopped()
            os.kill(helpers[0], signal.SIGCONT)  # the spinning helper runs on
            time.sleep(0.02)
            with pytest.raises(RanWhileStopped) as info:
                child.resume()
            assert info.value.breach.pid == helpers[0] and info.value.breach.reason == "cpu_time"
        finally:
            child.finish()


def _probe(**kw: object) -> dict[str, int]:
    from sandbox_targets import Probe

    with Sandbox(_policy(**kw)) as box:
        child = box.spawn("sandbox_targets:probe_calls", b"")
        while child.wait_stopped():  # it never stops itself: this waits for its exit
            child.resume()
        out = child.finish()
    assert out.status == "ok", out.error
    return out.decode(Probe).results


def test_the_stoppable_profile_refuses_what_could_wake_or_widen_a_stopped_child() -> None:
    got = _probe()
    assert {
        k: got[k]
        for k in (
            "timer_create",
            "fcntl_setsig",
            "fcntl_setown",
            "sched_setaffinity",
            "prctl_pdeathsig",
            "clone_exit_sigcont",
        )
    } == dict.fromkeys(
        (
            "timer_create",
            "fcntl_setsig",
            "fcntl_setown",
            "sched_setaffinity",
            "prctl_pdeathsig",
            "clone_exit_sigcont",
        ),
        1,
    )  # EPERM
    assert got["fcntl_getfl"] == got["prctl_name"] == got["fork"] == got["thread"] == 0  # honest calls work


def test_each_wall_can_be_taken_down() -> None:
    """Control: without the profile (and the parent-death lock) the same calls succeed, so the
    test above can fail."""
    with allow_unisolated(True):
        got = _probe(stoppable=False, lock_pdeathsig=False)
    assert (
        got["timer_create"] == got["fcntl_setsig"] == got["sched_setaffinity"] == got["prctl_pdeathsig"] == 0
    )
