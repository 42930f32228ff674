"""The host's memory, reserved by each profile for what its agent declares it holds at most.

Every profile whose agent declares its peak (`HardwareAgent.memory_bytes`: the Neuron agent's
emulated profiles, hardware_agents/neuron/memory.py) reserves that many bytes of this host's
budget for as long as it runs, and waits while the others' reservations leave too little:
whoever starts it (a profiler actor of a run or a campaign, a fleet worker, `accelopt
profile`, a campaign's measurement), in this process or another. So two profiles whose
declarations exceed the budget together run one after the other instead of both holding their
memory at once and the OS or Ray's memory monitor killing one. A profile that declares more
than the whole budget runs alone, once nothing else is reserved (it is never refused).

The ledger is one JSON file per host and user (`ledger_path`, in this user's host folder:
`host_files.py`), read and written under an exclusive `flock`: a sandboxed kernel (another
uid) or another user can neither read, forge nor lock it (a lock held forever would stop
every profile); the lock
waited for at most `LOCK_WAIT_S`, then a `LedgerError` of one line. Each entry: a holder (pid, its start
time, a token) and its bytes; entries of processes that are gone are dropped on the way, so a killed
profile's reservation does not outlive it. The budget: `$ACCELOPT_PROFILE_MEMORY_BYTES`, else `BUDGET_SHARE` of the
host's memory (the rest: the LLM roles, the memory's index, Ray, the OS).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from accelopt.procfs import proc_stat
from hardware_agents.host_files import HostFileError, host_folder, lock_exclusive, open_private

BUDGET_SHARE = 0.75
BUDGET_ENV = "ACCELOPT_PROFILE_MEMORY_BYTES"
LEDGER_ENV = "ACCELOPT_MEMORY_LEDGER"  # another ledger file (tests: one of their own)
POLL_S = 0.2
LOCK_WAIT_S = 60.0  # the lock is held for a read and a write: longer means a stuck holder
T = TypeVar("T")


class LedgerError(RuntimeError):
    """The ledger cannot be used safely; one line."""


def ledger_path() -> Path:
    """The host's ledger, in this user's host folder (`host_files.py`)."""
    env = os.environ.get(LEDGER_ENV)
    return Path(env) if env else host_folder() / "ledger.json"


def host_bytes() -> int:
    """The host's physical memory (MemTotal)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def budget_bytes() -> int:
    """What this host's profiles may reserve together."""
    env = os.environ.get(BUDGET_ENV)
    if env:
        return int(env)
    return int(host_bytes() * BUDGET_SHARE)


def _started(pid: int) -> str | None:
    """The process's start time (field 22 of /proc/<pid>/stat), None if it is gone: with the
    pid it names one process, whatever reuses the pid later."""
    st = proc_stat(pid)
    return None if st is None else str(st.start_ticks)


class Reservation:
    """A held reservation: `bytes`, `waited_s` (how long it waited for room)."""

    def __init__(self, nbytes: int, waited_s: float) -> None:
        self.bytes = nbytes
        self.waited_s = waited_s


@contextlib.contextmanager
def reserve(nbytes: int | None) -> Iterator[Reservation]:
    """Hold `nbytes` of the host's budget while the block runs (waiting until they fit, or
    until nothing else is held); `None` or 0: nothing reserved, no wait."""
    if not nbytes:
        yield Reservation(0, 0.0)
        return
    token = f"{os.getpid()}:{_started(os.getpid())}:{secrets.token_hex(4)}"
    t0 = time.monotonic()
    while not _try_take(token, nbytes):
        time.sleep(POLL_S)
    try:
        yield Reservation(nbytes, time.monotonic() - t0)
    finally:
        _edit(lambda held: held.pop(token, None))


def _try_take(token: str, nbytes: int) -> bool:
    budget = budget_bytes()

    def take(held: dict[str, int]) -> bool:
        if held and sum(held.values()) + nbytes > budget:
            return False
        held[token] = nbytes
        return True

    return _edit(take)


def _edit(change: Callable[[dict[str, int]], T]) -> T:
    """Apply `change` to the ledger's live entries (a dict token -> bytes) under its lock;
    what `change` returns."""
    fd = _open(ledger_path())
    try:
        _lock(fd)
        raw = b""
        while chunk := os.read(fd, 1 << 16):
            raw += chunk
        try:
            held = {str(k): int(v) for k, v in json.loads(raw or b"{}").items()}
        except (ValueError, AttributeError):
            held = {}  # a torn or foreign file: start over
        held = {k: v for k, v in held.items() if _alive(k)}
        out = change(held)
        data = json.dumps(held).encode()
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, data)
        return out
    finally:
        os.close(fd)  # (releases the lock)


def _open(path: Path) -> int:
    try:
        return open_private(path, "host memory ledger")
    except HostFileError as e:
        raise LedgerError(str(e)) from None


def _lock(fd: int) -> None:
    try:
        lock_exclusive(fd, ledger_path(), "host memory ledger", wait_s=LOCK_WAIT_S, record_holder=False)
    except HostFileError as e:
        raise LedgerError(str(e)) from None


def _alive(token: str) -> bool:
    pid, _, rest = token.partition(":")
    started = rest.rsplit(":", 1)[0]
    return pid.isdigit() and _started(int(pid)) == started


def held_bytes() -> int:
    """What the host's live reservations hold now."""
    return _edit(lambda held: sum(held.values()))


__all__ = ["LedgerError", "Reservation", "budget_bytes", "held_bytes", "host_bytes", "ledger_path", "reserve"]
