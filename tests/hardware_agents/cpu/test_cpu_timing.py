"""Timing by the parent: batches over buffer sets, fresh contents, statistics, thread safety."""

from __future__ import annotations

import threading

import pytest

import suites
from hardware_agents.base import DEFAULT_SEEDS
from hardware_agents.cpu import CpuAgent
from hardware_agents.cpu import data as data_mod
from hardware_agents.cpu.agent import MAX_REGION_BYTES, MAX_TIMED_SETS, timing_sets
from hardware_agents.cpu.judge import HANDSHAKE_SHARE, MIN_BATCHES, MIN_CALLS
from hardware_agents.cpu.oracle import FULL_CHECKS
from hardware_agents.pipeline.phases import phases_of


def test_room_for_timed_sets_is_bounded() -> None:
    # every correctness case, at least the first measured batch, at most 128 sets and 256 MiB
    assert timing_sets(1 << 10, 4) == MAX_TIMED_SETS
    assert timing_sets(3 << 20, 4) == MAX_REGION_BYTES // (3 << 20) == 85
    assert timing_sets(100 << 20, 4) == 4  # the correctness batch needs a set per case
    assert timing_sets(300 << 20, 1) == MIN_CALLS


def test_profile_statistics_and_roofline(cpu_agent: CpuAgent) -> None:
    p = suites.get_problem("cpu/rmsnorm_matmul")
    prof = cpu_agent.profile(p, p.baseline)
    assert prof.status == "passed", prof.log
    lat = prof.latency
    assert lat is not None and len(lat.samples_ms) >= MIN_BATCHES  # one sample per timed batch
    assert lat.min_ms <= lat.median_ms <= lat.max_ms and lat.spread >= 0
    assert prof.t_peak_ms is not None and prof.peak_fraction == pytest.approx(prof.t_peak_ms / lat.median_ms)
    c = prof.counters
    # batches are sized from a first measured call: enough calls for the handshake to be at
    # most 2 % of a batch (unless the room for sets is the cap), each call in its own buffer
    # set, and the memory roof is the bandwidth at the footprint of the largest batch
    data = cpu_agent.data.get(p, tuple(DEFAULT_SEEDS))
    n_max = c["calls_per_batch_max"]
    assert n_max >= MIN_CALLS and c["footprint_bytes"] % data.set_bytes == 0
    assert 0.75 * n_max * data.set_bytes <= c["footprint_bytes"] <= n_max * data.set_bytes
    assert n_max * c["first_call_ms"] * 1e3 * HANDSHAKE_SHARE >= c[
        "handshake_us"
    ] * 0.999 or n_max == timing_sets(data.set_bytes, len(prof.correctness))
    assert prof.t_peak_ms is not None and c["bw_at_footprint_gbs"] > 0
    # every timed call checked in full, or at least the 90 that bound a lazy kernel's escape
    assert c["timed_full_checks"] >= min(c["timed_calls"], FULL_CHECKS)
    assert c["lazy_fraction_caught_99"] <= 0.05 and c["checks_by_baseline"] == 1.0
    assert c["batches"] == len(lat.samples_ms)
    timed_s = sum(lat.samples_ms) * c["calls_per_batch"] / 1e3
    assert c["sandbox_wall_s"] > 0.5 * timed_s and prof.wall_s >= c["sandbox_wall_s"]
    # where the profile's time went, on the agent's clock
    phases = phases_of(c)
    assert set(phases) >= {"compile", "data", "child_start", "correctness", "timing", "child_exit"}, phases
    assert all(t >= 0 for t in phases.values()) and phases["timing"] > 0.5 * timed_s
    assert sum(phases.values()) <= prof.wall_s * 1.05


def test_timed_contents_share_no_run_of_values_with_anything_seen() -> None:
    """Every timed call gets fresh random values: no pair of consecutive values of a draw
    appears anywhere in a correctness case, a pool set or an earlier draw, so a cache that
    indexes the runs it computed never hits (contents made of pieces of pool sets did: every
    run of them had been seen)."""
    import numpy as np

    from hardware_agents.cpu.data import ProblemData

    p = suites.get_problem("cpu/silu")
    data = ProblemData(p, (0,))
    rng = np.random.default_rng(1)
    dest = {"x": np.empty_like(data.cases[0].inputs["x"])}

    def pairs(x: np.ndarray, step: int) -> np.ndarray:  # (x[i], x[i+1]) as one 64-bit key, every `step` i
        bits = np.ascontiguousarray(x, dtype=np.float32).reshape(-1).view(np.uint32).astype(np.uint64)
        return ((bits[:-1] << np.uint64(32)) | bits[1:])[::step]

    seen = np.sort(
        np.concatenate(
            [
                pairs(np.asarray(a), 1)
                for a in [c.inputs["x"] for c in data.cases] + [s["x"] for s in data.pool]
            ]
        )
    )

    def found(keys: np.ndarray, sorted_keys: np.ndarray) -> bool:
        at = np.minimum(np.searchsorted(sorted_keys, keys), sorted_keys.size - 1)
        return bool((sorted_keys[at] == keys).any())

    drawn: list[np.ndarray] = []
    for _ in range(6):
        x = data.fresh_content(dest, rng)["x"]
        assert np.isfinite(x).all() and abs(float(x.std()) - 1.0) < 0.01  # the definition's normal(0, 1)
        new = pairs(x, 16)
        assert not found(new, seen) and not any(found(new, d) for d in drawn)
        drawn.append(np.sort(pairs(x, 1)))


