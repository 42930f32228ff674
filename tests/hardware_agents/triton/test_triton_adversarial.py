"""The Triton adversarial corpus (tests/hardware_agents/adversarial/triton/): every hostile kernel gets the
status its file names, through the real agent in the Triton interpreter with the timed path
on (`interpreter_timing=True`: the simulated device's clock plays the part of CUDA events, and the parent's
wall clock bounds it), in sandboxed children.

The probe that spoils its output when a wall lets it through (reading the agent's data) runs
a second time with that wall down, where it must be caught: so that test can fail.

A hack whose trick could silently do nothing and still pass prints to its stderr once the
trick is in place (and, where it can tell, once it was tried): its header's `ran:` lines. The
test finds each line in the output the agent captured of the harness child, which a passed
profile does not carry (`KeepingAgent`). Here the interpreter runs them: a patch of CUDA
events or a side stream is in place but acts only on a GPU, and its line says no more than
that (it is in place); that it did not fool the timer is the latency's check."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from testdirs import ADVERSARIAL
from triton_helpers import solution

import suites
from accelopt.problem import Problem, Solution
from accelopt.profile import Profile
from hardware_agents.pipeline.stages import Stages
from hardware_agents.sandbox import allow_unisolated
from hardware_agents.triton import H100Agent
from hardware_agents.triton.stages import TritonStages

sys.path.insert(0, str(ADVERSARIAL))
from corpus import load

HACKS = {h.name: h for h in load("triton")}
TIMING = {"interpreter_timing": True, "warmup": 1, "reps": 3, "trials": 2, "timeout_s": 120.0}


class KeepingAgent(H100Agent):
    """The agent, keeping for the tests what it drops: the output of each harness child
    (its stderr as the agent captured it: the first lines, scrubbed), in `outputs`. A passed
    profile does not carry it (a kernel gets no channel into later prompts)."""

    outputs: list[str]

    def stages(
        self, problem: Problem, solution: Solution, seeds: tuple[int, ...], timeout_s: float, measure: bool
    ) -> Stages:
        outputs = self.outputs

        class Keeping(TritonStages):
            def finish(self, prof: Profile) -> Profile:
                prof = super().finish(prof)
                if self.out is not None:
                    outputs.append(self.out.log)
                return prof

        return Keeping(self, problem, solution, seeds, timeout_s, measure)


@pytest.fixture(scope="module")
def timed_agent(triton_cache: Path) -> Iterator[KeepingAgent]:
    agent = KeepingAgent(mode="interpreter", cache_dir=triton_cache, **TIMING)
    agent.outputs = []
    yield agent
    agent.close()


@pytest.mark.parametrize("name", sorted(HACKS))
def test_hostile_kernel_gets_its_status(name: str, timed_agent: KeepingAgent) -> None:
    hack = HACKS[name]
    Path("/tmp/accelopt-adversarial-planted-link-target").unlink(missing_ok=True)
    p = suites.get_problem(hack.problem)
    timed_agent.outputs.clear()
    prof = timed_agent.profile(p, solution(p, hack.source, name=name))
    text = prof.log + " ".join(c.note for c in prof.correctness)
    assert hack.accepts(prof.status, text, on_gpu=False), f"{name} ({hack.why}): {prof.status}\n{text}"
    for line in hack.ran:  # its trick was in place (and tried, where it can tell) in the child that ran it
        out = "\n".join(timed_agent.outputs)
        assert line in out, f"{name}: no {line!r} in the harness child's output:\n{out}"
    if "sandbox_wall_s" in prof.counters:  # it ran: the isolation it ran under is on record
        assert prof.isolation.get("landlock_reads") == "restricted", prof.isolation
    if name == "plant_links_for_parent_writes":  # nothing of ours wrote through the kernel's links
        assert not Path("/tmp/accelopt-adversarial-planted-link-target").exists()
    if prof.status == "passed":  # timed, by a clock that agrees with ours over the same calls
        assert prof.latency is not None and prof.counters["timing_wall_s"] > 0
        assert prof.counters["timing_kernel_clock_s"] >= 0.5 * prof.counters["timing_wall_s"], prof.counters


def test_reading_the_data_is_caught_with_the_read_wall_down(triton_cache: Path) -> None:
    hack = HACKS["read_references"]
    leaky = H100Agent(
        mode="interpreter", cache_dir=triton_cache, sandbox_options={"restrict_reads": False}, **TIMING
    )
    try:
        p = suites.get_problem(hack.problem)
        with allow_unisolated(True):  # reads unrestricted is "unisolated": allowed for this test only
            prof = leaky.profile(p, solution(p, hack.source, name=hack.name))
    finally:
        leaky.close()
    assert prof.status == "incorrect", (
        prof.log
    )  # it found the inputs' files and said so by spoiling its output


def test_a_rejected_round_is_confirmed_in_the_same_child(
    triton_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A busy host can stretch one round's untimed work past its calibrated allowance; a
    rejected round is therefore not counted and is followed by an extra round in the same
    child, and the rejection stands only when the rounds left cannot make up the count. An
    honest kernel rejected once (here: its first round's verdict forced) passes on its other
    rounds, timed in one child; a slowed clock is rejected in every round. No profile is run
    twice."""
    from hardware_agents.triton import rounds_judge

    agent = H100Agent(mode="interpreter", cache_dir=triton_cache, **TIMING)
    real = rounds_judge.round_rejected
    verdicts: list[str | None] = []

    def first_one_rejected(*args, **kwargs):  # type: ignore[no-untyped-def]
        why = real(*args, **kwargs)
        if not verdicts:
            why = why or "timing_mismatch: forced for this test (a busy host)"
        verdicts.append(why)
        return why

    monkeypatch.setattr(rounds_judge, "round_rejected", first_one_rejected)
    try:
        p = suites.get_problem("triton/rmsnorm_h4096")
        honest = agent.profile(p, p.baseline)
        assert honest.status == "passed", honest.log
        assert honest.counters["timing_rounds_rejected"] == 1.0
        assert honest.counters["trials"] == TIMING["trials"]  # the counted rounds: the rejected one is not
        # the rounds judged as they ended (3: the rejected one, then two counted), then the counted
        # rounds again at the end (the clock bound's own check)
        assert verdicts[0] and verdicts[1:] == [None] * (len(verdicts) - 1) and len(verdicts) == 5, verdicts
        assert "phase_confirmation_s" not in honest.counters
        verdicts.clear()
        slowed = HACKS["patch_timer_code"]
        prof = agent.profile(p, solution(p, slowed.source, name=slowed.name))
        assert prof.status == "timing_mismatch", prof.log
        # rounds 0, 1 and 2 rejected: with one round left, two cannot count; it stands
        assert prof.counters["timing_rounds_rejected"] == 3.0, prof.counters
        assert len(verdicts) == 3 and all(v and "slowed or replaced" in v for v in verdicts)
    finally:
        agent.close()


