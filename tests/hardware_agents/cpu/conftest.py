"""Fixtures for the CPU agent tests: one quick calibration and one agent per session.

Everything is real: gcc compiles, kernels run in sandboxed child processes. The cache
(calibration, builds) lives in a session temp dir, never in the user's ~/.cache.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `cpu_helpers`

from cpu_helpers import scale_shift_problem

from accelopt.problem import Problem
from hardware_agents.cpu import CpuAgent
from hardware_agents.cpu.calibrate import CalibrationRecord, calibrate


@pytest.fixture(scope="session")
def cpu_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("accelopt-cache")


@pytest.fixture(scope="session")
def calibration(cpu_cache: Path) -> CalibrationRecord:
    return calibrate(cpu_cache, quick=True)


@pytest.fixture(scope="session")
def cpu_agent(cpu_cache: Path, calibration: CalibrationRecord) -> Iterator[CpuAgent]:
    agent = CpuAgent(
        cache_dir=cpu_cache, calibrate_if_missing=False, timing_budget_s=0.08, max_reruns=1, timeout_s=30.0
    )
    yield agent
    agent.close()


@pytest.fixture(scope="session")
def scale_shift() -> Problem:
    return scale_shift_problem()
