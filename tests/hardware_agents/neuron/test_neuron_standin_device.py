"""The Neuron agent's device path end to end, on the STAND-IN SDK (tests/hardware_agents/neuron/standin).

There is no Trainium device and no Neuron SDK here: `neuronxcc.nki` (baremetal, simulate_kernel,
language, isa) and `neuron-profile` are stand-ins that imitate the API surface the agent
uses. Everything above them is real: the agent, the sandboxed harness, the input transforms,
the judging against the float64 reference, the timing loop with its re-runs, the summary
parsing in a separate child, the roofline and the error classification.
"""

from __future__ import annotations

import re

import msgspec
import pytest
from neuron_helpers import STANDIN
from neuron_kernels import (
    BMM_SOFTMAX_NO_MAX,
    SILU_BAD_VALUES,
    SILU_BF16,
    SILU_FORGES_TIMING,
    SILU_GOOD,
    SILU_HALF_WRITTEN,
    SILU_HANGS,
    SILU_HBM_HOG,
    SILU_LAZY_WHEN_TIMED,
    SILU_NO_ENTRY,
    SILU_SYNTAX_ERROR,
    SILU_TOO_MANY_PARTITIONS,
)

from accelopt.problem import Problem, Solution, SourceFile
from hardware_agents.neuron import COUNTER_FIELDS, TRN1, NeuronAgent
from hardware_agents.neuron.specs import TRN1 as SPEC


def _with(problem: Problem, source: str) -> Solution:
    return msgspec.structs.replace(
        problem.baseline, name="candidate", sources=[SourceFile(path="kernel.py", content=source)]
    )


def test_baseline_passes_with_timing_counters_and_roofline(
    trn1: NeuronAgent, small_suite: dict[str, Problem]
) -> None:
    p = small_suite["silu"]
    prof = trn1.profile(p, p.baseline)
    assert prof.status == "passed", prof.log
    assert prof.device == "trn1" and trn1.spec == TRN1
    # seeds 0, 21, 42, 63, 84 (the defaults extended) + the adversarial "large" case
    assert [c.case for c in prof.correctness] == ["seed0", "seed21", "seed42", "seed63", "seed84", "large"]
    assert all(c.passed and c.rel_l2 is not None and c.rel_l2 < 2e-5 for c in prof.correctness)
    lat = prof.latency
    assert lat is not None and len(lat.samples_ms) == 10 and lat.reruns == 0 and lat.spread <= 0.01
    for field in COUNTER_FIELDS:  # the paper's profiler fields, from the summary JSON
        assert field in prof.counters, field
    assert prof.counters["summary_total_time_ms"] > 0
    # our clock around the round's calls bounds the profiler's device times from above
    assert 0 < prof.counters["timing_device_s"] <= prof.counters["timing_wall_s"]
    assert prof.counters["timing_rounds"] == 1 and prof.counters["timing_setup_s"] > 0
    # timed on a fresh seed (named in the log), never a correctness seed
    seeds = [int(s) for s in re.findall(r"seed (\d+)", prof.log)]
    assert len(seeds) == 1 and seeds[0] not in (0, 21, 42, 63, 84), prof.log
    assert prof.isolation.get("landlock_reads") == "restricted", prof.isolation  # on record
    assert prof.counters["hbm_read_bytes"] == 256 * 512 * 4  # each input tile loaded once
    # the stand-in models 60 % of the roofline: the agent's % of peak must find it again
    assert prof.bound == "memory" and prof.peak_fraction is not None and 0.3 < prof.peak_fraction < 0.65
    assert prof.t_peak_ms == pytest.approx(2 * 256 * 512 * 4 / SPEC.peak_bw_bytes_s * 1e3)
    # compile flags and the pinned core reached the child (the stand-in refuses to compile
    # without --auto-cast=none)
    assert "--auto-cast=none" in prof.toolchain["neuron_cc_flags"]
    assert prof.toolchain["neuron_rt_visible_cores"] == "3"
    assert prof.toolchain["neuronx-cc"].endswith("standin")


