"""Where a profile's wall time goes, measured by the agent on its own clock.

    phases = Phases(v.counters)
    with phases("compile"):        # adds the block's wall time to counters["phase_compile_s"]
        build = ...
    phases.add("judge", seconds)   # time measured elsewhere on our side

Every figure is `time.perf_counter()` in the agent's process around work the agent drives (a
sandboxed child's steps count from our continue to its stop or exit), never a number a child
reports: what the kernel's process says about its own speed is not believed. A phase that
runs several times accumulates. The names are each agent's steps; `phase_` keeps them apart
from the other counters.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

PREFIX = "phase_"


class Phases:
    def __init__(self, counters: dict[str, float]) -> None:
        self.counters = counters

    def add(self, name: str, seconds: float) -> None:
        key = f"{PREFIX}{name}_s"
        self.counters[key] = self.counters.get(key, 0.0) + seconds

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0)


def phases_of(counters: dict[str, float]) -> dict[str, float]:
    """The phase times among a profile's counters, by name."""
    return {k[len(PREFIX) : -2]: v for k, v in counters.items() if k.startswith(PREFIX) and k.endswith("_s")}


__all__ = ["PREFIX", "Phases", "phases_of"]
