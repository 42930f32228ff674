"""Kernels that never finish: infinite loops and fork bombs end as `timeout`, leaving nothing behind."""

from __future__ import annotations

import re

from cpu_helpers import c_solution
from cpu_helpers import c_solution_source_scale_shift as src

from accelopt.problem import Problem
from hardware_agents import sandbox
from hardware_agents.cpu import CpuAgent

SAY_UID = 'fprintf(stderr, "SANDBOX_UID=%d\\n", (int)getuid()); fflush(stderr);'


def _leftovers(log: str) -> list[int]:
    """Processes still running under the uid the kernel reported (other runs use other uids)."""
    m = re.search(r"SANDBOX_UID=(\d+)", log)
    assert m, log
    uid = int(m.group(1))
    if uid == 0:  # not root: no private uid, the process group kill is all there is
        return []
    return sandbox.pids_of_uid(uid)


def test_infinite_loop_times_out(cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    loop = src(setup=SAY_UID + "for (volatile int s = 1; s;) {}")
    prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, loop), timeout_s=2.0)
    assert prof.status == "timeout", prof.log
    assert "wall-clock timeout after 2.0 s" in prof.log  # the requested timeout is the one applied
    # killed at the timeout, not left to run: a generous bound (about 2 s when idle)
    assert 2.0 <= prof.counters["sandbox_wall_s"] < 20
    assert not _leftovers(prof.log)


def test_fork_bomb_is_contained_and_reaped(cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    bomb = src(setup=SAY_UID + "for (;;) { fork(); }")
    prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, bomb), timeout_s=2.0)
    assert prof.status == "timeout", prof.log
    assert not _leftovers(prof.log)


def test_background_process_that_escapes_the_group_is_killed(cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    """A kernel that daemonizes (setsid) a child and returns correct results is still caught."""
    daemon = src("out[i] = 2.0f * x[i] + 1.0f;",
                 prelude="static int started = 0;",
                 setup=SAY_UID + "if (!started) { started = 1; if (fork() == 0) { setsid(); for (;;) pause(); } }")
    prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, daemon))
    assert prof.status == "runtime_error", prof.log
    assert "left" in prof.log and "process" in prof.log
    assert not _leftovers(prof.log)
