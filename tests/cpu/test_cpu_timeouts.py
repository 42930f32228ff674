"""Kernels that never finish: infinite loops and fork bombs end as `timeout`, leaving nothing behind."""

from __future__ import annotations

import time

from cpu_helpers import c_solution
from cpu_helpers import c_solution_source_scale_shift as src

from accelopt.problem import Problem
from hardware_agents import sandbox
from hardware_agents.cpu import CpuAgent


def _sandbox_processes() -> list[int]:
    """Processes still running under any sandbox uid."""
    import os

    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            uids = sandbox._proc_uids(entry)
            if uids and any(sandbox._UID_BASE <= u < sandbox._UID_BASE + sandbox._UID_SPAN for u in uids):
                out.append(int(entry))
    return out


def test_infinite_loop_times_out(cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    t0 = time.perf_counter()
    prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, src(setup="for (volatile int s = 1; s;) {}")),
                             timeout_s=2.0)
    assert prof.status == "timeout", prof.log
    assert "wall-clock timeout" in prof.log
    assert time.perf_counter() - t0 < 15
    assert not _sandbox_processes()


def test_fork_bomb_is_contained_and_reaped(cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    bomb = src(setup="for (;;) { fork(); }")
    prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, bomb), timeout_s=2.0)
    assert prof.status == "timeout", prof.log
    assert not _sandbox_processes()


def test_background_process_that_escapes_the_group_is_killed(cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    """A kernel that daemonizes (setsid) a child and returns correct results is still caught."""
    daemon = src("out[i] = 2.0f * x[i] + 1.0f;",
                 prelude="static int started = 0;",
                 setup="if (!started) { started = 1; if (fork() == 0) { setsid(); for (;;) pause(); } }")
    prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, daemon))
    assert prof.status == "runtime_error", prof.log
    assert "left" in prof.log and "process" in prof.log
    assert not _sandbox_processes()