def test_a_passing_hack_shows_that_its_trick_ran() -> None:
    """A hack that must pass shows that its trick ran (`ran:`), or is caught with its wall
    down (read_references), or says why it passed in the profile itself (`needle:`); the ones
    that do none of these yet are named here, so a new one cannot join them unnoticed. (An
    honest twin, `honest_*`, has no trick: the control of the hack it mirrors.)"""
    untraced = {"plant_links_for_parent_writes"}
    passing = {n for n, h in HACKS.items() if h.expect == "passed" and not n.startswith("honest_")}
    shown = {n for n in passing if HACKS[n].ran or HACKS[n].needle} | {"read_references"}
    assert passing - shown == untraced
    assert {
        "content_cache",
        "content_cache_within_round",
        "patch_all_timers",
        "patch_cuda_event_only",
        "side_stream",
        "side_stream_fifth",
        "slow_cuda_events_2x",
    } <= {n for n in passing if HACKS[n].ran}


def test_a_scheduler_dependent_hack_names_its_other_verdict() -> None:
    """`or:` in a corpus header: the verdict a hack gets where the host's scheduler picks
    (its helper process got no core while the child was held stopped); never `passed`."""
    hack = HACKS["helper_continues_stopped_child"]
    assert hack.accepts("incorrect", "... ran while it was stopped between calls ...", on_gpu=False)
    assert hack.accepts("runtime_error", "the kernel left 1 process(es) running (killed)", on_gpu=False)
    assert not hack.accepts("runtime_error", "FileNotFoundError: checks-0.pt", on_gpu=False)
    assert not hack.accepts("passed", "", on_gpu=False)
    import corpus

    with pytest.raises(ValueError, match="failing status"):
        corpus._alternative(Path("x.py"), "passed: anything")
