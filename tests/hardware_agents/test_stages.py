"""Every profile goes through the same stages in the same order (`pipeline/stages.py`).

The runner is tested on a small hook class of its own (the order, a skipped stage, a failing
stage that ends the profile, an exception that releases what the run holds); then real
profiles through the path a user takes (`HardwareAgent.profile`, the sandbox on, real gcc,
the real Triton interpreter, the real NKI emulator) record the same stage list in their
counters: a C kernel, an interpreted Triton kernel (untimed and timed on the interpreter's
clock) and an emulated NKI kernel.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

import suites
from accelopt.problem import Problem
from accelopt.profile import LatencyStats, Profile
from hardware_agents.pipeline.stages import SKIPPED, STAGES, Outcome, Stages, run_stages, stages_of

EXPECTED = [
    "static_checks",
    "build",
    "stage_inputs",
    "correctness",
    "timing_rounds",
    "clock_bound",
    "roofline_gate",
    "verdict",
]


def _prof(status: str) -> Profile:
    """A profile of `status` that passes Profile's own checks (a passed one was timed)."""
    timed = LatencyStats(samples_ms=[1.0], median_ms=1.0, min_ms=1.0, max_ms=1.0, spread=0.0)
    return Profile(status=status, device="test", latency=timed if status == "passed" else None)  # type: ignore[arg-type]


class Recorder(Stages):
    """Hooks that log their calls: `fail_at` ends the profile there, `raise_at` raises."""

    def __init__(self, fail_at: str = "", raise_at: str = "") -> None:
        self.calls: list[str] = []
        self.fail_at, self.raise_at = fail_at, raise_at
        self.released = 0

    def _step(self, name: str) -> Outcome:
        self.calls.append(name)
        if name == self.raise_at:
            raise RuntimeError(name)
        return _prof("incorrect") if name == self.fail_at else None

    def static_checks(self) -> Outcome:
        return self._step("static_checks")

    def stage_inputs(self) -> Outcome:
        return self._step("stage_inputs")

    def correctness(self) -> Outcome:
        return self._step("correctness")

    def timing_rounds(self) -> Outcome:
        self.calls.append("timing_rounds")
        return SKIPPED

    def roofline_gate(self) -> Outcome:
        return self._step("roofline_gate")

    def verdict(self) -> Profile:
        self.calls.append("verdict")
        return _prof("passed")

    def release(self) -> None:
        self.released += 1


def test_the_stages_are_the_one_order():
    assert list(STAGES) == EXPECTED


def test_the_runner_goes_through_every_stage_in_order():
    hooks = Recorder()
    prof = run_stages(hooks)
    assert prof.status == "passed"
    assert hooks.calls == [
        "static_checks",
        "stage_inputs",
        "correctness",
        "timing_rounds",
        "roofline_gate",
        "verdict",
    ]
    recs = stages_of(prof.counters)
    assert [r.name for r in recs] == EXPECTED
    # build and clock_bound: not the family's; timing_rounds: the hook said SKIPPED
    assert [r.name for r in recs if not r.ran] == ["build", "timing_rounds", "clock_bound"]
    assert prof.counters["stage_2_build_skipped"] == 1.0 and "stage_4_correctness_s" in prof.counters
    assert hooks.released == 1  # finish releases


def test_a_failing_stage_ends_the_profile_with_its_status():
    hooks = Recorder(fail_at="correctness")
    prof = run_stages(hooks)
    assert prof.status == "incorrect"
    assert hooks.calls == ["static_checks", "stage_inputs", "correctness"]
    assert [r.name for r in stages_of(prof.counters)] == EXPECTED[:4]


def test_the_shared_checks_come_first_and_can_end_it():
    hooks = Recorder()
    prof = run_stages(hooks, pre=lambda: _prof("compile_error"))
    assert prof.status == "compile_error" and hooks.calls == []
    assert [r.name for r in stages_of(prof.counters)] == ["static_checks"]


def test_an_exception_releases_what_the_run_holds():
    hooks = Recorder(raise_at="correctness")
    with pytest.raises(RuntimeError):
        run_stages(hooks)
    assert hooks.released == 1


def test_a_verdict_stage_must_give_the_profile():
    class NoVerdict(Stages):
        def verdict(self) -> Profile:
            return None  # type: ignore[return-value]

    with pytest.raises(TypeError):
        run_stages(NoVerdict())


# --- real profiles, one per family ---------------------------------------------------------------


def _names(prof: Profile) -> list[str]:
    return [r.name for r in stages_of(prof.counters)]


def _ran(prof: Profile) -> list[str]:
    return [r.name for r in stages_of(prof.counters) if r.ran]


@pytest.fixture(scope="module")
def cpu_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    from hardware_agents.cpu import CpuAgent

    agent = CpuAgent(
        cache_dir=tmp_path_factory.mktemp("stages-cpu"),
        quick_calibration=True,
        timing_budget_s=0.05,
        max_reruns=0,
        timeout_s=60.0,
    )
    yield agent
    agent.close()


