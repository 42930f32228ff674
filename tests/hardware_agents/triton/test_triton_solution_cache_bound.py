"""The solutions' Triton caches together stay within MAX_TOTAL_BYTES: a kernel that fills its
cache (MAX_BYTES each) and is edited again and again is a new solution each time, and without
a bound over all of them the agent's cache folder grows without end. The least recently used
solution goes first; the one just kept stays."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from triton_helpers import baseline_source, solution

import suites
from hardware_agents.triton import solution_cache
from hardware_agents.triton.solution_cache import CACHE_REL, SolutionCache


def _child_cache(workdir: Path, nbytes: int) -> None:
    entry = workdir / CACHE_REL / "entry"
    entry.mkdir(parents=True)
    (entry / "kernel.bin").write_bytes(os.urandom(nbytes))


def _size(root: Path) -> int:
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())


def test_all_solutions_together_stay_within_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(solution_cache, "MAX_TOTAL_BYTES", 3000)
    problem = suites.get_problem("triton/rmsnorm_h4096")
    store = SolutionCache(tmp_path / "solutions")
    sols = [solution(problem, baseline_source(problem) + f"\n# edit {i}\n") for i in range(4)]
    for i, sol in enumerate(sols):
        work = tmp_path / f"work{i}"
        _child_cache(work, 1000)
        assert store.keep(sol, work) == 1
        if i == 1:
            time.sleep(0.05)
            assert store.staged(sols[0])  # solution 0 used again: newer than solution 1
        time.sleep(0.05)
    assert _size(store.root) <= 3000
    assert store.staged(sols[-1]) and store.staged(sols[0])  # the one just kept, the one used
    assert not store.staged(sols[1])  # the least recently used is gone
