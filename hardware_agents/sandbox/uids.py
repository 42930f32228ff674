"""Sandbox uids: who owns one, and what to do with processes whose owner is gone.

As root, every sandbox runs as a uid of its own from a private range (no passwd entry
needed): that makes RLIMIT_NPROC count exactly the sandbox's processes and threads, hides
the agent's /proc entries from the kernel, and lets the agent kill every process the
kernel made, even ones that left its process group.

A uid belongs to the process that holds its lock file (`flock`, in a directory of the
machine: `/dev/shm/accelopt-sandbox-uids/<uid>`); the kernel releases the lock when that
process dies, however it dies. So a uid is taken across every agent process of the
machine without a race, and a process of a sandbox uid whose lock nobody holds, and
which init has adopted, is an orphan: its agent was SIGKILLed (the OOM killer, a Ray
shutdown) and it was not killed with it (a parent-death signal is per parent thread, and
a forked helper does not inherit one). `sweep_orphans` kills such processes; every agent
process runs it once, at its first sandbox.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import tempfile
import threading
import time
from pathlib import Path

from accelopt.procfs import sigkill

UID_BASE = 0x3A000000
UID_SPAN = 1 << 20  # the range swept for orphans
UID_SLOTS = 4096  # uids handed out: UID_BASE .. UID_BASE + UID_SLOTS - 1

_lock = threading.Lock()
_in_use: set[int] = set()
_counter = itertools.count()
_swept = False


def _proc_ids(pid: str) -> tuple[int, int, bytes] | None:
    """(real uid, parent pid, state) of a process from /proc/<pid>/status; None if gone."""
    uid = ppid = -1
    state = b"?"
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"State:"):
                    state = line.split()[1]
                elif line.startswith(b"PPid:"):
                    ppid = int(line.split()[1])
                elif line.startswith(b"Uid:"):
                    uid = int(line.split()[1])
                    break
    except (OSError, ValueError, IndexError):
        return None
    return (uid, ppid, state) if uid >= 0 else None


def pids_of_uid(uid: int, *, zombies: bool = False) -> list[int]:
    """Processes of `uid` (any of its real, effective, saved or fs uids); zombies only if asked."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as f:
                state, uids = b"?", None
                for line in f:
                    if line.startswith(b"State:"):
                        state = line.split()[1]
                    elif line.startswith(b"Uid:"):
                        uids = tuple(int(x) for x in line.split()[1:])
                        break
        except (OSError, ValueError):
            continue
        if uids and uid in uids and (zombies or state not in (b"Z", b"X")):
            out.append(int(entry))
    return out


def kill_uid(uid: int, rounds: int = 100) -> int:
    """SIGKILL every live process of `uid` until none is left; returns how many there were."""
    killed: set[int] = set()
    for _ in range(rounds):
        pids = pids_of_uid(uid)
        if not pids:
            break
        killed |= sigkill(pids)
        time.sleep(0.005)
    return len(killed)


def registry_dir() -> Path:
    """Where the uid lock files live: one place per machine (not per agent setting)."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) else Path(tempfile.gettempdir())
    d = base / "accelopt-sandbox-uids"
    d.mkdir(mode=0o700, exist_ok=True)
    return d


def _try_lock(uid: int) -> int | None:
    """An fd holding the lock of `uid`, or None when another process holds it."""
    fd = os.open(registry_dir() / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


class UidLease:
    """A sandbox uid held by this process until `release()` (or until it dies)."""

    def __init__(self, uid: int, fd: int) -> None:
        self.uid, self._fd = uid, fd

    def release(self) -> None:
        """Kill whatever still runs as the uid, then give it back."""
        kill_uid(self.uid)
        with _lock:
            _in_use.discard(self.uid)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def allocate() -> UidLease:
    """A free sandbox uid: one no other process of the machine holds. Processes left over
    from a dead owner of that uid are killed first."""
    with _lock:
        start = (os.getpid() * 7919 + next(_counter)) % UID_SLOTS
        for i in range(UID_SLOTS):
            uid = UID_BASE + (start + i) % UID_SLOTS
            if uid in _in_use:
                continue
            fd = _try_lock(uid)
            if fd is None:
                continue
            _in_use.add(uid)
            break
        else:
            raise RuntimeError(f"no free sandbox uid: all {UID_SLOTS} are held")
    kill_uid(uid)  # a dead owner's leftovers (the lock was free)
    return UidLease(uid, fd)


def sweep_orphans() -> int:
    """Kill the processes of sandbox uids whose owner is gone; returns how many. A uid's
    processes are orphans when no process holds its lock and every one of them hangs off
    init (its topmost ancestor of the sandbox range was adopted by pid 1). A process of an
    older agent that holds no lock but is alive keeps its sandbox (its children are not
    adopted). Orphans adopted by a subreaper other than init are left to that subreaper."""
    if os.geteuid() != 0:
        return 0
    procs: dict[int, tuple[int, int]] = {}  # pid -> (uid, ppid)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            ids = _proc_ids(entry)
            if ids is not None and ids[2] not in (b"Z", b"X"):
                procs[int(entry)] = (ids[0], ids[1])

    def in_range(uid: int) -> bool:
        return UID_BASE <= uid < UID_BASE + UID_SPAN

    def adopted(pid: int) -> bool:
        seen = set()
        while pid in procs and in_range(procs[pid][0]) and pid not in seen:
            seen.add(pid)
            parent = procs[pid][1]
            if parent in (0, 1):
                return True
            if parent not in procs or not in_range(procs[parent][0]):
                return False
            pid = parent
        return False

    by_uid: dict[int, list[int]] = {}
    for pid, (uid, _) in procs.items():
        if in_range(uid):
            by_uid.setdefault(uid, []).append(pid)
    killed = 0
    for uid, pids in sorted(by_uid.items()):
        with _lock:
            if uid in _in_use:
                continue
        if not all(adopted(p) for p in pids):
            continue
        fd = _try_lock(uid)
        if fd is None:
            continue
        try:
            killed += kill_uid(uid)
        finally:
            os.close(fd)
    return killed


def sweep_once() -> None:
    """`sweep_orphans` the first time a process asks (its first sandbox)."""
    global _swept
    if not _swept:
        _swept = True
        with contextlib.suppress(OSError):
            sweep_orphans()
