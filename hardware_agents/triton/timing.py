"""Timing of a Triton/PyTorch entry point: the device clock, the per-round loop, statistics.

`measure` is the loop of one round; the harness supplies what a call does and a `Timer`:

    for each of warmup + reps calls:       (all timed; the warm-ups only count toward the
        flush L2 (write a buffer larger     parent's wall-clock bound)
        than L2: on the device it is also
        the call's lead, see below);
        begin event, the call, end event,
        a device synchronisation;
        after it (untimed): restock the buffer set just used with a later call's content,
        where the round has fewer buffer sets than calls
    read every event pair at the end of the round

**One call at a time.** The device is synchronised after every call, so the parent's wall
clock of a round sees each call nearly alone: the untimed work of a call (the flush, the
host's loop, the synchronisation's wake-up) no longer overlaps the kernel, and the kernel
no longer overlaps the next call's untimed work. The round's wall time is then the calls'
own device time plus n times a figure that does not depend on the kernel, which the
calibration rounds measure with a null entry point before the kernel is loaded: the bound
of `pipeline/clock.py` is tight for a short kernel too (a clock slowed 2x is caught once a
call's kernel time exceeds about twice the margin on that figure, a few microseconds,
instead of a fifth of it). Work the kernel leaves on another stream is waited for by the
device-wide synchronisation inside the call's wall time, outside its events.

**The lead.** The flush is queued before the begin event, so the device is still busy with
it while the host records the begin event and launches the call: the launch's host time
is not counted (as in `triton.testing.do_bench`, whose device runs behind the host), and
the kernel runs back to back after the begin event. 256 MiB of writes take 55-80 us on a
Hopper, longer than a Triton launch.

**The device figure: graph replay.** Where a round's calls each have a buffer set and
their outputs are kept, the harness captures every call as a graph in the round's set-up
(`TimingSpec.capture_budget_s` of host time a call, else it falls back to the eager calls alone), and before
the eager calls replays each graph with the same flush, events and synchronisation, its
outputs copied as the replays left them (an eager call cannot write its replay's outputs). A
replay runs the call's launches without its host code (the wrapper's Python, its
allocations), so the replays' median is the kernel's device time, as a serving stack that
launches it in a CUDA graph sees it; the eager calls' median is the host-inclusive figure.
Both are bounded by the parent's clock together (the calibration rounds capture and
replay a null graph the same way), and both calls' outputs are checked.

**Clocks bound before the kernel exists.** `CudaClock` holds torch's C-level functions
(`torch._C._CudaEventBase` and its `record`/`elapsed_time`, `torch._C._cuda_synchronize`,
the current stream) taken when the timer is made, before the solution is imported: C
functions have no code object to change, and C types refuse new attributes, so nothing the
kernel does to `torch.cuda` (its Python wrappers, their code objects, its Event class)
reaches the timer. The flush's `zero_` is bound the same way (`bound_flush`). Where the
kernel finds another route into the process anyway, the parent's bound is what stops it.
`SimulatedDevice` (the interpreter and the tests, `cuda_shim.py`) is the same clock on a
simulated device timeline: CPU work is synchronous and its time is host time; queued
device work (`torch.cuda._sleep` under the shim, a simulated flush) runs back to back after
what was queued before it.

`triton.testing.do_bench` is not a timer of the agent: it picks its own number of calls
and runs untimed warm-ups, so the parent could not bound its clock. The GPU check script
uses it in a plain process as an independent witness of the agent's figures.
"""

from __future__ import annotations

import functools
import gc
import statistics
from collections.abc import Callable
from typing import Any, Protocol

from hardware_agents.triton.records import TimingRun


