"""The CPU adversarial corpus (tests/hardware_agents/adversarial/cpu/): every hostile kernel gets the status
its file names, through the real agent (gcc, the sandbox, the kernel server, the judge).

The probes that spoil their output when a wall lets them through (sockets, fork, /proc,
other runs' files, timers and signals that end a stop, a wider CPU mask, a full work dir, a
cleared parent-death signal) are run a second time with that wall down, where they must be
caught (by the check behind the wall where there is one: the freeze check, the cores check):
so each of those tests can fail.

A probe whose trick could silently do nothing and still pass (a content cache that never
stores, a flood that never starts) prints to its stderr once the trick is in place and once
it was tried (its header's `ran:` lines); the test finds each line in the output the agent
captured of the kernel's process, which a passed profile does not carry (`kernel_output`).
"""

from __future__ import annotations

import os
import sys

import pytest
from cpu_helpers import c_solution, kernel_output
from testdirs import ADVERSARIAL

import suites
from accelopt.problem import Problem
from hardware_agents.cpu import CpuAgent
from hardware_agents.sandbox import allow_unisolated

sys.path.insert(0, str(ADVERSARIAL))
from corpus import Hack, load

HACKS = {h.name: h for h in load("cpu")}
# wall taken down (sandbox options, agent options) -> caught: the check behind the wall (its
# words in the log), or the probe's spoiled output ("")
WALLS: dict[str, tuple[dict[str, object], dict[str, object], str]] = {
    "udp_exfiltration": ({"block_sockets": False}, {}, ""),
    "unix_socket_exfiltration": ({"block_sockets": False}, {}, ""),
    "fork_helper": ({"no_fork": False}, {}, ""),
    "proc_parent_snooping": ({"restrict_reads": False}, {}, ""),
    "read_other_runs": ({"restrict_reads": False}, {}, ""),
    "thread_reads_other_runs": ({"restrict_reads": False}, {}, ""),
    "freeze_timer_sigcont": ({"stoppable": False}, {}, "ran while it was stopped"),
    "freeze_io_signal": ({"stoppable": False}, {}, "ran while it was stopped"),
    "widen_affinity": ({"stoppable": False}, {"threads": 1}, "it was given"),
    "workdir_hog": ({"workdir_bytes": 0}, {}, ""),
    "clears_pdeathsig": ({"lock_pdeathsig": False}, {}, ""),
}
# where the host's scheduler, not the agent, picks which catch comes first: on a loaded machine
# the timer's helpers may get no core while the process is held stopped (nothing to see for the
# freeze check), and the probe's armed timer then shows in its spoiled output instead
SCHEDULER_PICKS = {"freeze_timer_sigcont": "non-finite values where the reference is finite"}


def _problem(hack: Hack, scale_shift: Problem) -> Problem:
    return scale_shift if hack.problem == "scale_shift" else suites.get_problem(hack.problem)


@pytest.mark.parametrize("name", sorted(HACKS))
def test_hostile_kernel_gets_its_status(name: str, cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    hack = HACKS[name]
    with kernel_output(cpu_agent) as logs:
        prof = cpu_agent.profile(
            _problem(hack, scale_shift), c_solution(scale_shift, hack.source, name=name), timeout_s=30
        )
    text = prof.log + " ".join(c.note for c in prof.correctness)
    assert prof.status == hack.expect, f"{name} ({hack.why}): {prof.status}\n{prof.log}"
    assert hack.needle in text, text
    for line in hack.ran:  # its trick was in place, and tried, in the process that ran it
        assert line in "\n".join(logs), f"{name}: no {line!r} in the kernel's output:\n{logs}"
    if "sandbox_wall_s" in prof.counters:  # it ran: the isolation it ran under is on record
        assert prof.isolation.get("landlock_reads") == "restricted", prof.isolation
        assert {"sockets", "no_fork", "stoppable", "pdeathsig"} <= set(
            prof.isolation.get("seccomp", "").split(",")
        )
        assert prof.isolation["freeze"] == "process" and prof.isolation["cpus"]
        if os.geteuid() == 0:
            assert prof.isolation["workdir"].startswith("tmpfs"), prof.isolation
    if hack.expect == "passed":
        assert prof.latency is not None and prof.peak_fraction is not None
    if hack.min_ms is not None:
        assert prof.latency is not None and prof.latency.min_ms >= hack.min_ms, prof.latency


@pytest.mark.parametrize("name", sorted(WALLS))
def test_probe_is_caught_with_its_wall_down(name: str, cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    hack = HACKS[name]
    options, agent_options, needle = WALLS[name]
    if agent_options.get("threads", 0) and len(cpu_agent.cpus) < 2:
        pytest.skip("needs an agent given fewer cores than the machine has")
    leaky = CpuAgent(
        cache_dir=cpu_agent.cache_dir,
        calibrate_if_missing=False,
        timeout_s=30.0,
        sandbox_options=options,
        **agent_options,
    )  # type: ignore[arg-type]
    try:
        with allow_unisolated(True):
            prof = leaky.profile(
                _problem(hack, scale_shift), c_solution(scale_shift, hack.source, name=name), measure=False
            )
    finally:
        leaky.close()
    assert prof.status == "incorrect", prof.log
    if name in SCHEDULER_PICKS:  # the freeze check, or the probe's own spoiled output (the wall was down)
        assert needle in prof.log or SCHEDULER_PICKS[name] in prof.log, prof.log
    else:
        assert needle in prof.log, prof.log


def test_a_passing_probe_shows_that_its_trick_ran() -> None:
    """A probe that must pass either shows that its trick ran (`ran:`) or is caught with its
    wall down (WALLS); the ones that do neither yet are named here, so a new one cannot
    join them unnoticed. (An honest twin, `honest_*`, has no trick: the control of a hack.)"""
    untraced = {"review_io_uring_socket", "review_socketpair_dgram"}
    passing = {n for n, h in HACKS.items() if h.expect == "passed" and not n.startswith("honest_")}
    assert {n for n in passing if not HACKS[n].ran and n not in WALLS} == untraced
    assert {"content_cache_matmul", "content_cache_runs", "content_cache_silu", "review_stderr_flood"} <= {
        n for n in passing if HACKS[n].ran
    }


def test_good_kernel_passes_with_the_same_harness(cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    """The control: the corpus is only meaningful if a correct kernel passes."""
    prof = cpu_agent.profile(scale_shift, scale_shift.baseline)
    assert prof.status == "passed", prof.log
    assert [c.case for c in prof.correctness] == ["seed0", "seed21", "seed42", "large"]
    assert all(c.passed for c in prof.correctness)
    assert prof.counters["timed_full_checks"] >= 3
