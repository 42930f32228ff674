"""Latency statistics of a timed kernel.

latency_stats(samples_ms, reruns)          # LatencyStats: median, min, max, spread
spread(samples)                            # (p75 - p25) / median: robust to one preemption
range_spread(samples)                      # (max - min) / min: the paper's re-run rule (Neuron)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

from accelopt.profile import LatencyStats


def spread(samples: Sequence[float]) -> float:
    """Relative interquartile range: (p75 - p25) / median. Robust to a single preemption,
    which on a shared 2-core machine would make (max - min) / min meaningless."""
    if len(samples) < 2:
        return 0.0
    q = statistics.quantiles(samples, n=4, method="inclusive")
    med = statistics.median(samples)
    return (q[2] - q[0]) / med if med > 0 else 0.0


def range_spread(samples: Sequence[float]) -> float:
    """(max - min) / min; infinite without a positive sample (such a round is never kept)."""
    if not samples or min(samples) <= 0:
        return math.inf
    return (max(samples) - min(samples)) / min(samples)


def latency_stats(
    samples_ms: Sequence[float],
    reruns: int = 0,
    *,
    median_ms: float | None = None,
    spread_of: Callable[[Sequence[float]], float] = spread,
) -> LatencyStats:
    """The statistics of a kernel's timed samples; `median_ms` replaces the median where the
    agent's latency is another statistic of them (Triton: the mean of its rounds' medians)."""
    s = list(samples_ms)
    return LatencyStats(
        samples_ms=s,
        median_ms=statistics.median(s) if median_ms is None else median_ms,
        min_ms=min(s),
        max_ms=max(s),
        spread=spread_of(s),
        reruns=reruns,
    )


__all__ = ["latency_stats", "range_spread", "spread"]