def test_repeat_profile_reuses_build_and_data(cpu_agent: CpuAgent, monkeypatch: pytest.MonkeyPatch) -> None:
    """A repeat profile of the same solution neither recompiles nor regenerates the problem
    data (inputs and references). Its speed is measured in benchmarks/profiler_bench.py."""
    p = suites.get_problem("cpu/bmm")
    assert cpu_agent.profile(p, p.baseline).status == "passed"
    built: list[str] = []
    real = data_mod.ProblemData

    def spy(problem, *a, **kw):  # type: ignore[no-untyped-def]
        built.append(problem.name)
        return real(problem, *a, **kw)

    monkeypatch.setattr(data_mod, "ProblemData", spy)
    prof = cpu_agent.profile(p, p.baseline)
    assert prof.status == "passed", prof.log
    assert prof.counters["compile_cached"] == 1.0
    assert built == []  # inputs and references came from the agent's data cache


def test_single_seed_profile(cpu_agent: CpuAgent) -> None:
    p = suites.get_problem("cpu/matmul_add_rmsnorm")
    prof = cpu_agent.profile(p, p.baseline, seeds=(99,))
    assert prof.status == "passed", prof.log
    assert [c.case for c in prof.correctness] == ["seed99", "large"]


def test_correctness_only_profile_is_unmeasured(cpu_agent: CpuAgent) -> None:
    p = suites.get_problem("cpu/lora")
    prof = cpu_agent.profile(p, p.baseline, measure=False, seeds=(5, 6, 7))
    assert prof.status == "unmeasured" and prof.latency is None
    assert [c.case for c in prof.correctness][:3] == ["seed5", "seed6", "seed7"]


def test_concurrent_profiles_from_threads(cpu_agent: CpuAgent) -> None:
    problems = [suites.get_problem(f"cpu/{n}") for n in ("matmul", "bmm", "lora")]
    results: dict[str, str] = {}

    def work(p) -> None:  # type: ignore[no-untyped-def]
        results[p.name] = cpu_agent.profile(p, p.baseline).status

    threads = [threading.Thread(target=work, args=(p,)) for p in problems]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {p.name: "passed" for p in problems}


def test_agents_with_their_own_caches_time_one_at_a_time_on_the_host(tmp_path) -> None:
    """The timing lock is the host's (this user's), not a cache dir's: a campaign and `accelopt
    profile` with another cache must not time kernels on the same cores at once."""
    import os
    import stat
    import time

    a = CpuAgent(cache_dir=tmp_path / "a", calibrate_if_missing=False)
    b = CpuAgent(cache_dir=tmp_path / "b", calibrate_if_missing=False)
    try:
        order: list[str] = []
        held = threading.Event()

        def first() -> None:
            with a.device_lock():
                held.set()
                time.sleep(0.3)
                order.append("a released")

        t = threading.Thread(target=first)
        t.start()
        assert held.wait(10)
        with b.device_lock():
            order.append("b acquired")
        t.join()
        assert order == ["a released", "b acquired"]
        lock = a._lock_path
        assert lock == b._lock_path and not lock.is_relative_to(tmp_path)
        assert stat.S_IMODE(lock.stat().st_mode) == 0o600 and lock.stat().st_uid == os.geteuid()
        assert stat.S_IMODE(lock.parent.stat().st_mode) == 0o700
    finally:
        a.close()
        b.close()


def test_a_timing_lock_folder_of_another_user_is_refused_in_one_line(tmp_path, monkeypatch) -> None:
    """Whoever owns the folder could swap the lock file: a folder of another uid (made first
    by another local user) is an error naming it, not a lock shared with them."""
    import os

    from hardware_agents.host_files import HostFileError

    folder = tmp_path / "accelopt-host-squatted"
    folder.mkdir(mode=0o700)
    os.chown(folder, 12345, 12345)
    agent = CpuAgent(cache_dir=tmp_path / "a", calibrate_if_missing=False)
    try:
        monkeypatch.setattr(agent, "_lock_path", folder / "cpu-timing.lock")
        with (
            pytest.raises(HostFileError, match="belongs to uid 12345, not this user") as e,
            agent.device_lock(),
        ):
            pass
        assert "\n" not in str(e.value) and not (folder / "cpu-timing.lock").exists()
    finally:
        agent.close()
