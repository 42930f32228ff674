"""Where a profile's wall time goes, measured by the agent on its own clock.

    phases = Phases(v.counters)
    with phases("stage"):          # adds the block's wall time to counters["stage_s"]
        data = ...
    phases.add("judge", seconds)   # time measured elsewhere on our side (a judging thread)

Every figure is `time.perf_counter()` in the agent's process around work the agent drives
(a sandboxed child's whole run counts from our launch to its exit), never a number a child
reports: what the kernel's process says about its own speed is not believed. A phase that
runs several times (one execute child per batch) accumulates. New phases need nothing
but a new name.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class Phases:
    def __init__(self, counters: dict[str, float]) -> None:
        self.counters = counters

    def add(self, name: str, seconds: float) -> None:
        key = f"{name}_s"
        self.counters[key] = self.counters.get(key, 0.0) + seconds

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0)


__all__ = ["Phases"]
