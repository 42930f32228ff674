"""Keep the trusted side off the cores while a kernel is timed.

The parent of a CPU profile computes with numpy (float64 references, checks). numpy's BLAS
keeps a pool of worker threads that busy-wait for ~0.1 s after every call, so a reference
matmul computed between two timed batches left a worker spinning on one of this machine's
cores while the next batch ran: a two-thread kernel then ran at the speed of one (measured:
matmul 512^3 at 1.67 ms instead of 0.93 ms), and every multi-threaded kernel was ranked on
half the machine.

The same holds for the rest of the host: work of other processes (another run, an
embedding, a test suite) that shares the cores stretches a timed batch by whatever share it
takes. `TimingPriority(nice, ...)` raises, for the timed batches only, the thread that
drives them (its clock and its wait for the child's stop) and the kernel's own threads. At
-20 a thread outweighs a normal one 87 to 1, so a host loaded 10 deep still leaves the timed
threads ~95% of their cores; and a kernel that spins outside the timing (while it is
checked) does so at the host's priority.

Two measures against the parent's own threads, the second being the guarantee:
- `single_threaded_blas()` holds the parent's BLAS pools at one thread for a profile, so
  its workers have nothing to spin after (nested and concurrent uses share one limit: the
  first in sets it, the last out restores it). OpenBLAS does not always honour a limit set
  from a thread other than the one that last changed it, so this is best effort;
- `settle()` waits, bounded, until no other thread of this process is running; the judge
  calls it before every timed batch and records what it waited (`parent_settle_s`) and how
  many batches started with something still running (`parent_busy_batches`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from threadpoolctl import threadpool_info, threadpool_limits

TIMING_NICE = -20  # the default priority of a timed kernel's threads and of the thread timing them
RAISED_MAX_S = 10.0  # a kernel raised for its timing longer than this is given its priority back

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


def _nice(tid: int) -> int | None:
    try:
        return os.getpriority(os.PRIO_PROCESS, tid)
    except OSError:  # the thread ended
        return None


def _renice(tids: Iterable[int], nice: int) -> int:
    """Each thread of `tids` at `nice`; how many were (a thread that ended is skipped)."""
    done = 0
    for tid in tids:
        with contextlib.suppress(ProcessLookupError):
            os.setpriority(os.PRIO_PROCESS, tid, nice)
            done += 1
    return done


def _give_back_to(kernel_threads: Callable[[], list[int]], nice: int, passes: int = 8) -> None:
    """Every thread of a kernel that may be running back at `nice`: again while a census finds
    one that is not (a thread started during a pass by one not yet given back inherited the
    raise; each pass leaves fewer such creators)."""
    for _ in range(passes):
        raised = [t for t in kernel_threads() if (n := _nice(t)) is not None and n != nice]
        if not raised:
            return
        _renice(raised, nice)


class TimingPriority:
    """A context: the calling thread (the one that drives the batches and reads the clock)
    and the kernel's threads (`kernel_threads()`: the child is held stopped on entry and on
    exit) at `nice` inside, then back: the caller's to its old value, every thread the kernel
    has then (one it started meanwhile inherited the raised value) to the kernel's old one.
    Only the timing is raised: a kernel that spins while it is checked or compiled runs at the
    host's priority. A kernel still raised after `max_s` is given its old priority at once
    (`dropped_after_s`): a kernel that spins once it is timed holds the host's cores for that
    long at most, not for its whole time limit.

    `applied`: the nice value applied, or None: not asked (`nice` None), or refused (without
    CAP_SYS_NICE a negative value is refused: the timing runs at the old priorities)."""

    def __init__(
        self, nice: int | None, kernel_threads: Callable[[], list[int]], max_s: float | None = None
    ) -> None:
        self.nice, self.kernel_threads = nice, kernel_threads
        self.max_s = RAISED_MAX_S if max_s is None else max_s
        self.applied: int | None = None
        self.dropped_after_s: float | None = None
        self._lock = threading.Lock()
        self._kernel_before: int | None = None
        self._timer: threading.Timer | None = None
        self._t0 = 0.0

    def __enter__(self) -> TimingPriority:
        if self.nice is None:
            return self
        self._me = threading.get_native_id()
        self._before = os.getpriority(os.PRIO_PROCESS, self._me)
        tids = self.kernel_threads()
        # the kernel's priority as it was spawned: a thread may only have lowered its own since
        self._kernel_before = min((n for n in map(_nice, tids) if n is not None), default=None)
        try:
            os.setpriority(os.PRIO_PROCESS, self._me, self.nice)
            _renice(tids, self.nice)
        except OSError:
            self._give_back()
            return self
        self.applied = os.getpriority(os.PRIO_PROCESS, self._me)
        self._t0 = time.perf_counter()
        self._timer = threading.Timer(self.max_s, self._drop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def _drop(self) -> None:
        with self._lock:
            if self._kernel_before is not None:
                self.dropped_after_s = time.perf_counter() - self._t0
                _give_back_to(self.kernel_threads, self._kernel_before)
                self._kernel_before = None

    def _give_back(self) -> None:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, self._me, self._before)
        with self._lock:
            if self._kernel_before is not None:
                with contextlib.suppress(OSError):
                    _give_back_to(self.kernel_threads, self._kernel_before)
                self._kernel_before = None

    def __exit__(self, *exc: object) -> None:
        if self.nice is None:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._give_back()
