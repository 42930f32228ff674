"""A timed kernel's two figures: the device figure (its calls replayed as graphs, no host code)
and the eager figure (its calls as a Python caller makes them, host work included).

The search optimizes the device figure where every counted round has one: serving stacks
launch these kernels in CUDA graphs, and a kernel's host-side wrapper is not what the search
should trade against its device work. Where a round's calls could not be captured (a wrapper
that syncs or reads a value on the host, calls that share buffer sets), the eager figure is
the latency, said so. A kernel whose eager figure exceeds its device figure by more than
`HOST_BOUND_SHARE` is host-bound: flagged in the verdict and in the counters the planner reads.
Each figure is the mean over rounds of each round's median, as FlashInfer-Bench's latency is.
"""

from __future__ import annotations

import statistics

import msgspec

from hardware_agents.triton.records import TimingRun

HOST_BOUND_SHARE = 0.20


class Figures(msgspec.Struct, frozen=True, kw_only=True):
    latency_ms: float  # the figure the search optimizes (device where there is one, else eager)
    samples_ms: list[float]  # its timed samples, every counted round's
    eager_ms: float
    device_ms: float | None = None
    host_bound: bool = False
    note: str = ""  # for the verdict's log


def figures(runs: list[TimingRun]) -> Figures:
    """The figures of the counted rounds `runs`."""
    eager = statistics.fmean(statistics.median(r.samples_ms) for r in runs)
    eager_samples = [s for r in runs for s in r.samples_ms]
    if not runs or not all(r.graph_samples_ms for r in runs):
        why = next((r.graph_note for r in runs if r.graph_note), "")
        note = (
            f"eager figure only (calls not replayed as graphs: {why.removeprefix('not captured: ')})"
            if why
            else ""
        )
        return Figures(latency_ms=eager, samples_ms=eager_samples, eager_ms=eager, note=note)
    device = statistics.fmean(statistics.median(r.graph_samples_ms) for r in runs)
    host_bound = eager > device * (1 + HOST_BOUND_SHARE)
    note = f"device figure {device:.4g} ms (graph replays), eager figure {eager:.4g} ms (host work included)"
    if host_bound:
        note += (
            f"; host-bound: the eager figure is {100 * (eager / device - 1):.0f}% above the device figure, "
            "the wrapper's host work (allocations, Python, launches) costs more than a launch in a graph"
        )
    return Figures(
        latency_ms=device,
        samples_ms=[s for r in runs for s in r.graph_samples_ms],
        eager_ms=eager,
        device_ms=device,
        host_bound=host_bound,
        note=note,
    )


__all__ = ["HOST_BOUND_SHARE", "Figures", "figures"]
