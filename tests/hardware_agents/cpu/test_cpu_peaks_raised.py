"""Peaks measured on a busy machine are too low, and then a correct kernel looks faster than
the roofline allows. Before the agent rejects a result as impossible it measures the peaks
again and keeps the higher values; a result faster than the machine allows is still rejected."""

from __future__ import annotations

from pathlib import Path

import msgspec
from cpu_helpers import c_solution
from test_cpu_impossible_speed import inflated_roofline

import suites
from hardware_agents.cpu import CpuAgent
from hardware_agents.cpu.calibrate import CalibrationRecord, calibration_path, load_calibration
from hardware_agents.pipeline.device_spec import BandwidthPoint

DEFLATE = 1000.0  # as if calibrated while something else had the machine (far beyond any load here)


def _deflated_cache(tmp_path: Path, calibration: CalibrationRecord) -> Path:
    s = calibration.spec
    low = msgspec.structs.replace(
        s,
        peak_bw_bytes_s=s.peak_bw_bytes_s / DEFLATE,
        peak_matmul_flops=s.peak_matmul_flops / DEFLATE,
        peak_vector_flops=s.peak_vector_flops / DEFLATE,
        bw_curve=[
            BandwidthPoint(working_set_bytes=p.working_set_bytes, bytes_per_s=p.bytes_per_s / DEFLATE)
            for p in s.bw_curve
        ],
    )
    path = calibration_path(tmp_path, quick=True)
    path.parent.mkdir(parents=True)
    path.write_bytes(msgspec.json.encode(msgspec.structs.replace(calibration, spec=low)))
    return tmp_path


def _agent(cache: Path) -> CpuAgent:
    return CpuAgent(
        cache_dir=cache, calibrate_if_missing=False, timing_budget_s=0.08, max_reruns=1, timeout_s=30.0
    )


def test_a_correct_kernel_passes_once_the_peaks_are_measured_again(
    tmp_path: Path, calibration: CalibrationRecord
) -> None:
    cache = _deflated_cache(tmp_path, calibration)
    low_bw = load_calibration(cache).spec.peak_bw_bytes_s
    agent = _agent(cache)
    try:
        problem = suites.get_problem("cpu/silu")  # memory-bound: ~10-30% of the true roofline
        prof = agent.profile(problem, problem.baseline)
    finally:
        agent.close()
    assert prof.status == "passed", prof.log
    assert prof.counters.get("peaks_raised") == 1.0
    assert prof.peak_fraction is not None and prof.peak_fraction <= agent.max_pct_peak
    raised = load_calibration(cache)
    assert raised.spec.peak_bw_bytes_s > 5 * low_bw  # saved for every later profile
    assert "raised" in raised.spec.source
    assert raised.created == calibration.created  # the record is amended, not replaced


def test_a_kernel_that_fakes_its_speed_is_rejected_after_the_re_measure(
    tmp_path: Path, calibration: CalibrationRecord
) -> None:
    cache = _deflated_cache(tmp_path, calibration)
    agent = _agent(cache)
    try:
        problem = inflated_roofline(suites.get_problem("cpu/matmul"))
        first = agent.profile(problem, problem.baseline)
        src = problem.baseline.sources[0].content + "\n/* again */\n"
        second = agent.profile(problem, c_solution(problem, src))
    finally:
        agent.close()
    assert first.status == "incorrect" and "faster than the machine allows" in first.log, first.log
    assert first.counters.get("peaks_raised") == 1.0
    # rate-limited: a second suspicious result does not measure the machine again
    assert second.status == "incorrect" and "peaks_raised" not in second.counters
