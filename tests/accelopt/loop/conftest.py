"""Fixtures for the loop tests: a simulated world for the pure core, and isolated configs
for full runs (real nats-server, real Ray, real CPU profiling)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `loop_cli`

_spec = importlib.util.spec_from_file_location("loop_sim", Path(__file__).with_name("sim.py"))
sim = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sim)


@pytest.fixture
def simulate():
    """`simulate(overrides, world=None, shuffle_seed=None)` -> (core, log, peak in-flight)."""
    return sim.drive


@pytest.fixture
def sim_world():
    return sim.World
