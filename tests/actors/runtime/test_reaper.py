"""The reaper without Ray (actors/runtime/reaper.py; with Ray: tests/actors/lifecycle): started
as its `python -I` script for an owner, it kills what the owner started once the owner is
SIGKILLed, a process that left the owner's session included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accelopt.procfs import proc_stat
from actors.runtime.reaper import start_reaper

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the reaper reads /proc")

OWNER = (
    "import subprocess, sys, time\n"
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
    "print(p.pid, flush=True)\n"
    "time.sleep(60)\n"
)


def _running(pid: int) -> bool:
    st = proc_stat(pid)
    return st is not None and st.state not in ("Z", "X")


def test_what_a_killed_owner_started_is_killed() -> None:
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    grandchild = int(owner.stdout.readline())
    reaper = start_reaper(owner.pid)
    assert reaper is not None
    try:
        time.sleep(1.5)  # the reaper records the owner's descendants every 0.25 s
        assert _running(grandchild) and reaper.poll() is None
        owner.kill()
        owner.wait()
        deadline = time.monotonic() + 15
        while _running(grandchild) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(grandchild)
        assert reaper.wait(timeout=60) == 0
    finally:
        if _running(grandchild):
            os.kill(grandchild, signal.SIGKILL)
        owner.kill()
        reaper.kill()
