"""Shared fixtures: a real nats-server, a real local Ray, offline environment.

The environment variables must be set before any heavy import (litellm, Ray, Triton).
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import asyncio
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import accelopt  # noqa: F401  (offline defaults)
from events.server import NatsServer

# helpers shared by the test folders (scripted_llm, testdirs, runlog); only that folder, never tests/
# itself, whose folders named like the packages would shadow them
sys.path.insert(0, str(Path(__file__).resolve().parent / "shared"))


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A fresh nats-server with JetStream on a free loopback port, per test."""
    server = NatsServer(tmp_path / "nats")
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="session")
def shared_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """One nats-server for tests that only need a place to write (isolate by run id)."""
    server = NatsServer(tmp_path_factory.mktemp("nats-shared"))
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="session")
def ray_session(tmp_path_factory: pytest.TempPathFactory):
    """One local Ray for the whole session (each init/shutdown pair costs ~5 s)."""
    import ray

    from actors.runtime.deployment import ray_temp_dir

    if not ray.is_initialized():
        ray.init(
            num_cpus=4,
            include_dashboard=False,
            object_store_memory=150 * 1024 * 1024,
            log_to_driver=False,
            configure_logging=False,
            _temp_dir=str(ray_temp_dir()),
        )
    yield ray
    with contextlib.suppress(Exception):
        ray.shutdown()


def run_async(coro):
    """Run a coroutine to completion from a sync test."""
    return asyncio.run(coro)


@pytest.fixture
def run_config(tmp_path: Path):
    """`run_config(*overrides)`: a quick-preset RunConfig isolated in tmp_path (runs root and
    memory), for full runs; without the end-of-problem re-measure (6 more profiles per problem,
    timed on purpose: the tests that look at it ask for it)."""
    from accelopt.config import RunConfig, build_config

    def make(*overrides: str, preset: str = "quick") -> RunConfig:
        return build_config(
            preset=preset,
            overrides=[
                f"root={tmp_path / 'runs'}",
                f"memory.uri={tmp_path / 'memory'}",
                "profiling.timeout_s=60",
                "search.remeasure_rounds=0",
                *overrides,
            ],
        )

    return make
