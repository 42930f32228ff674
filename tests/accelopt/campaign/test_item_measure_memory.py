"""A campaign's item measurement reserves its memory in the host's ledger as every profile does
(hardware_agents/host_memory.py): with the ledger full, it waits until the holder lets go.
Real emulated profiles of `nki_tune/silu` on trn1 (whose agent declares its peak), the
driver's own agent (`get_agent`) and `measure_item`, with a ledger of the test's own."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import suites
from actors.runtime.item_measure import measure_item
from hardware_agents import host_memory
from hardware_agents.families import get_agent

HOLD_S = 3.0


@pytest.fixture()
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ledger of this test's own (other processes on the host reserve in the real one)."""
    path = tmp_path / "ledger.json"
    monkeypatch.setenv(host_memory.LEDGER_ENV, str(path))
    return path


def test_the_measurement_waits_while_the_ledger_is_full(
    ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = suites.get_problem("nki_tune/silu")
    agent = get_agent("trn1")
    profiles = []
    profile = agent.profile

    def seen(*args, **kwargs):  # the profiles measure_item takes: (when called, the profile)
        began = time.monotonic()
        prof = profile(*args, **kwargs)
        profiles.append((began, prof))
        return prof

    agent.profile = seen  # type: ignore[method-assign]
    try:
        declared = agent.memory_bytes(problem)
        assert declared > 0
        monkeypatch.setenv(host_memory.BUDGET_ENV, str(declared))  # room for one profile
        taken, release = threading.Event(), threading.Event()

        def hold() -> None:  # another profile of this host, holding the whole budget
            with host_memory.reserve(declared):
                taken.set()
                release.wait(60)

        holder = threading.Thread(target=hold)
        holder.start()
        assert taken.wait(30)
        released: list[float] = []
        threading.Timer(HOLD_S, lambda: (released.append(time.monotonic()), release.set())).start()
        m = measure_item(
            agent,
            problem,
            run_id="mem-r001",
            start=problem.baseline.entry_file().content,
            candidate=None,
            rounds=1,
            timeout_s=300,
        )
        holder.join(30)
    finally:
        agent.close()
    assert m["method"] == "estimated" and m["origin"].status == "unmeasured", m
    began, first = profiles[0]
    assert first.counters["memory_declared_bytes"] == declared
    # it waited for the holder: it ran only once the budget was let go (the ledger is polled)
    assert first.counters["memory_wait_s"] >= 1.0
    assert began + first.counters["memory_wait_s"] >= released[0] - host_memory.POLL_S - 0.05
    assert host_memory.held_bytes() == 0  # released