def test_transforms_and_scalar_arguments(trn1: NeuronAgent, small_suite: dict[str, Problem]) -> None:
    mm = small_suite["matmul"]  # lhs tiled by transform_to_nki_inputs, output reshaped back
    prof = trn1.profile(mm, mm.baseline, measure=False)
    assert prof.status == "unmeasured" and all(c.passed for c in prof.correctness), prof.log
    arm = small_suite["add_rmsnorm_matmul"]  # eps is a scalar kernel argument
    assert arm.definition.inputs["eps"].shape is None
    prof = trn1.profile(arm, arm.baseline, measure=False)
    assert prof.status == "unmeasured", prof.log


def test_rerun_while_spread_exceeds_one_percent(
    trn1: NeuronAgent, small_suite: dict[str, Problem], neuron_profile_exe: str
) -> None:
    from hardware_agents.neuron import Trn1Agent

    noisy = Trn1Agent(
        mode="device",
        sdk_path=trn1.sdk.python_path,
        neuron_profile=neuron_profile_exe,
        core="1",
        round_pause_s=0.0,
        check_instance=False,
        extra_env={"STANDIN_NOISY_RUNS": "12"},
    )
    try:
        p = small_suite["silu"]
        prof = noisy.profile(p, p.baseline)
    finally:
        noisy.close()
    assert prof.status == "passed", prof.log
    assert prof.latency is not None and prof.latency.reruns >= 1 and prof.latency.spread <= 0.01
    assert prof.counters["timing_rounds"] == prof.latency.reruns + 1
    assert prof.counters["timing_round_kept"] == prof.counters["timing_rounds"] - 1


def test_compile_error(trn1: NeuronAgent, small_suite: dict[str, Problem]) -> None:
    p = small_suite["silu"]
    prof = trn1.profile(p, _with(p, SILU_TOO_MANY_PARTITIONS))
    assert prof.status == "compile_error"
    assert "compilation failed" in prof.log and "partition dimension 256" in prof.log
    for src in (SILU_SYNTAX_ERROR, SILU_NO_ENTRY):
        prof = trn1.profile(p, _with(p, src))
        assert prof.status == "compile_error" and "loading the kernel module failed" in prof.log


def test_runtime_error_is_not_a_compile_error(trn1: NeuronAgent, small_suite: dict[str, Problem]) -> None:
    p = small_suite["silu"]
    prof = trn1.profile(p, _with(p, SILU_HBM_HOG))
    assert prof.status == "runtime_error", prof.log
    assert "failed at run time" in prof.log and "NRT_RESOURCE" in prof.log


def test_wrong_output_and_unwritten_output(trn1: NeuronAgent, small_suite: dict[str, Problem]) -> None:
    p = small_suite["silu"]
    prof = trn1.profile(p, _with(p, SILU_BAD_VALUES))
    assert prof.status == "incorrect" and prof.latency is None
    assert "relative L2 error" in prof.log and not any(c.passed for c in prof.correctness)
    prof = trn1.profile(p, _with(p, SILU_HALF_WRITTEN))
    assert prof.status == "incorrect" and "non-finite values" in prof.log


def test_softmax_without_max_subtraction_fails_only_the_adversarial_case(
    trn1: NeuronAgent, small_suite: dict[str, Problem]
) -> None:
    p = small_suite["bmm_softmax"]
    good = trn1.profile(p, p.baseline, measure=False)
    assert good.status == "unmeasured", good.log
    bad = trn1.profile(p, _with(p, BMM_SOFTMAX_NO_MAX), measure=False)
    assert bad.status == "incorrect"
    by_case = {c.case: c.passed for c in bad.correctness}
    assert by_case.pop("large") is False and all(by_case.values())


def test_lower_precision_rejected_before_compiling(
    trn1: NeuronAgent, small_suite: dict[str, Problem]
) -> None:
    p = small_suite["silu"]
    prof = trn1.profile(p, _with(p, SILU_BF16))
    assert prof.status == "incorrect" and "bfloat16" in prof.log
    commented = SILU_GOOD.replace("TILE = 128", "TILE = 128  # no bfloat16 here")
    assert trn1.profile(p, _with(p, commented), measure=False).status == "unmeasured"


