"""A profile reserves what its agent declares of the host's memory (hardware_agents/host_memory.py,
the Neuron agent's declaration: hardware_agents/neuron/memory.py): real emulated profiles of the
tests' small NKIBench problems, in two threads, with a ledger of the test's own."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelopt.problem import Problem
from accelopt.profile import Profile
from hardware_agents import host_memory
from hardware_agents.neuron import NeuronAgent, Trn1Agent
from hardware_agents.neuron.memory import profile_bytes


@pytest.fixture()
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ledger of this test's own (other processes on the host reserve in the real one)."""
    path = tmp_path / "ledger.json"
    monkeypatch.setenv(host_memory.LEDGER_ENV, str(path))
    return path


@pytest.fixture(scope="module")
def agents() -> Iterator[tuple[NeuronAgent, NeuronAgent]]:
    pair = (Trn1Agent(mode="emulate", timeout_s=300), Trn1Agent(mode="emulate", timeout_s=300))
    yield pair
    for a in pair:
        a.close()


def _side_by_side(agents: tuple[NeuronAgent, NeuronAgent], p: Problem) -> list[tuple[float, Profile]]:
    """Both agents profile `p`'s baseline at once, each in a thread: (when its call began, the profile)."""
    out: list[tuple[float, Profile] | None] = [None, None]
    go = threading.Barrier(2)

    def one(i: int) -> None:
        go.wait()
        t0 = time.monotonic()
        out[i] = (t0, agents[i].profile(p, p.baseline))

    threads = [threading.Thread(target=one, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert all(o is not None for o in out)
    return [o for o in out if o is not None]


def _span(began: float, prof: Profile) -> tuple[float, float]:
    """When the profile held its reservation: from the end of its wait to the end of its work."""
    start = began + prof.counters["memory_wait_s"]
    return start, start + prof.wall_s


def test_two_profiles_whose_declarations_exceed_the_budget_run_one_after_the_other(
    agents: tuple[NeuronAgent, NeuronAgent],
    small_suite: dict[str, Problem],
    ledger: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    p = small_suite["silu"]
    declared = agents[0].memory_bytes(p)
    assert declared == profile_bytes(p, 2) > 0  # two seeds; nothing of another problem cached yet
    # room for one and a half: the second waits for the first
    monkeypatch.setenv(host_memory.BUDGET_ENV, str(declared * 3 // 2))
    runs = _side_by_side(agents, p)
    for _, prof in runs:
        assert prof.status == "unmeasured" and all(c.passed for c in prof.correctness), prof.log
        assert prof.counters["memory_declared_bytes"] == declared
    (a0, a1), (b0, b1) = sorted(_span(t, prof) for t, prof in runs)
    assert b0 >= a1 - 0.01, f"the profiles overlapped: {a0:.2f}-{a1:.2f} and {b0:.2f}-{b1:.2f}"
    # the one that waited, waited for (most of) the other's work: the wait is the reservation's,
    # not a fixed figure (a fast emulator finishes a small silu in well under a second)
    first, second = sorted((prof for _, prof in runs), key=lambda prof: prof.counters["memory_wait_s"])
    assert second.counters["memory_wait_s"] >= 0.8 * first.wall_s > 0
    assert host_memory.held_bytes() == 0  # both released

    # room for both: they run at once (what serialised them above is the budget)
    monkeypatch.setenv(host_memory.BUDGET_ENV, str(declared * 3))
    runs = _side_by_side(agents, p)
    (a0, a1), (b0, b1) = sorted(_span(t, prof) for t, prof in runs)
    assert b0 < a1, "with room for both, one still waited for the other"


def test_a_profile_that_declares_more_than_the_budget_runs_alone_but_runs(
    agents: tuple[NeuronAgent, NeuronAgent],
    small_suite: dict[str, Problem],
    ledger: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(host_memory.BUDGET_ENV, "1")
    p = small_suite["silu"]
    prof = agents[0].profile(p, p.baseline)
    assert prof.status == "unmeasured" and prof.counters["memory_wait_s"] < 0.5


def test_the_declaration_counts_what_the_data_cache_keeps_for_other_problems(
    agents: tuple[NeuronAgent, NeuronAgent], small_suite: dict[str, Problem], ledger: Path
) -> None:
    """Once silu's seeds are staged (they stay in `/dev/shm` between profiles, the agent's data
    cache), another problem's declaration carries them; silu's own does not count them twice."""
    silu, matmul = small_suite["silu"], small_suite["matmul"]
    agent = agents[0]
    agent.profile(silu, silu.baseline)  # (the earlier tests' profiles staged them already)
    kept = sum(d.staged_bytes() for _, d in agent.data.entries())
    assert kept > 0
    assert agent.memory_bytes(matmul) == profile_bytes(matmul, 2) + kept
    assert agent.memory_bytes(silu) == profile_bytes(silu, 2)
