"""A process's /proc/<pid>/stat line, read in one place (Linux), the processes of a session,
and SIGKILL of a set of pids.

The line is `pid (comm) state ppid pgrp session ... starttime ...`; a comm may hold spaces and
parentheses, so the fields are the ones after the last ')'. Standard library only: the reaper
(`actors/runtime/reaper.py`) runs as a `python -I` script and imports this before anything else.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from typing import NamedTuple


class ProcStat(NamedTuple):
    state: str  # R, S, D, T, t, Z, X, ...
    ppid: int
    session: int
    start_ticks: int  # clock ticks after boot (field 22): with the pid it names one process


def proc_stat(pid: int | str) -> ProcStat | None:
    """The stat line of process `pid`, None when it is gone (or its line is unreadable)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return ProcStat(fields[0].decode(), int(fields[1]), int(fields[3]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def pids_of_session(sid: int) -> set[int]:
    """The live processes of session `sid` (a zombie is left out: nothing to signal)."""
    out = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = proc_stat(entry)
            if st is not None and st.state not in ("Z", "X") and st.session == sid:
                out.add(int(entry))
    return out


def sigkill(pids: Iterable[int]) -> set[int]:
    """SIGKILL each of `pids`; the ones the signal reached (one already gone, or one this
    process may not signal, is left out)."""
    reached = set()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            reached.add(pid)
        except OSError:
            pass
    return reached