def test_timeout(trn1: NeuronAgent, small_suite: dict[str, Problem]) -> None:
    p = small_suite["silu"]
    prof = trn1.profile(p, _with(p, SILU_HANGS), timeout_s=3)
    assert prof.status == "timeout" and "while compiling" in prof.log


def test_forged_profiler_readings_are_not_trusted(trn1: NeuronAgent, small_suite: dict[str, Problem]) -> None:
    p = small_suite["silu"]
    honest = trn1.profile(p, p.baseline)
    forged = trn1.profile(p, _with(p, SILU_FORGES_TIMING))
    assert forged.status == "passed", forged.log
    assert honest.latency is not None and forged.latency is not None
    assert forged.latency.median_ms == pytest.approx(honest.latency.median_ms, rel=0.05)


def test_without_verification_a_forged_reading_hits_the_roofline_gate(
    trn1: NeuronAgent, small_suite: dict[str, Problem], neuron_profile_exe: str
) -> None:
    from hardware_agents.neuron import Trn1Agent

    trusting = Trn1Agent(
        mode="device",
        sdk_path=trn1.sdk.python_path,
        neuron_profile=neuron_profile_exe,
        round_pause_s=0.0,
        check_instance=False,
        verify_summaries=False,
    )
    try:
        p = small_suite["silu"]
        prof = trusting.profile(p, _with(p, SILU_FORGES_TIMING))
    finally:
        trusting.close()
    assert prof.status == "incorrect" and "faster than the machine allows" in prof.log


def test_a_kernel_that_behaves_differently_when_timed_is_caught(
    trn1: NeuronAgent, small_suite: dict[str, Problem]
) -> None:
    p = small_suite["silu"]
    prof = trn1.profile(p, _with(p, SILU_LAZY_WHEN_TIMED))
    assert prof.status == "incorrect", prof.log
    assert "the output of a timed run is wrong" in prof.log
    # every profiled run's output is checked: the first one ran before its profiler file
    # existed (still honest), the second is the first lazy one
    assert (
        all(c.passed for c in prof.correctness[:-1]) and prof.correctness[-1].case == "timed:timing-r0/run1"
    )


def test_a_timing_child_that_runs_while_held_stopped_is_incorrect(
    trn1: NeuronAgent, small_suite: dict[str, Problem], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Neuron timing child is driven by the pipeline's rounds driver, so the freeze check
    applies to it as to every driven child: someone (here the test, standing in for a timer,
    an I/O signal or a helper process) continues it while the agent hands it round 0's
    inputs, and whatever the rounds would have said, the verdict is the breach."""
    import os
    import signal
    import time

    import hardware_agents.neuron.stages as stages_mod  # the timing_rounds stage drives the child

    real = stages_mod.drive_rounds

    def meddling(child, clock, *, hand_over, **kw):  # type: ignore[no-untyped-def]
        def hand_over_and_continue(k: int) -> None:
            hand_over(k)
            os.kill(child.pid, signal.SIGCONT)
            time.sleep(0.05)

        return real(child, clock, hand_over=hand_over_and_continue, **kw)

    monkeypatch.setattr(stages_mod, "drive_rounds", meddling)
    p = small_suite["silu"]
    prof = trn1.profile(p, p.baseline)
    assert prof.status == "incorrect" and "ran while it was stopped" in prof.log, prof.log
    assert "ran_while_stopped_ns" in prof.counters and prof.isolation["freeze"]


def test_missing_isolation_refuses_the_kernel(
    neuron_profile_exe: str, small_suite: dict[str, Problem]
) -> None:
    """Landlock switched off stands in for a host kernel that lacks it: the kernel never runs."""
    from hardware_agents.neuron import Trn1Agent

    agent = Trn1Agent(
        mode="device",
        sdk_path=[str(STANDIN)],
        neuron_profile=neuron_profile_exe,
        core="3",
        round_pause_s=0.0,
        check_instance=False,
        sandbox_options={"landlock": False},
    )
    try:
        p = small_suite["silu"]
        prof = agent.profile(p, p.baseline)
    finally:
        agent.close()
    assert prof.status == "sandbox_error", prof.log
    assert "sandbox.allow_unisolated" in prof.log and "landlock_abi" not in prof.isolation
