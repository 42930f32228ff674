"""Kernels that never finish end as `timeout`; kernels that try to leave processes behind cannot
(the kernel's process may create threads, not processes); nothing is left behind."""

from __future__ import annotations

import re

from cpu_helpers import c_solution
from cpu_helpers import c_solution_source_scale_shift as src

from accelopt.problem import Problem
from hardware_agents import sandbox
from hardware_agents.cpu import CpuAgent

SAY_UID = 'fprintf(stderr, "SANDBOX_UID=%d\\n", (int)getuid()); fflush(stderr);'


def _leftovers(log: str, isolation: dict[str, str] | None = None) -> list[int]:
    """Processes still running under the kernel's uid (other runs use other uids): the one it
    printed (a failed profile keeps the kernel's stderr) or the one on record."""
    m = re.search(r"SANDBOX_UID=(\d+)", log)
    assert m or (isolation and "uid" in isolation), log
    uid = int(m.group(1)) if m else int((isolation or {})["uid"])
    if uid == 0:  # not root: no private uid, the process group kill is all there is
        return []
    return sandbox.pids_of_uid(uid)


def test_infinite_loop_times_out(cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    loop = src(setup=SAY_UID + "for (volatile int s = 1; s;) {}")
    prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, loop), timeout_s=5.0)
    assert prof.status == "timeout", prof.log
    assert "wall-clock timeout after 5.0 s" in prof.log  # the requested timeout is the one applied
    # killed at the timeout, not left to run: a generous bound (about 5 s when idle)
    assert 5.0 <= prof.counters["sandbox_wall_s"] < 30
    assert not _leftovers(prof.log)


def test_fork_bomb_is_contained_and_reaped(cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    bomb = src(setup=SAY_UID + "for (;;) { fork(); }")  # every fork fails; the loop never ends
    prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, bomb), timeout_s=5.0)
    assert prof.status == "timeout", prof.log
    assert not _leftovers(prof.log)


def test_background_process_that_would_escape_the_group_cannot_start(
    cpu_agent: CpuAgent, scale_shift: Problem
) -> None:
    """A kernel that tries to daemonize (fork + setsid) a child: the fork is refused, its
    correct results stand, and nothing runs under its uid afterwards."""
    daemon = src(
        "out[i] = forked ? -1.0f : 2.0f * x[i] + 1.0f;",
        prelude="static int started = 0, forked = 0;",
        setup=SAY_UID + "if (!started) { started = 1; pid_t p = fork(); if (p == 0) { setsid(); "
        "for (;;) pause(); } forked = p > 0; }",
    )
    prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, daemon))
    assert prof.status == "passed", prof.log
    assert "stray_processes" not in prof.counters
    assert not _leftovers(prof.log, prof.isolation)
