"""Calibration: measured peaks, cached per machine, reused without re-measuring."""

from __future__ import annotations

from pathlib import Path

from hardware_agents.cpu import CpuAgent
from hardware_agents.cpu.calibrate import CalibrationRecord, calibrate, calibration_path, load_calibration
from hardware_agents.cpu.machine import machine_info


def test_quick_calibration_measures_plausible_peaks(calibration: CalibrationRecord) -> None:
    s = calibration.spec
    assert s.kind == "cpu" and s.measured and calibration.quick
    assert 1e9 < s.peak_bw_bytes_s < 2e12
    assert 1e9 < s.peak_matmul_flops < 1e14
    assert 1e9 < s.peak_vector_flops < 1e14
    sizes = [p.working_set_bytes for p in s.bw_curve]
    assert sizes == sorted(sizes) and len(sizes) >= 3
    assert sizes[-1] >= min(2 * machine_info().l3_bytes, 1 << 30)  # the last point is DRAM (capped)
    assert s.peak_bw_bytes_s == s.bw_curve[-1].bytes_per_s


def test_calibration_is_cached_per_machine(cpu_cache: Path, calibration: CalibrationRecord) -> None:
    path = calibration_path(cpu_cache, quick=True)
    assert path.is_file() and machine_info().key() in path.name
    again = calibrate(cpu_cache, quick=True)
    assert again.created == calibration.created  # read from the cache, not measured again
    assert load_calibration(cpu_cache).created == calibration.created
    assert load_calibration(cpu_cache, allow_quick=False) is None


def test_agent_uses_the_cached_calibration(cpu_cache: Path, calibration: CalibrationRecord) -> None:
    agent = CpuAgent(cache_dir=cpu_cache, calibrate_if_missing=False)
    try:
        assert agent.spec == calibration.spec
    finally:
        agent.close()


def test_agent_without_calibration_says_what_to_run(tmp_path: Path) -> None:
    agent = CpuAgent(cache_dir=tmp_path, calibrate_if_missing=False)
    try:
        agent.spec  # noqa: B018
    except RuntimeError as e:
        assert "accelopt calibrate" in str(e)
    else:
        raise AssertionError("expected a RuntimeError")
    finally:
        agent.close()
