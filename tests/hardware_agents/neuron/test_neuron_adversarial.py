"""The NKI adversarial corpus (tests/hardware_agents/adversarial/neuron/): every hostile kernel gets the status
its file names, through the real agent on the STAND-IN SDK (tests/hardware_agents/neuron/standin: there is no
Trainium here; the agent, its sandboxed harness, the judging against float64 references the
sandbox cannot read, and the timing read back from the profiler's files are real).

Timed runs get inputs on fresh seeds each round, every profiled run's output is checked
against the agent's own reference, and the profiler's device times are bounded by the
agent's clock around each round: the content cache, lazy-after-N, first-round-only,
mutate-when-timed and forged-trace files exercise those.

The probes that spoil their output when a wall lets them through (reading the references,
the content cache) run a second time with that wall down, where they must be caught: so
those tests can fail."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import pytest
from neuron_kernels import SILU_GOOD
from testdirs import ADVERSARIAL

from accelopt.problem import Problem, Solution, SourceFile
from hardware_agents.neuron import NeuronAgent
from hardware_agents.sandbox import allow_unisolated

sys.path.insert(0, str(ADVERSARIAL))
from corpus import load

HACKS = {h.name: h for h in load("neuron")}
STANDIN = Path(__file__).resolve().parent / "standin"


def _with(problem: Problem, source: str, name: str) -> Solution:
    return msgspec.structs.replace(
        problem.baseline, name=name, sources=[SourceFile(path="kernel.py", content=source)]
    )


@pytest.fixture(scope="module")
def honest_ms(trn1: NeuronAgent, small_suite: dict[str, Problem]) -> float:
    p = small_suite["silu"]
    prof = trn1.profile(p, _with(p, SILU_GOOD, "honest"))
    assert prof.status == "passed" and prof.latency is not None, prof.log
    return prof.latency.median_ms


@pytest.mark.parametrize("name", sorted(HACKS))
def test_hostile_kernel_gets_its_status(
    name: str, trn1: NeuronAgent, small_suite: dict[str, Problem], honest_ms: float
) -> None:
    hack = HACKS[name]
    p = small_suite[hack.problem]
    prof = trn1.profile(p, _with(p, hack.source, name))
    text = prof.log + " ".join(c.note for c in prof.correctness)
    assert prof.status == hack.expect, f"{name} ({hack.why}): {prof.status}\n{prof.log}"
    assert hack.needle in text, text
    if hack.expect == "passed":  # the honest reading, not a forged one
        assert prof.latency is not None and prof.latency.median_ms == pytest.approx(honest_ms, rel=0.25)
    if hack.expect == "timing_mismatch":  # the two sums that disagreed are recorded
        assert prof.counters["timing_device_s"] > prof.counters["timing_wall_s"] > 0


def test_reading_the_references_is_caught_with_the_walls_down(
    neuron_profile_exe: str, small_suite: dict[str, Problem]
) -> None:
    """Reads unrestricted and the references' private dir opened to everyone (and the agent
    process's private root it sits in): the probe finds them and spoils its output."""
    from hardware_agents.neuron import Trn1Agent

    hack = HACKS["read_references"]
    p = small_suite[hack.problem]
    leaky = Trn1Agent(
        mode="device",
        sdk_path=[str(STANDIN)],
        neuron_profile=neuron_profile_exe,
        core="3",
        timeout_s=60,
        timing_timeout_s=120,
        round_pause_s=0.0,
        check_instance=False,
        sandbox_options={"restrict_reads": False},
    )
    try:
        with allow_unisolated(True):
            first = leaky.profile(p, _with(p, SILU_GOOD, "honest"))  # makes the problem's data
            assert first.status == "passed", first.log
            for data in leaky.data._items.values():
                data.private.parent.chmod(0o755)  # the process's root (`sandbox.resources.process_root`)
                data.private.chmod(0o755)
                for f in data.private.iterdir():
                    f.chmod(0o644)
            prof = leaky.profile(p, _with(p, hack.source, hack.name))
    finally:
        leaky.close()
    assert prof.status == "incorrect", prof.log


def test_the_content_cache_is_caught_when_timed_inputs_repeat_a_correctness_seed(
    trn1: NeuronAgent, small_suite: dict[str, Problem], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the timing seed forced to a correctness seed (84), the cache hits in the profiled
    runs and the probe spoils its output: its detection works, so its `passed` means a miss."""
    import hardware_agents.neuron.judge as judge_mod

    hack = HACKS["content_cache"]
    p = small_suite[hack.problem]
    monkeypatch.setattr(judge_mod, "fresh_seed", lambda used: 84)
    prof = trn1.profile(p, _with(p, hack.source, hack.name))
    assert prof.status == "incorrect", prof.log
    assert (
        "the output of a timed run is wrong" in prof.log
        and prof.correctness[-1].case == "timed:timing-r0/run0"
    )
