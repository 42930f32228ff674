"""Fixtures for the Triton agent tests: one interpreter-mode agent per session (its data
cache keeps each problem's inputs and references across tests) and the Triton suite.

Everything is real: the Triton interpreter runs the kernels, in sandboxed child processes;
only the GPU tests (marked `gpu`, skipped without CUDA) need a GPU.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `triton_helpers`

import pytest

import suites
from accelopt.problem import Problem
from hardware_agents.triton import H100Agent


def cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def triton_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("accelopt-triton-cache")


@pytest.fixture(scope="session")
def interp_agent(triton_cache: Path) -> Iterator[H100Agent]:
    agent = H100Agent(mode="interpreter", cache_dir=triton_cache, timeout_s=90.0)
    yield agent
    agent.close()


@pytest.fixture(scope="session")
def triton_suite() -> dict[str, Problem]:
    return {p.name: p for p in suites.load_suite("triton")}
