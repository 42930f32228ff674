"""accelopt/procfs.py: the one reader of /proc/<pid>/stat (the reaper, the host memory ledger,
the sandbox's uid sweep and freezer, the run source's liveness check) and SIGKILL of a set."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accelopt.procfs import pids_of_session, proc_stat, sigkill

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")

SLEEP = "import time; time.sleep(60)"


def test_this_process_reads_as_itself() -> None:
    st = proc_stat(os.getpid())
    assert st is not None
    assert (st.state, st.ppid, st.session) == ("R", os.getppid(), os.getsid(0))
    later = subprocess.Popen([sys.executable, "-c", SLEEP])
    try:
        child = proc_stat(later.pid)
        assert child is not None and child.ppid == os.getpid() and child.start_ticks >= st.start_ticks
    finally:
        later.kill()
        later.wait()


def test_a_name_with_spaces_and_parentheses_is_read_past(tmp_path: Path) -> None:
    """The fields are those after the last ')': a name `a) b (c` would shift them otherwise."""
    link = tmp_path / "a) b (c"
    link.symlink_to(sys.executable)
    p = subprocess.Popen([str(link), "-c", SLEEP])
    try:
        time.sleep(0.2)
        assert Path(f"/proc/{p.pid}/stat").read_text().startswith(f"{p.pid} (a) b (c) ")
        st = proc_stat(p.pid)
        assert st is not None and st.ppid == os.getpid() and st.session == os.getsid(0)
    finally:
        p.kill()
        p.wait()


def test_a_zombie_and_a_gone_process() -> None:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while (st := proc_stat(p.pid)) is not None and st.state != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert st is not None and st.state == "Z"  # ended, not waited for yet
    p.wait()
    assert proc_stat(p.pid) is None
    assert proc_stat("self") is not None and proc_stat("no-such-pid") is None


def test_sigkill_says_which_pids_it_reached() -> None:
    live = subprocess.Popen([sys.executable, "-c", SLEEP])
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert sigkill([live.pid, gone.pid]) == {live.pid}
    assert live.wait(timeout=10) == -9


def test_the_live_processes_of_a_session() -> None:
    """Its leader and what it started, not another session's; a zombie left out."""
    code = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(60)\n"  # never waits for p: killed, p stays a zombie
    )
    leader = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert leader.stdout is not None
        child = int(leader.stdout.readline())
        assert pids_of_session(leader.pid) == {leader.pid, child}
        assert os.getpid() not in pids_of_session(leader.pid)
        assert sigkill([child]) == {child}
        deadline = time.monotonic() + 10
        while (st := proc_stat(child)) is not None and st.state != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert st is not None and st.state == "Z"
        assert pids_of_session(leader.pid) == {leader.pid}
    finally:
        leader.kill()
        leader.wait()
