"""Fixtures for the cpu_v2 suite tests: one CPU agent per session, correctness-only profiles.

Everything is real: gcc compiles every sampled point, the kernels run in the agent's sandboxed
harness and are judged against the float64 references. No timing, so no calibration is
needed; the build cache lives in a session temp dir, never in the user's ~/.cache.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hardware_agents.base import HardwareAgent
from hardware_agents.families import get_agent


@pytest.fixture(scope="session")
def cpu_v2_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HardwareAgent]:
    agent = get_agent(
        "cpu",
        cache_dir=tmp_path_factory.mktemp("accelopt-cache-v2"),
        calibrate_if_missing=False,
        timeout_s=60.0,
    )
    yield agent
    agent.close()
