"""Which runs may attach to a warm pool (`actors/runtime/pool.py`), from its record alone: no agents
are started here, so each refusal is checked without the cost of a pool."""

from __future__ import annotations

import os
import subprocess
import sys

import msgspec

from accelopt.config import build_config
from actors.runtime.pool import PoolInfo, agent_settings, attach_check, pool_path, read_pool, record_pool


def _cfg(tmp_path, *overrides: str):
    return build_config(overrides=[f"root={tmp_path / 'runs'}", f"memory.uri={tmp_path / 'mem'}", *overrides])


def test_a_run_with_the_pools_settings_attaches(tmp_path):
    cfg = _cfg(tmp_path)
    assert attach_check(cfg, ["cpu"]) == (None, None)  # no pool: the run starts its own agents
    record_pool(cfg, "nats://127.0.0.1:1", ["cpu"])
    pool, why = attach_check(cfg, ["cpu"])
    assert (
        why is None and pool is not None and pool.pid == os.getpid() and pool.nats_url == "nats://127.0.0.1:1"
    )


def test_a_run_the_pool_cannot_serve_is_told_why(tmp_path):
    record_pool(_cfg(tmp_path), "nats://127.0.0.1:1", ["cpu"])
    pool, why = attach_check(_cfg(tmp_path), ["cpu", "trn1"])
    assert pool is None and "no profiler for trn1" in why
    pool, why = attach_check(_cfg(tmp_path, "profiling.timeout_s=5"), ["cpu"])
    assert pool is None and "profiling" in why
    pool, why = attach_check(_cfg(tmp_path, f"memory.uri={tmp_path / 'other'}"), ["cpu"])
    assert pool is None and "memory.uri" in why
    # with its memory off, a run does not care where the pool's memory is
    pool, why = attach_check(
        _cfg(tmp_path, f"memory.uri={tmp_path / 'other'}", "memory.enabled=false"), ["cpu"]
    )
    assert why is None and pool is not None


def test_the_record_of_a_dead_pool_is_removed(tmp_path):
    cfg = _cfg(tmp_path)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    path = pool_path(cfg.root)
    path.parent.mkdir(parents=True)
    path.write_bytes(
        msgspec.json.encode(
            PoolInfo(
                nats_url="nats://127.0.0.1:1",
                pid=int(dead.stdout),
                devices=["cpu"],
                agents=agent_settings(cfg),
                started_at=0.0,
            )
        )
    )
    assert read_pool(cfg.root) is None and not path.exists()
    path.write_text("{not json")  # a torn record is no pool either
    assert read_pool(cfg.root) is None


def test_up_refuses_a_second_pool_for_the_same_root(tmp_path):
    cfg = _cfg(tmp_path)
    record_pool(cfg, "nats://127.0.0.1:1", ["cpu"])  # this test process plays the running pool
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", "up", "--root", cfg.root],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "a pool is already up" in out.stderr and f"pid {os.getpid()}" in out.stderr