def test_a_c_kernel_goes_through_the_stages(cpu_agent):
    problem = suites.get_problem("cpu/silu")
    prof = cpu_agent.profile(problem, problem.baseline)
    assert prof.status == "passed", prof.log
    assert _names(prof) == EXPECTED
    # its clock is ours alone: no kernel clock to bound
    assert _ran(prof) == [s for s in EXPECTED if s != "clock_bound"]
    assert all(r.seconds >= 0 for r in stages_of(prof.counters))


def test_a_c_kernel_that_does_not_compile_ends_at_build(cpu_agent):
    problem = suites.get_problem("cpu/silu")
    src = problem.baseline.sources[0]
    broken = msgspec.structs.replace(
        problem.baseline, sources=[msgspec.structs.replace(src, content=src.content + "\nthis is not C;\n")]
    )
    prof = cpu_agent.profile(problem, broken)
    assert prof.status == "compile_error"
    assert _names(prof) == ["static_checks", "build"]


def test_an_untimed_c_profile_skips_the_timed_stages(cpu_agent):
    problem = suites.get_problem("cpu/silu")
    prof = cpu_agent.profile(problem, problem.baseline, measure=False)
    assert prof.status == "unmeasured"
    assert _names(prof) == EXPECTED
    assert _ran(prof) == ["static_checks", "build", "stage_inputs", "correctness", "verdict"]


@pytest.fixture(scope="module")
def triton_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("stages-triton")


def _triton_problem() -> Problem:
    return suites.get_problem("triton/rmsnorm_h4096")


def test_an_interpreted_triton_kernel_goes_through_the_stages(triton_cache):
    from hardware_agents.triton import H100Agent

    agent = H100Agent(mode="interpreter", cache_dir=triton_cache, timeout_s=120.0)
    try:
        problem = _triton_problem()
        prof = agent.profile(problem, problem.baseline)
    finally:
        agent.close()
    assert prof.status == "unmeasured", prof.log
    assert _names(prof) == EXPECTED
    # Triton compiles in the harness child; the interpreter does not time by default
    assert _ran(prof) == ["static_checks", "stage_inputs", "correctness", "verdict"]


def _timed_interpreter_agent(triton_cache):
    """A Triton agent that times in the interpreter (a few short rounds)."""
    from hardware_agents.triton import H100Agent

    return H100Agent(
        mode="interpreter",
        cache_dir=triton_cache,
        timeout_s=120.0,
        interpreter_timing=True,
        warmup=1,
        reps=3,
        trials=2,
    )


def test_a_timed_interpreted_triton_kernel_runs_every_timed_stage(triton_cache):
    agent = _timed_interpreter_agent(triton_cache)
    try:
        problem = _triton_problem()
        prof = agent.profile(problem, problem.baseline)
    finally:
        agent.close()
    assert prof.status == "passed", prof.log
    assert _names(prof) == EXPECTED
    assert _ran(prof) == [s for s in EXPECTED if s != "build"]


def test_a_wrong_triton_kernel_is_judged_before_any_timing_round(triton_cache):
    """Timed, the harness child is held stopped before timing round 0 while its correctness
    cases are judged: a wrong kernel ends there (status incorrect, last stage correctness) and
    is never timed; its calibration rounds ran before (they come before the kernel loads)."""
    problem = _triton_problem()
    src = problem.baseline.sources[0]
    store = "(x * inv_rms * w).to(out_ptr.dtype.element_ty)"
    assert store in src.content
    wrong = msgspec.structs.replace(
        problem.baseline,
        sources=[
            msgspec.structs.replace(src, content=src.content.replace(store, store.replace("w)", "w * 2.0)")))
        ],
    )
    agent = _timed_interpreter_agent(triton_cache)
    try:
        prof = agent.profile(problem, wrong)
    finally:
        agent.close()
    assert prof.status == "incorrect", prof.log
    assert _names(prof) == EXPECTED[:4]
    assert prof.counters["phase_calibration_s"] > 0
    assert prof.counters["phase_timing_rounds_s"] == 0  # no round was handed over or clocked
    assert any(not c.passed for c in prof.correctness)


def test_an_emulated_nki_kernel_goes_through_the_stages(tmp_path):
    from hardware_agents.neuron import Trn1Agent

    agent = Trn1Agent(mode="emulate", cache_dir=tmp_path)
    try:
        problem = suites.get_problem("nki_tune/silu")
        prof = agent.profile(problem, problem.baseline)
    finally:
        agent.close()
    assert prof.status == "unmeasured" and prof.estimate is not None, prof.log
    assert _names(prof) == EXPECTED
    # nothing is timed and no clock read: the estimate is priced and gated in roofline_gate
    assert _ran(prof) == ["static_checks", "build", "stage_inputs", "correctness", "roofline_gate", "verdict"]
