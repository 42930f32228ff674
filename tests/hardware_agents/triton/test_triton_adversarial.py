"""The Triton adversarial corpus (tests/hardware_agents/adversarial/triton/): every hostile kernel gets the
status its file names, through the real agent in the Triton interpreter with the timed path
on (`interpreter_timing=True`: the host clock plays the part of CUDA events, and the parent's
wall clock bounds it), in sandboxed children.

The probe that spoils its output when a wall lets it through (reading the agent's data) runs
a second time with that wall down, where it must be caught: so that test can fail."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from testdirs import ADVERSARIAL
from triton_helpers import solution

import suites
from hardware_agents.sandbox import allow_unisolated
from hardware_agents.triton import H100Agent

sys.path.insert(0, str(ADVERSARIAL))
from corpus import load

HACKS = {h.name: h for h in load("triton")}
TIMING = {"interpreter_timing": True, "warmup": 1, "reps": 3, "trials": 2, "timeout_s": 120.0}


@pytest.fixture(scope="module")
def timed_agent(triton_cache: Path) -> Iterator[H100Agent]:
    agent = H100Agent(mode="interpreter", cache_dir=triton_cache, **TIMING)
    yield agent
    agent.close()


@pytest.mark.parametrize("name", sorted(HACKS))
def test_hostile_kernel_gets_its_status(name: str, timed_agent: H100Agent) -> None:
    hack = HACKS[name]
    Path("/tmp/accelopt-adversarial-planted-link-target").unlink(missing_ok=True)
    p = suites.get_problem(hack.problem)
    prof = timed_agent.profile(p, solution(p, hack.source, name=name))
    text = prof.log + " ".join(c.note for c in prof.correctness)
    assert prof.status == hack.expect, f"{name} ({hack.why}): {prof.status}\n{prof.log}"
    assert hack.needle in text, text
    if "sandbox_wall_s" in prof.counters:  # it ran: the isolation it ran under is on record
        assert prof.isolation.get("landlock_reads") == "restricted", prof.isolation
    if name == "plant_links_for_parent_writes":  # nothing of ours wrote through the kernel's links
        assert not Path("/tmp/accelopt-adversarial-planted-link-target").exists()
    if hack.expect == "passed":  # timed, by a clock that agrees with ours over the same calls
        assert prof.latency is not None and prof.counters["timing_wall_s"] > 0
        assert prof.counters["timing_kernel_clock_s"] >= 0.5 * prof.counters["timing_wall_s"], prof.counters


def test_reading_the_data_is_caught_with_the_read_wall_down(triton_cache: Path) -> None:
    hack = HACKS["read_references"]
    leaky = H100Agent(mode="interpreter", cache_dir=triton_cache, sandbox_options={"restrict_reads": False},
                      **TIMING)
    try:
        p = suites.get_problem(hack.problem)
        with allow_unisolated(True):  # reads unrestricted is "unisolated": allowed for this test only
            prof = leaky.profile(p, solution(p, hack.source, name=hack.name))
    finally:
        leaky.close()
    assert prof.status == "incorrect", prof.log  # it found the inputs' files and said so by spoiling its output


def test_a_slowed_clock_is_caught_when_the_untimed_bound_was_measured_on_a_loaded_machine(
        triton_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child's untimed work per call is bounded by a figure the parent measures once; on a
    loaded machine that figure can exceed a whole round, and then a 50x slowed clock looked
    plausible (seen once in a full test run). A round whose kernel clock covers less than half
    of our wall time has the bound measured again; an honest round never does."""
    agent = H100Agent(mode="interpreter", cache_dir=triton_cache, **TIMING)
    real = agent._untimed_s
    asked: list[bool] = []

    def first_measured_under_load(spec, set_bytes, *, fresh=False):  # type: ignore[no-untyped-def]
        asked.append(fresh)
        return real(spec, set_bytes, fresh=True) if fresh else 1.0  # 1 s per call: a busy machine's figure

    monkeypatch.setattr(agent, "_untimed_s", first_measured_under_load)
    try:
        slowed = HACKS["patch_all_timers"]
        p = suites.get_problem(slowed.problem)
        prof = agent.profile(p, solution(p, slowed.source, name=slowed.name))
        assert prof.status == "timing_mismatch" and slowed.needle in prof.log, prof.log
        assert asked == [False, True]
        asked.clear()
        honest = HACKS["patch_cuda_event_only"]  # in the interpreter its patch changes nothing
        prof = agent.profile(p, solution(p, honest.source, name=honest.name))
        assert prof.status == "passed", prof.log
        assert asked == [False]
    finally:
        agent.close()
