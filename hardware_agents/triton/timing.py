"""Timing of a Triton/PyTorch entry point: timers, the per-round loop, statistics.

`measure` is the loop of one round; the harness supplies what a call does and a `Timer`:

    for each of warmup + reps calls:      (all timed; the warm-ups only count toward the
        flush L2 (write a buffer larger    parent's wall-clock bound)
        than L2), then time one call;
        after it (untimed): restock the buffer set just used with a later call's content
    collect every reading at the end (one synchronisation per round, none between calls)

Timers: `CudaEventTimer` (CUDA events around the call on the current stream, read after
the round), `PerfCounterTimer` (host wall clock; for CPU tensors, where calls are
synchronous: the interpreter and tests). Tests inject their own timer (any object with
`name`, `start(fn) -> token` and `collect(tokens) -> [ms]`).

`triton.testing.do_bench` is not a timer of the agent: it picks its own number of calls
and runs untimed warm-ups, so the parent could not bound its clock. The GPU check script
uses it in a plain process as an independent witness of the agent's figures.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from typing import Any, Protocol

from hardware_agents.triton.records import TimingRun


class Timer(Protocol):
    name: str

    def start(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` once, timed; return a token for `collect` (no synchronisation)."""
        ...

    def collect(self, tokens: list[Any]) -> list[float]:
        """Milliseconds per token, in order (synchronises the device once)."""
        ...


class PerfCounterTimer:
    name = "perf_counter"

    def start(self, fn: Callable[[], Any]) -> float:
        t0 = time.perf_counter_ns()
        fn()
        return (time.perf_counter_ns() - t0) / 1e6

    def collect(self, tokens: list[Any]) -> list[float]:
        return [float(t) for t in tokens]


class CudaEventTimer:
    """CUDA events recorded on the current stream around the call, read after the round.

    The event class, its methods, the stream and the synchronisation are bound when the timer
    is made, before the solution is imported (harness.run): code that later replaces
    `torch.cuda.Event`, its `record`/`elapsed_time`, `torch.cuda.current_stream` or
    `torch.cuda.synchronize` does not reach this timer. That matters on a GPU, where the
    parent's wall-clock bound is weak for a kernel shorter than the calibrated untimed work
    of a call (the GPU work overlaps it): a 2x slowed event there would pass the bound. (The
    host-clock timer stays reachable: in the interpreter every call is synchronous and the
    bound catches a slowed clock.)"""

    name = "cuda_event"

    def __init__(self) -> None:
        import torch

        event = torch.cuda.Event
        self._event = event
        self._record = event.record
        self._elapsed = event.elapsed_time
        self._stream = torch.cuda.current_stream()  # the harness's calls run on it
        self._synchronize = torch.cuda.synchronize

    def start(self, fn: Callable[[], Any]) -> tuple[Any, Any]:
        begin, end = self._event(enable_timing=True), self._event(enable_timing=True)
        self._record(begin, self._stream)
        fn()
        self._record(end, self._stream)
        return begin, end

    def collect(self, tokens: list[Any]) -> list[float]:
        self._synchronize()
        return [float(self._elapsed(b, e)) for b, e in tokens]


def make_timer(name: str) -> Timer:
    if name == "cuda_event":
        return CudaEventTimer()
    if name == "perf_counter":
        return PerfCounterTimer()
    raise ValueError(f"unknown timer {name!r}")


def measure(
    *,
    call: Callable[[int], Any],
    after: Callable[[int], Any],
    flush: Callable[[], Any],
    timer: Timer,
    warmup: int,
    reps: int,
) -> TimingRun:
    """One round. `call(t)` runs the t-th call (the caller maps t to a buffer set and its
    content), `after(t)` does the untimed work that follows it (restocking the set), and
    `flush()` evicts the L2 before every call (queued on the same stream, outside the timed
    region)."""
    if reps < 1 or warmup < 0:
        raise ValueError("reps must be at least 1 and warmup at least 0")
    tokens = []
    for t in range(warmup + reps):
        flush()
        tokens.append(timer.start(functools.partial(call, t)))
        after(t)
    ms = timer.collect(tokens)
    samples = ms[warmup:]
    return TimingRun(samples_ms=samples, median_ms=statistics.median(samples), warmup_ms=ms[:warmup])


def latency_ms(runs: list[TimingRun]) -> float:
    """FlashInfer-Bench's statistic: the mean over trials of each trial's median."""
    return statistics.fmean(r.median_ms for r in runs)
