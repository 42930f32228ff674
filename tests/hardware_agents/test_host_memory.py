"""The host's memory ledger (hardware_agents/host_memory.py) across real processes: a holder
killed with SIGKILL (no cleanup of its own) leaves nothing reserved."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hardware_agents import host_memory


@pytest.fixture()
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ledger of this test's own (other processes on the host reserve in the real one)."""
    path = tmp_path / "ledger.json"
    monkeypatch.setenv(host_memory.LEDGER_ENV, str(path))
    return path


HOLDER = """
import sys, time
from hardware_agents import host_memory
with host_memory.reserve(int(sys.argv[1])):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_killed_holders_reservation_goes_with_it(ledger: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process killed while it holds a reservation (kill -9: no cleanup of its own) leaves
    nothing reserved: the next reservation drops it and takes the room at once."""
    monkeypatch.setenv(host_memory.BUDGET_ENV, "100")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, "80"], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert host_memory.held_bytes() == 80
        # while it lives, 80 of 100 are taken: 30 more wait
        waited = threading.Event()

        def take() -> None:
            with host_memory.reserve(30) as r:
                if r.waited_s > 0.3:
                    waited.set()

        t = threading.Thread(target=take)
        t.start()
        time.sleep(0.6)
        assert t.is_alive()  # still waiting
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        t.join(10)
        assert not t.is_alive() and waited.is_set()
        assert host_memory.held_bytes() == 0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
