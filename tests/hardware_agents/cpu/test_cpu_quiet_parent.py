"""The parent of a CPU profile keeps off the cores while the kernel is timed.

numpy's BLAS workers busy-wait after every call; a reference matmul between two timed
batches used to leave one spinning through the next batch, so a two-thread kernel ran on
one core (hardware_agents/quiet.py). Real numpy, real threads, a real profile.
"""

from __future__ import annotations

import numpy as np
import pytest

import suites
from hardware_agents import quiet
from hardware_agents.cpu import CpuAgent


def test_blas_is_single_threaded_inside_and_restored_after() -> None:
    before = quiet.blas_threads()
    with quiet.single_threaded_blas():
        assert quiet.blas_threads() == 1
        with quiet.single_threaded_blas():  # nested: still one thread
            assert quiet.blas_threads() == 1
        assert quiet.blas_threads() == 1  # the inner exit does not lift the outer limit
    assert quiet.blas_threads() == before


def test_settle_waits_for_a_spinning_blas_worker() -> None:
    if quiet.blas_threads() < 2:
        pytest.skip("numpy's BLAS runs one thread here: no worker to spin")
    a = np.random.default_rng(0).random((400, 400))
    for _ in range(3):
        a @ a  # a two-thread sgemm: its worker then busy-waits for a while
    assert quiet.running_threads(), "expected numpy's BLAS worker to be spinning right after a call"
    waited = quiet.settle(max_s=2.0)
    assert 0 < waited < 2.0
    assert not quiet.running_threads()


def test_no_batch_is_timed_while_a_parent_thread_runs(cpu_agent: CpuAgent) -> None:
    """Right after a two-thread sgemm here (its worker spinning), a profile of a two-thread
    kernel: every timed batch starts with the parent's other threads stopped."""
    a = np.random.default_rng(0).random((400, 400))
    a @ a
    p = suites.get_problem("cpu_v2/matmul")
    prof = cpu_agent.profile(p, p.baseline)
    assert prof.status == "passed", prof.log
    assert prof.counters["parent_busy_batches"] == 0.0
    assert prof.counters["batches"] >= 3
