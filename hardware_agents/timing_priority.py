"""Other work on the host stays out of a timed batch: the batch runs at a raised priority.

A CPU figure is the parent's clock around a batch the kernel's process runs between two
stops (`cpu/runner.py`). Work of other processes on the same cores (another run, an
embedding, a test suite) stretches that batch by whatever share it takes: on this 2-core
machine at load 10, two re-measures of the same kernels came out 20-60% apart. For each timed
batch, `TimingPriority.batch()` puts the thread that drives it (its clock, its wait for the
stop) and every thread of the kernel's process at `nice` (-20 by default: such a thread
outweighs a normal one 87 to 1, so a host loaded 10 deep still leaves the timed threads ~95%
of their cores), and gives both their old priority back when the batch ends. The kernel is
held stopped at both ends, so the census of its threads is exact: a thread it starts during
the batch inherits the raise and is given its old priority with the others. Between batches
(the parent's checks), and in every other stage (compile, correctness), nothing is raised: a
kernel that spins while it is checked does so at the host's priority.

A batch still running `RAISED_MAX_S` after its raise gives the kernel its old priority at
once, and no later batch of the profile is raised (`dropped_after_s`): a kernel that spins
once it is timed holds the host's cores at -20 for that long at most, not for its whole time
limit. A running kernel's threads are given back until a census finds none still raised; a
kernel that keeps starting threads faster than that (each inheriting the raise) is killed
(`stuck`), and its verdict says why.

Raising a priority needs CAP_SYS_NICE (root, as the sandbox's uid drop does); without it the
batches run at the old priority (`refused` says why), and the profile has no `timing_nice`
counter. The kernel's sandbox sets RLIMIT_NICE to 0 (`sandbox/resources.py`), so it can never
raise its own priority, whatever the host allows its user.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator

TIMING_NICE = -20  # the default priority of a timed batch: the kernel's threads and the thread timing them
RAISED_MAX_S = 10.0  # a batch raised for longer than this gives the kernel its priority back
GIVE_BACK_PASSES = 8  # censuses of a running kernel's threads before it is declared stuck


def nice_of(tid: int) -> int | None:
    """The nice value of thread `tid` (None: it ended)."""
    try:
        return os.getpriority(os.PRIO_PROCESS, tid)
    except OSError:
        return None


def _renice(tids: Iterable[int], nice: int) -> None:
    """Each thread of `tids` at `nice` (a thread that ended is skipped)."""
    for tid in tids:
        with contextlib.suppress(ProcessLookupError):
            os.setpriority(os.PRIO_PROCESS, tid, nice)


def give_back(threads: Callable[[], list[int]], nice: int, passes: int = GIVE_BACK_PASSES) -> bool:
    """Every thread of `threads()` at `nice`, again while a census finds one that is not (a
    thread started during a pass by one not yet given back inherited the raise); whether the
    last census found none."""
    for _ in range(passes):
        raised = [t for t in threads() if (n := nice_of(t)) is not None and n != nice]
        if not raised:
            return True
        _renice(raised, nice)
    return False


def can_raise() -> bool:
    """Whether this thread may raise its priority (CAP_SYS_NICE, or a permissive RLIMIT_NICE)."""
    me = threading.get_native_id()
    before = os.getpriority(os.PRIO_PROCESS, me)
    if before <= -20:
        return True
    try:
        os.setpriority(os.PRIO_PROCESS, me, before - 1)
    except OSError:
        return False
    os.setpriority(os.PRIO_PROCESS, me, before)
    return True


class TimingPriority:
    """One profile's raised batches (see the module doc). `kernel_threads()` lists the
    kernel's threads ([] once it has ended); `stuck()` kills it.

    After the profile: `applied` (the nice value of its raised batches; None: not asked, or
    refused, `refused` saying why), `batches` (how many were raised), `dropped_after_s` (a
    batch outlasted `max_s`), `stuck` (the kernel could not be given its priority back and
    was killed)."""

    def __init__(
        self,
        nice: int | None,
        kernel_threads: Callable[[], list[int]],
        kill: Callable[[], None],
        max_s: float | None = None,
    ) -> None:
        self.nice, self.kernel_threads, self.kill = nice, kernel_threads, kill
        self.max_s = RAISED_MAX_S if max_s is None else max_s
        self.applied: int | None = None
        self.refused = ""
        self.batches = 0
        self.dropped_after_s: float | None = None
        self.stuck = False
        self._lock = threading.Lock()
        self._kernel_before: int | None = None  # the kernel's priority while a batch holds it raised

    def counters(self) -> dict[str, float]:
        """What the profile records of its raises (nothing where none was made)."""
        out: dict[str, float] = {}
        if self.applied is not None:
            out["timing_nice"] = float(self.applied)
            out["timing_raised_batches"] = float(self.batches)
        if self.dropped_after_s is not None:  # a batch outlasted the raise
            out["timing_nice_dropped_after_s"] = self.dropped_after_s
        return out

    @property
    def stuck_reason(self) -> str:
        """The verdict's words for a kernel killed as `stuck`."""
        return (
            f"a timed batch was still running {self.max_s:g} s after it started, at the timing "
            "priority, and the kernel kept starting threads that inherited that priority faster "
            "than they could be given the host's back: the kernel was stopped"
        )

    @property
    def off(self) -> bool:
        """No later batch is raised: not asked, refused, or dropped."""
        return self.nice is None or bool(self.refused) or self.dropped_after_s is not None

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """One batch raised (the kernel held stopped on entry and on exit), then given back."""
        if self.off:
            yield
            return
        assert self.nice is not None
        me = threading.get_native_id()
        before = os.getpriority(os.PRIO_PROCESS, me)
        tids = self.kernel_threads()
        # the kernel's priority as it was started: its threads may only have lowered their own
        kernel_before = min((n for n in map(nice_of, tids) if n is not None), default=before)
        timer = threading.Timer(self.max_s, self._drop, args=(time.perf_counter(),))
        timer.daemon = True
        try:
            os.setpriority(os.PRIO_PROCESS, me, self.nice)
            self._kernel_before = kernel_before
            _renice(tids, self.nice)
            timer.start()
        except (OSError, RuntimeError) as e:  # refused (no CAP_SYS_NICE), or no thread for the timer
            self.refused = f"nice {self.nice}: {getattr(e, 'strerror', None) or e}"
        except BaseException:
            self._give_back(me, before)
            raise
        if self.refused:
            self._give_back(me, before)
            yield  # this batch and the next at the old priority
            return
        self.applied = os.getpriority(os.PRIO_PROCESS, me)
        self.batches += 1
        try:
            yield
        finally:
            timer.cancel()
            self._give_back(me, before)

    def _drop(self, t0: float) -> None:
        """The batch outlasted `max_s` (the timer's thread): the kernel given back now."""
        with self._lock:
            if self._kernel_before is None:
                return  # the batch ended meanwhile
            self.dropped_after_s = time.perf_counter() - t0
            try:
                given = give_back(self.kernel_threads, self._kernel_before)
            except OSError:
                given = False
            if not given:
                self.stuck = True
                self.kill()
            self._kernel_before = None

    def _give_back(self, me: int, before: int) -> None:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, me, before)
        with self._lock:
            if self._kernel_before is not None:
                with contextlib.suppress(OSError):
                    give_back(self.kernel_threads, self._kernel_before)
                self._kernel_before = None


__all__ = ["RAISED_MAX_S", "TIMING_NICE", "TimingPriority", "can_raise", "give_back", "nice_of"]
