"""glibc's malloc told to keep the memory numpy frees, where a profile allocates big arrays.

numpy takes every array from malloc, and glibc serves a block over its mmap threshold (32 MiB
at most, dynamically) with a fresh mapping and unmaps it on free; a thread other than the main
one takes even smaller blocks from an arena of its own, which maps anything over 64 MiB the
same way. Every new array of NKIBench's sizes is then memory the kernel has to fault in and
zero again, page by page: the float64 references (adamw's formula makes a dozen temporaries
of 180 MiB a case), the inputs drawn for each case, and the executor's tiles and outputs.
Measured on this project's 2-core machine (a VM, where a page fault is dear), three adamw
cases drawn, run and judged in one process: 10.4 and 9.9 CPU s before, 5.8 and 7.7 after,
the kernel's (system) share from 6.7 and 5.8 s down to 2.1 and 4.1 s.

The settings: blocks up to `MMAP_THRESHOLD` come from the heap (brk), freed memory at its
top is kept up to `TRIM_THRESHOLD`, and every thread allocates from the main arena (a
thread's own arena would map its big blocks again). What is kept is memory this process
used a moment before (its peak stays what it was); `release()` hands the free part back
once a profile is judged.

Two ways in: `CHILD_ENV`, the environment of a sandboxed child (glibc reads it at start),
and `keep_freed_memory()`, the same settings for the running process (`mallopt`; for the
agent's threads started after it). Both are no-ops where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from typing import Any

MMAP_THRESHOLD = 1 << 30  # a block of 1 GiB or more is still mapped (and unmapped) on its own
TRIM_THRESHOLD = (1 << 31) - 1  # mallopt takes an int: about 2 GiB of free heap top kept
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8

CHILD_ENV: dict[str, str] = {
    "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD),
    "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD),
    "MALLOC_ARENA_MAX": "1",
}

_lock = threading.Lock()
_kept = False


def _libc() -> Any | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def keep_freed_memory() -> bool:
    """The process's malloc keeps what numpy frees (module doc); once per process, idempotent.
    False where it could not be set (not glibc)."""
    global _kept
    with _lock:
        if _kept:
            return True
        libc = _libc()
        if libc is None:
            return False
        ok = all(
            libc.mallopt(param, value) == 1
            for param, value in (
                (_M_ARENA_MAX, 1),
                (_M_TRIM_THRESHOLD, TRIM_THRESHOLD),
                (_M_MMAP_THRESHOLD, MMAP_THRESHOLD),
            )
        )
        _kept = ok
        return ok


def release() -> None:
    """Hand the heap's free memory back to the system (after a profile is judged: an agent
    process waits for its next profile holding only what it uses)."""
    if not _kept:
        return
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


__all__ = ["CHILD_ENV", "MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory", "release"]
