"""The NKI prompts: the paper's primer and pitfalls, the true correctness bar, the kernel's
real arguments (after the problem's transforms) and the profiler counters for the planner."""

from __future__ import annotations

from accelopt.problem import Problem
from accelopt.profile import LatencyStats, Profile
from actors.llm.role_table import render
from hardware_agents.neuron import COUNTER_FIELDS


def _profile() -> Profile:
    counters = {f: float(i + 1) for i, f in enumerate(COUNTER_FIELDS)}
    return Profile(
        status="passed",
        device="trn1",
        peak_fraction=0.42,
        bound="matmul",
        t_peak_ms=0.01,
        latency=LatencyStats(
            samples_ms=[0.024] * 10, median_ms=0.024, min_ms=0.024, max_ms=0.0241, spread=0.004
        ),
        counters=counters,
    )


def test_planner_sees_primer_bar_arguments_and_counters(small_suite: dict[str, Problem]) -> None:
    mm = small_suite["matmul"]
    system, user = render(
        "planner",
        "nki",
        problem=mm,
        source=mm.baseline.sources[0].content,
        profile=_profile(),
        device="trn1",
        seed=3,
        request_id="r1",
    )
    for text in (
        "partition dimension",
        "at most 128",
        "192 KiB",
        "at most 512 float32",
        "stationary.T @ moving",
        "128x128 stationary with a 128x512 moving tile",
        "nl.sequential_range",
        "--auto-cast=none",
        "hfu_estimated_percent",
        "spill_reload_bytes",
    ):
        assert text in system.content, text
    assert "relative L2 error ||out - ref||_2 / ||ref||_2 < 2e-05" in user.content
    assert "transform_to_nki_inputs([lhs, rhs])" in user.content
    assert "arg0: float32[2, 128, 128], arg1: float32[128, 512]" in user.content
    assert "transform_nki_outputs(kernel_out, ref)" in user.content
    profile = user.content.split("# Profile\n", 1)[1]
    for field in COUNTER_FIELDS:
        assert f"{field}: " in profile, field
    assert "percent_of_peak: 42.0%" in profile and "bound (roof that limits this problem): matmul" in profile
    assert "def transform_to_nki_inputs(inputs):" in user.content  # the reference module is shown whole


def test_executor_and_fixer_carry_the_pitfalls(small_suite: dict[str, Problem]) -> None:
    arm = small_suite["add_rmsnorm_matmul"]
    system, user = render("executor", "nki", problem=arm, source="code", plan="fuse", device="trn1")
    for text in (
        "nl.sequential_range",
        "basic indexing",
        "cannot be used after the block",
        "Slice sizes must be known",
    ):
        assert text in system.content, text
    assert "arg2: scalar 1e-05" in user.content and "one ```python code block" in user.content
    system, user = render(
        "fixer",
        "nki",
        problem=arm,
        source="bad",
        error_log="partition dimension 256",
        status="compile_error",
        device="trn1",
    )
    assert "`runtime_error`" in system.content and "compile_error" in user.content
    assert "partition dimension 256" in user.content
