"""Isolation fails closed: a kernel never runs without filesystem and network isolation
unless the run allows it, and every profile records the isolation it ran under."""

from __future__ import annotations

from pathlib import Path

from accelopt.problem import Problem
from hardware_agents.cpu import CpuAgent
from hardware_agents.sandbox import allow_unisolated, isolation_problem, unisolated_allowed


def _agent_without_landlock(cpu_agent: CpuAgent) -> CpuAgent:
    # Landlock switched off stands in for a kernel that lacks it (this machine has it)
    return CpuAgent(
        cache_dir=cpu_agent.cache_dir,
        calibrate_if_missing=False,
        timeout_s=30.0,
        sandbox_options={"landlock": False},
    )


def test_missing_filesystem_isolation_refuses_the_kernel(cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    agent = _agent_without_landlock(cpu_agent)
    try:
        prof = agent.profile(scale_shift, scale_shift.baseline)
    finally:
        agent.close()
    assert prof.status == "sandbox_error", prof.log
    assert "filesystem" in prof.log and "sandbox.allow_unisolated" in prof.log
    assert "landlock_abi" not in prof.isolation and "seccomp" in prof.isolation


def test_allowed_unisolated_runs_and_says_so(cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    agent = _agent_without_landlock(cpu_agent)
    try:
        with allow_unisolated(True):
            assert unisolated_allowed()
            prof = agent.profile(scale_shift, scale_shift.baseline, measure=False)
    finally:
        agent.close()
    assert not unisolated_allowed()
    assert prof.status == "unmeasured", prof.log
    assert "landlock_abi" not in prof.isolation  # on record: it ran without Landlock


def test_profiles_record_their_isolation(cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    prof = cpu_agent.profile(scale_shift, scale_shift.baseline, measure=False)
    iso = prof.isolation
    assert iso["landlock_reads"] == "restricted" and iso["landlock_tcp"] == "blocked"
    assert set(iso["seccomp"].split(",")) >= {"sockets", "no_fork"}
    assert "_untrusted" not in iso


def test_this_machine_can_isolate(tmp_path: Path) -> None:
    assert isolation_problem() is None
