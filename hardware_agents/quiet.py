"""Keep the trusted side off the cores while a kernel is timed.

The parent of a CPU profile computes with numpy (float64 references, checks). numpy's BLAS
keeps a pool of worker threads that busy-wait for ~0.1 s after every call, so a reference
matmul computed between two timed batches left a worker spinning on one of this machine's
cores while the next batch ran: a two-thread kernel then ran at the speed of one (measured:
matmul 512^3 at 1.67 ms instead of 0.93 ms), and every multi-threaded kernel was ranked on
half the machine.

Two measures, the second being the guarantee:
- `single_threaded_blas()` holds the parent's BLAS pools at one thread for a profile, so
  its workers have nothing to spin after (nested and concurrent uses share one limit: the
  first in sets it, the last out restores it). OpenBLAS does not always honour a limit set
  from a thread other than the one that last changed it, so this is best effort;
- `settle()` waits, bounded, until no other thread of this process is running; the judge
  calls it before every timed batch and records what it waited (`parent_settle_s`) and how
  many batches started with something still running (`parent_busy_batches`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from threadpoolctl import threadpool_info, threadpool_limits

_lock = threading.Lock()
_depth = 0
_limiter: Any = None


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    global _depth, _limiter
    with _lock:
        if _depth == 0:
            _limiter = threadpool_limits(limits=1, user_api="blas")
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _limiter is not None:
                _limiter.restore_original_limits()
                _limiter = None


def blas_threads() -> int:
    """The largest thread count of the BLAS libraries loaded in this process (1 if none)."""
    return max(
        (int(i.get("num_threads", 1)) for i in threadpool_info() if i.get("user_api") == "blas"), default=1
    )


def running_threads() -> list[int]:
    """Ids of the threads of this process, other than the caller, that are running now."""
    me = threading.get_native_id()
    out = []
    for tid in os.listdir("/proc/self/task"):
        if int(tid) == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # the thread ended
        if state == b"R":
            out.append(int(tid))
    return out


def settle(max_s: float = 0.25, poll_s: float = 0.002) -> float:
    """Wait until no other thread of this process runs, at most `max_s`; the seconds waited
    (== max_s: something kept running, e.g. a thread of the host, and the clock starts anyway:
    the caller records it)."""
    t0 = time.perf_counter()
    while running_threads():
        waited = time.perf_counter() - t0
        if waited >= max_s:
            return waited
        time.sleep(poll_s)
    return time.perf_counter() - t0
