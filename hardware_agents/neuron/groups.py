"""The emulate mode's execute children, in groups of cases whose outputs fit, judged as they end.

Every execute child writes its cases' outputs into its work dir, a tmpfs of its own (memory,
not disk), and they stayed there until every child had ended and every case was judged:
NKIBench's bmm and bmm_softmax write 1 GiB a case, 4 GiB a profile. Now the cases go in
contiguous groups whose outputs fit `GROUP_OUTPUT_BYTES` (one case alone may have more), at
least one group per lane (the CPUs the agent may use, at most 4: as many children side by side
as before); a group takes one of `lanes` slots from its child's start until the caller has
judged it and closed its sandbox (`release`), so at most `lanes` groups' outputs exist at once.
A problem whose cases' outputs are small runs in `lanes` groups, as before (its batches, which
pay for gqa_full, stay whole).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Generic, TypeVar

GROUP_OUTPUT_BYTES = 512 << 20  # the outputs one execute child holds at most (one case alone: any)

T = TypeVar("T")


def plan_groups(n: int, case_output_bytes: int, lanes: int) -> list[list[int]]:
    """0..n-1 in contiguous groups: at least `min(n, lanes)`, and as many more as it takes for a
    group's outputs to fit `GROUP_OUTPUT_BYTES`."""
    if n == 0:
        return []
    per = max(1, GROUP_OUTPUT_BYTES // max(1, case_output_bytes))
    parts = min(n, max(min(n, lanes), math.ceil(n / per)))
    size, extra = divmod(n, parts)
    out, lo = [], 0
    for k in range(parts):
        hi = lo + size + (1 if k < extra else 0)
        out.append(list(range(lo, hi)))
        lo = hi
    return out


class GroupRunner(Generic[T]):
    """Runs `start(group)` for each group in at most `lanes` threads, each once a slot is free;
    `done()` yields (group index, its result) as they end; the caller `release()`s a slot once
    it is done with a group's result. `cancel()`: the groups not started are skipped."""

    def __init__(self, lanes: int) -> None:
        self.lanes = max(1, lanes)
        self._slots = threading.Semaphore(self.lanes)
        self._cancelled = threading.Event()
        self._pool = ThreadPoolExecutor(self.lanes, thread_name_prefix="nki-execute")
        self._futures: dict[Future[T | None], int] = {}

    def submit(self, index: int, start: Callable[[], T]) -> None:
        def run() -> T | None:
            self._slots.acquire()
            if self._cancelled.is_set():
                self._slots.release()
                return None
            return start()

        self._futures[self._pool.submit(run)] = index

    def done(self) -> Iterator[tuple[int, T]]:
        for fut in as_completed(list(self._futures)):
            result = fut.result()
            if result is not None:
                yield self._futures[fut], result

    def release(self) -> None:
        self._slots.release()

    def cancel(self) -> None:
        self._cancelled.set()
        for _ in range(self.lanes):
            self._slots.release()

    def close(self) -> None:
        """Cancel what has not started and wait for what runs."""
        self.cancel()
        self._pool.shutdown(wait=True)


__all__ = ["GROUP_OUTPUT_BYTES", "GroupRunner", "plan_groups"]