class Timer(Protocol):
    name: str

    def start(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` once, timed; return a token for `collect`."""
        ...

    def collect(self, tokens: list[Any]) -> list[float]:
        """Milliseconds per token, in order."""
        ...


class DeviceClock(Protocol):
    """Events on the device's timeline and a device-wide synchronisation."""

    name: str

    def event(self) -> Any: ...

    def record(self, event: Any) -> None: ...

    def elapsed_ms(self, begin: Any, end: Any) -> float: ...

    def synchronize(self) -> None: ...


class CudaClock:
    """torch's C-level CUDA event and synchronisation functions, bound when made (see the
    module doc): the current stream's events, `cudaDeviceSynchronize`."""

    name = "cuda_event"

    def __init__(self) -> None:
        import torch

        base = torch._C._CudaEventBase
        self._new = functools.partial(base, enable_timing=True)
        self._record = base.record
        self._elapsed = base.elapsed_time
        self._synchronize = torch._C._cuda_synchronize
        self._stream = torch.cuda.current_stream()  # the harness's calls run on it

    def event(self) -> Any:
        return self._new()

    def record(self, event: Any) -> None:
        self._record(event, self._stream)

    def elapsed_ms(self, begin: Any, end: Any) -> float:
        return float(self._elapsed(begin, end))

    def synchronize(self) -> None:
        self._synchronize()


class SyncedEventTimer:
    """Per call: begin event, the call, end event, then a device-wide synchronisation; the
    readings are taken after the round (see the module doc)."""

    def __init__(self, clock: DeviceClock) -> None:
        self.clock = clock
        self.name = clock.name

    def start(self, fn: Callable[[], Any]) -> tuple[Any, Any]:
        clock = self.clock
        begin, end = clock.event(), clock.event()
        clock.record(begin)
        fn()
        clock.record(end)
        clock.synchronize()
        return begin, end

    def collect(self, tokens: list[Any]) -> list[float]:
        return [self.clock.elapsed_ms(b, e) for b, e in tokens]


def make_timer(name: str, device_flush_s: float = 0.0) -> Timer:
    """`cuda_event`: a GPU's clock; `simulated`: the interpreter's (`cuda_shim.SIM`, whose
    flush takes `device_flush_s` of simulated device time besides its real host memset)."""
    if name == "cuda_event":
        return SyncedEventTimer(CudaClock())
    if name == "simulated":
        from hardware_agents.triton.cuda_shim import SIM

        SIM.flush_s = device_flush_s
        return SyncedEventTimer(SIM)
    raise ValueError(f"unknown timer {name!r}")


class Grapher(Protocol):
    """Captures a call as a graph (nothing runs: the launches are recorded) and replays it."""

    def capture(self, fn: Callable[[], Any]) -> tuple[Any, Any]:
        """(the graph, what `fn` returned while captured)."""
        ...

    def replay(self, graph: Any) -> None: ...


class CudaGrapher:
    """torch's CUDA graphs: captured through `torch.cuda.graph` (its own side stream and
    memory pool), replayed through the C-level `torch._C._CUDAGraph.replay`, all bound when
    made, before the solution is imported. Capture is the kernel's code running; what a graph
    holds is checked by its outputs like any call's."""

    name = "cuda_graph"

    def __init__(self) -> None:
        import torch

        self._graph, self._context = torch.cuda.CUDAGraph, torch.cuda.graph
        self._replay = torch._C._CUDAGraph.replay

    def capture(self, fn: Callable[[], Any]) -> tuple[Any, Any]:
        g = self._graph()
        with self._context(g):
            out = fn()
        return g, out

    def replay(self, graph: Any) -> None:
        self._replay(graph)


class SimGrapher:
    """Graphs of the simulated device (`cuda_shim.SimGraph`)."""

    name = "simulated_graph"

    def __init__(self, sim: Any = None) -> None:
        from hardware_agents.triton.cuda_shim import SIM, SimGraph

        self._sim, self._new, self._replay = sim or SIM, SimGraph, SimGraph.replay

    def capture(self, fn: Callable[[], Any]) -> tuple[Any, Any]:
        g = self._new()
        self._sim.capturing = g
        try:
            out = fn()
        finally:
            self._sim.capturing = None
        return g, out

    def replay(self, graph: Any) -> None:
        self._replay(graph)


def make_grapher(timer_name: str) -> Grapher:
    """The graphs of the device `timer_name` times (`make_timer`)."""
    return SimGrapher() if timer_name == "simulated" else CudaGrapher()


def bound_flush(buf: Any, timer_name: str) -> Callable[[], Any]:
    """The L2 flush of every call (`buf.zero_()`), through torch's C method taken now; on the
    simulated device it also queues the flush's simulated device time."""
    import torch

    zero = functools.partial(torch._C.TensorBase.zero_, buf)
    if timer_name != "simulated":
        return zero
    from hardware_agents.triton.cuda_shim import SIM

    queue = SIM.queue_flush

    def flush() -> None:
        zero()
        queue()

    return flush


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
    `flush()` evicts the L2 before every call (queued on the same stream, before the begin
    event: the call's lead)."""
    if reps < 1 or warmup < 0:
        raise ValueError("reps must be at least 1 and warmup at least 0")
    tokens = []
    collecting = gc.isenabled()
    gc.disable()  # no collection pause inside the round (it would be untimed work of one call)
    try:
        for t in range(warmup + reps):
            flush()
            tokens.append(timer.start(functools.partial(call, t)))
            after(t)
    finally:
        if collecting:
            gc.enable()
    ms = timer.collect(tokens)
    samples = ms[warmup:]
    return TimingRun(samples_ms=samples, median_ms=statistics.median(samples), warmup_ms=ms[:warmup])


def latency_ms(runs: list[TimingRun]) -> float:
    """FlashInfer-Bench's statistic: the mean over trials of each trial's median."""
    return statistics.fmean(r.median_ms for r in runs)
