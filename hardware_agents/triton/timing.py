"""Timing of a Triton/PyTorch entry point: timers, cold L2, rotated buffers, statistics.

`measure` is the loop; the harness supplies what a call does and a `Timer`:

    for each trial:                       (latency = mean over trials of the per-trial median)
        `warmup` untimed calls
        `reps` timed calls, each: flush L2 (write a buffer larger than L2), then time one
        call; after it (untimed) check the output and load the next content into the buffer
        set just used

Timers: `CudaEventTimer` (CUDA events around the call, the default on a GPU),
`DoBenchTimer` (`triton.testing.do_bench` per trial: its own L2 flush, no buffer
rotation), `PerfCounterTimer` (host wall clock; for CPU tensors, where calls are
synchronous: the interpreter and tests). Tests inject their own timer (any object with
`name` and `time(fn) -> ms`).
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

    def time(self, fn: Callable[[], Any]) -> float:
        """Run `fn` once and return its duration in milliseconds (device-synchronized)."""
        ...


class PerfCounterTimer:
    name = "perf_counter"

    def time(self, fn: Callable[[], Any]) -> float:
        t0 = time.perf_counter_ns()
        fn()
        return (time.perf_counter_ns() - t0) / 1e6


class CudaEventTimer:
    """CUDA events recorded on the current stream around the call; waits for the end event."""

    name = "cuda_event"

    def __init__(self) -> None:
        import torch

        self._torch = torch

    def time(self, fn: Callable[[], Any]) -> float:
        cuda = self._torch.cuda
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end))


def make_timer(name: str) -> Timer:
    if name == "cuda_event":
        return CudaEventTimer()
    if name == "perf_counter":
        return PerfCounterTimer()
    raise ValueError(f"unknown timer {name!r}")


def measure(*, call: Callable[[int], Any], after: Callable[[int], bool], flush: Callable[[], Any],
            timer: Timer, warmup: int, reps: int, trials: int) -> list[TimingRun]:
    """The timing loop. `call(t)` runs the t-th call (the caller maps t to a buffer set),
    `after(t)` checks its output and restocks the buffers (False: wrong output), `flush()`
    evicts the L2 before every call (queued on the same stream, outside the timed region)."""
    if reps < 1 or trials < 1:
        raise ValueError("reps and trials must be at least 1")
    runs: list[TimingRun] = []
    t = 0
    for _trial in range(trials):
        for _ in range(warmup):
            flush()
            call(t)
            after(t)
            t += 1
        samples: list[float] = []
        bad = 0
        for _ in range(reps):
            flush()
            samples.append(timer.time(functools.partial(call, t)))
            if not after(t):
                bad += 1
            t += 1
        runs.append(TimingRun(samples_ms=samples, median_ms=statistics.median(samples), inconsistent=bad))
    return runs


def latency_ms(runs: list[TimingRun]) -> float:
    """FlashInfer-Bench's statistic: the mean over trials of each trial's median."""
    return statistics.fmean(r.median_ms for r in runs)


def do_bench_trials(fn: Callable[[], Any], *, warmup_ms: float, rep_ms: float, trials: int) -> list[TimingRun]:
    """`triton.testing.do_bench` (its own L2 flush; one buffer set) once per trial."""
    from triton.testing import do_bench

    runs = []
    for _ in range(trials):
        samples = do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="all")
        samples = [float(s) for s in samples]
        runs.append(TimingRun(samples_ms=samples, median_ms=statistics.median(samples)))
    return runs
