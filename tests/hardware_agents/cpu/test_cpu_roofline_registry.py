"""Roofline arithmetic and the cache-aware bandwidth curve (the registry of device families:
tests/hardware_agents/test_families.py)."""

from __future__ import annotations

import pytest

import suites
from accelopt.problem import ExpressionError, eval_expression
from accelopt.profile import peak_fraction
from hardware_agents.pipeline.device_spec import BandwidthPoint, DeviceSpec, t_peak

TRN1 = DeviceSpec(
    kind="trn1",
    name="NeuronCore-v2",
    peak_bw_bytes_s=440.2e9,
    peak_matmul_flops=23.75e12,
    peak_vector_flops=286.72e9,
    source="AccelOpt paper / NKIBench",
)


def test_t_peak_takes_the_binding_roof() -> None:
    mm = suites.get_problem("cpu/matmul")
    t, bound = t_peak(mm, TRN1)
    assert bound == "matmul"
    assert t == pytest.approx(2 * 512**3 / 23.75e12)
    silu = suites.get_problem("cpu/silu")
    t, bound = t_peak(silu, TRN1)
    assert bound == "memory"
    assert t == pytest.approx(4 * 2 * 512 * 4096 / 440.2e9)
    mamba = suites.get_problem("cpu/mamba")
    assert t_peak(mamba, TRN1)[1] == "vector"
    assert peak_fraction(1.0, 4.0) == 0.25
    assert peak_fraction(1.0, 0.0) is None  # nothing measured: no fraction


def test_cache_aware_bandwidth_interpolates_on_log_size() -> None:
    spec = DeviceSpec(
        kind="cpu",
        name="x",
        peak_bw_bytes_s=30e9,
        peak_matmul_flops=1e11,
        peak_vector_flops=1e11,
        bw_curve=[
            BandwidthPoint(working_set_bytes=1 << 20, bytes_per_s=200e9),
            BandwidthPoint(working_set_bytes=1 << 30, bytes_per_s=30e9),
        ],
    )
    assert spec.bandwidth_at(1 << 10) == 200e9
    assert spec.bandwidth_at(1 << 40) == 30e9
    assert spec.bandwidth_at(1 << 25) == pytest.approx(115e9)  # halfway in log space
    assert spec.bandwidth_at(None) == 30e9
    silu = suites.get_problem("cpu/silu")
    small, _ = t_peak(silu, spec, working_set_bytes=1 << 20)
    large, _ = t_peak(silu, spec, working_set_bytes=1 << 30)
    assert large == pytest.approx(small * 200 / 30)


@pytest.mark.parametrize(
    "expr",
    [
        "__import__('os').system('true')",
        "M.__class__",
        "f(M)",
        "M if N else K",
        "[M]",
        "M % 2",
        "M < N",
        "'a' * 3",
        "10 ** 10 ** 10",
    ],
)
def test_roofline_expressions_are_whitelisted(expr: str) -> None:
    with pytest.raises(ExpressionError):
        eval_expression(expr, {"M": 2, "N": 3, "K": 4})


def test_roofline_expression_evaluates_arithmetic() -> None:
    assert eval_expression("2*M*N*K + (M - 1) / 2 ** 2", {"M": 5, "N": 3, "K": 4}) == 121.0
    assert eval_expression("-M + 0.5", {"M": 1}) == -0.5
    with pytest.raises(ExpressionError, match="unknown name"):
        eval_expression("M * Q", {"M": 1})


def test_profile_exports_as_flashinfer_trace() -> None:
    from accelopt.profile import LatencyStats, Profile, SeedCheck
    from suites.flashinfer.traces import to_trace

    p = suites.get_problem("cpu/matmul")
    prof = Profile(
        status="passed",
        device="cpu",
        correctness=[SeedCheck(case="seed0", passed=True, rel_l2=1e-7, max_abs_err=1e-5, max_rel_err=3e-6)],
        latency=LatencyStats(samples_ms=[2.0], median_ms=2.0, min_ms=2.0, max_ms=2.0, spread=0.0),
        peak_fraction=0.5,
        bound="matmul",
        toolchain={"compiler": "gcc 12"},
    )
    tr = to_trace(p, p.baseline, prof, hardware="AMD EPYC", timestamp="2026-01-01T00:00:00")
    ev = tr.evaluation
    assert ev is not None and ev.status == "PASSED" and ev.performance is not None
    assert ev.performance.latency_ms == 2.0 and ev.x_pct_peak == 0.5 and ev.x_bound == "matmul"
    assert (
        ev.correctness is not None and ev.correctness.max_relative_error == 3e-6
    )  # FlashInfer-Bench's metric
    assert ev.correctness.extra is not None and ev.correctness.extra["x_rel_l2"] == 1e-7  # ours
    assert tr.workload.uuid == p.workload.uuid and tr.solution == p.baseline.name
    bad = to_trace(p, p.baseline, Profile(status="compile_error", device="cpu", log="x"), hardware="h")
    assert bad.evaluation is not None and bad.evaluation.status == "COMPILE_ERROR"
    assert bad.evaluation.correctness is None and bad.evaluation.performance is None
