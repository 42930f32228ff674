"""Nothing of a local Ray outlives the process that started it.

`ray.init()` starts Ray's head (gcs_server, raylet, the dashboard, the monitors) as children
of the driver that die with it, but the raylet's own children do not: after a `kill -9` of
the driver, Ray's DashboardAgent and RuntimeEnvAgent notice that the raylet is gone within
two seconds, then try to tell the (dead) GCS about it and live on for about a minute
(measured: 60 to 75 s on Ray 2.60), and a worker that was busy may linger too. A dead
driver runs no cleanup, so the cleanup runs in a process of its own:

the **reaper**, a small stdlib process started beside the driver's local Ray
(`start_reaper`), in a session of its own (the terminal's Ctrl-C and a kill of the driver's
session do not reach it). While the driver lives it records the driver's descendants every
`INTERVAL_S` (pid and start time: Ray's agents are reparented to init once the raylet dies,
so they are found by that record, not by the tree at the end). Once the driver is gone (a
pidfd says so at once; polling where there is none) it SIGKILLs every recorded process that
still runs, and their children, until none is left, then removes what the dead processes
left under the sandboxes' base (`/dev/shm`) and the temp dir (`sandbox.resources.sweep_stale`:
their `accelopt-*-<pid>-` folders and the work-dir mounts in them), and exits. A driver that
ends normally has stopped Ray already; the reaper then finds nothing to kill.

Run as a script (`python -I reaper.py OWNER_PID`): nothing but the standard library (and
`accelopt.procfs`, which uses only it) is imported until the sweep.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

try:
    from accelopt.procfs import ProcStat, proc_stat, sigkill
except ImportError:  # run as a script (`python -I`): the packages are beside this folder
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from accelopt.procfs import ProcStat, proc_stat, sigkill

INTERVAL_S = 0.25  # how often the driver's descendants are recorded
KILL_FOR_S = 10.0  # the most the reaper spends killing before it sweeps and exits

_started: dict[int, subprocess.Popen[bytes]] = {}  # owner pid -> its reaper


def start_reaper(owner: int | None = None) -> subprocess.Popen[bytes] | None:
    """The reaper of `owner` (default: this process), started once per owner; None where
    there is no /proc (not Linux)."""
    owner = owner or os.getpid()
    if not Path("/proc/self/stat").exists():
        return None
    proc = _started.get(owner)
    if proc is not None and proc.poll() is None:
        return proc
    proc = subprocess.Popen(
        [sys.executable, "-I", str(Path(__file__).resolve()), str(owner)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    _started[owner] = proc
    return proc


# --- the reaper process -------------------------------------------------------------------------


def _table() -> dict[int, ProcStat]:
    """Every live process: pid -> its stat line."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(name)
            if st is not None:
                out[int(name)] = st
    return out


def descendants(roots: set[int], table: dict[int, ProcStat]) -> set[int]:
    """The processes of `table` below `roots` (not the roots)."""
    children: dict[int, list[int]] = {}
    for pid, st in table.items():
        children.setdefault(st.ppid, []).append(pid)
    out: set[int] = set()
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def _alive(pid: int, started: int) -> bool:
    st = proc_stat(pid)
    return st is not None and st.start_ticks == started and st.state != "Z"


def _wait_for_owner(owner: int, started: int, known: dict[int, int]) -> None:
    """Record the owner's descendants (pid -> start time) until it is gone."""
    me = os.getpid()
    try:
        fd: int | None = os.pidfd_open(owner)
    except (AttributeError, OSError):
        fd = None
    poller = select.poll()
    if fd is not None:
        poller.register(fd, select.POLLIN)
    while _alive(owner, started):
        table = _table()
        for pid in descendants({owner}, table) - {me}:
            known.setdefault(pid, table[pid].start_ticks)
        if fd is not None:
            if poller.poll(INTERVAL_S * 1000):
                break
        else:
            time.sleep(INTERVAL_S)


def reap(known: dict[int, int], deadline: float) -> int:
    """SIGKILL every recorded process still running and the processes below them, until none
    is left or `deadline`; how many were killed."""
    killed: set[int] = set()
    me = os.getpid()
    while time.monotonic() < deadline:
        table = _table()
        live = {
            pid
            for pid, t in known.items()
            if pid in table and table[pid].start_ticks == t and table[pid].state != "Z"
        }
        below = {p for p in descendants(live, table) if table[p].state != "Z"}
        targets = (live | below) - {me}
        if not targets:
            break
        for pid in targets:
            known.setdefault(pid, table[pid].start_ticks)
        killed |= sigkill(targets)
        time.sleep(0.05)
    return len(killed)


def sweep() -> None:
    """What the dead processes left in the sandboxes' base and the temp dir."""
    import tempfile

    from hardware_agents.sandbox import default_base_dir, sweep_stale  # on the path (see the imports)

    for base in {default_base_dir(), Path(tempfile.gettempdir())}:
        try:
            sweep_stale(base)
        except OSError:
            pass


def main(argv: list[str]) -> int:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # it ends when its owner has, never before
    owner = int(argv[1])
    st = proc_stat(owner)
    if st is None:
        return 0
    known: dict[int, int] = {}
    _wait_for_owner(owner, st.start_ticks, known)
    reap(known, time.monotonic() + KILL_FOR_S)
    sweep()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
