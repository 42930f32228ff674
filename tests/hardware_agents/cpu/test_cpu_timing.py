"""Timing by the parent: batches over buffer sets, fresh contents, statistics, thread safety."""

from __future__ import annotations

import threading

import pytest

import suites
from hardware_agents.base import DEFAULT_SEEDS
from hardware_agents.cpu import CpuAgent
from hardware_agents.cpu import data as data_mod
from hardware_agents.cpu.agent import _MAX_ROTATION_BYTES, rotation_sets
from hardware_agents.cpu.judge import MIN_BATCHES
from hardware_agents.cpu.machine import machine_info


def test_rotation_footprint_exceeds_the_cache_and_moves_contents() -> None:
    l3 = 32 << 20
    # capped at 64 sets; at least 24 (calls per handshake) while they fit in 1 GiB; >= contents + 1
    expected = {1 << 10: 64, 1 << 20: 64, 3 << 20: 25, 32 << 20: 25, 100 << 20: 10, 300 << 20: 4}
    for set_bytes, sets in expected.items():
        assert rotation_sets(set_bytes, 3, l3) == sets
    for set_bytes in (1 << 20, 5 << 20, 11 << 20):
        r = rotation_sets(set_bytes, 3, l3)
        assert r % 3 != 0 and r * set_bytes >= 2 * l3
    assert rotation_sets(8 << 20, 4, l3) == 25  # 24 sets would be a multiple of 4 contents
    assert rotation_sets(8 << 20, 1, l3) == 24  # a single seed: nothing to rotate between


def test_profile_statistics_and_roofline(cpu_agent: CpuAgent) -> None:
    p = suites.get_problem("cpu/rmsnorm_matmul")
    prof = cpu_agent.profile(p, p.baseline)
    assert prof.status == "passed", prof.log
    lat = prof.latency
    assert lat is not None and len(lat.samples_ms) >= MIN_BATCHES  # one sample per timed batch
    assert lat.min_ms <= lat.median_ms <= lat.max_ms and lat.spread >= 0
    assert prof.t_peak_ms is not None and prof.pct_peak == pytest.approx(prof.t_peak_ms / lat.median_ms)
    c = prof.counters
    # a batch's calls each use their own buffer set: at least 3/4 of a rotation that spans
    # twice the L3, unless the rotation hit a cap (64 sets, or the memory limit when a VM
    # reports its host's whole L3)
    l3 = machine_info().l3_bytes
    data = cpu_agent.data.get(p, tuple(DEFAULT_SEEDS))
    sets = rotation_sets(data.set_bytes, len(DEFAULT_SEEDS), l3)
    assert c["footprint_bytes"] % data.set_bytes == 0 and c["footprint_bytes"] >= 0.75 * sets * data.set_bytes
    assert sets * data.set_bytes >= 2 * l3 or sets == 64 or (sets + 1) * data.set_bytes > _MAX_ROTATION_BYTES
    assert c["timed_full_checks"] >= MIN_BATCHES and c["batches"] == len(lat.samples_ms)
    timed_s = sum(lat.samples_ms) * c["calls_per_batch"] / 1e3
    assert c["sandbox_wall_s"] > 0.5 * timed_s and prof.wall_s >= c["sandbox_wall_s"]


def test_timed_contents_are_never_repeated() -> None:
    """Every timed call gets an input set made afresh from the pool: no two draws (and no
    correctness case) share even a 64-element sample, so a content-keyed cache never hits."""
    import numpy as np

    from hardware_agents.cpu.data import ProblemData

    p = suites.get_problem("cpu/silu")
    data = ProblemData(p, (0,))
    rng = np.random.default_rng(1)
    dest = {"x": np.empty_like(data.cases[0].inputs["x"])}
    idx = np.linspace(0, dest["x"].size - 1, 64).astype(np.int64)
    seen = {np.asarray(c.inputs["x"]).reshape(-1)[idx].tobytes() for c in data.cases}
    sums = set()
    for _ in range(200):
        x = data.fresh_content(dest, rng)["x"]
        key = x.reshape(-1)[idx].tobytes()
        assert key not in seen
        seen.add(key)
        sums.add(float(x.sum(dtype=np.float64)))
    assert len(sums) == 200  # not a permutation of one content (sums would repeat)
    assert np.isfinite(dest["x"]).all()


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
