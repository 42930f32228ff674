"""Beam-search policies as pure functions: which kernels survive, which pairs become insights.

Both follow the paper's reference code (per-plan best sample, top-B by latency; up to 4
speedups > 1.04 and fill to 8 with slowdowns < 1/1.15), with two deliberate changes: the
beam is elitist, so the best kernel found so far never leaves it; and a pair counts as a
speedup or slowdown only when its ratio also clears the timing noise of both kernels
(`noise_margin`), so two timings of the same code on a busy machine teach nothing.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Scored:
    """A kernel as selection sees it. latency_ms is None for failed or unmeasured kernels.

    `unmeasured`: correct but not timed (a Triton kernel checked in the interpreter on a host
    without a GPU). Such kernels may enter the beam, after every measured one, so a search
    on a CPU-only host still explores from correct kernels; they never become the best
    over a measured kernel. `estimated_ms`: an unmeasured kernel's estimated latency (a cost
    model's, e.g. NKI in the emulator): estimated kernels rank among themselves by it, after
    every measured kernel and before unmeasured ones without an estimate; an estimate is
    never compared with a measurement, and pairs of estimated kernels are marked estimated.
    """

    kernel_id: str
    latency_ms: float | None
    passed: bool
    source_hash: str
    order: int  # tie-break before the kernel id: the kernel's iteration (earlier first)
    unmeasured: bool = False
    spread: float = 0.0  # relative IQR of its timing samples (Profile.latency.spread)
    estimated_ms: float | None = None  # unmeasured only: the cost model's estimate (Profile.estimate)

    @property
    def usable(self) -> bool:
        return self.passed or self.unmeasured

    @property
    def rank_key(self) -> tuple[int, float, int, str]:
        # measured, then estimated, then unmeasured; within each the fastest; then earliest
        # iteration; then kernel id
        if self.latency_ms is not None:
            return (0, self.latency_ms, self.order, self.kernel_id)
        if self.unmeasured and self.estimated_ms is not None:
            return (1, self.estimated_ms, self.order, self.kernel_id)
        return (2, 0.0, self.order, self.kernel_id)

    def comparable_ms(self, estimated: bool) -> float | None:
        """Its latency in the currency of a pair: measured, or (for estimated pairs) estimated."""
        if estimated:
            return self.estimated_ms if self.unmeasured else None
        return self.latency_ms if self.passed else None


def best_of(samples: list[Scored]) -> Scored | None:
    """The fastest correct sample of one plan (None if every sample failed)."""
    ok = [s for s in samples if s.usable]
    return min(ok, key=lambda s: s.rank_key) if ok else None


def select_beam(
    beam: list[Scored], plan_samples: list[list[Scored]], width: int, *, elitist: bool = True
) -> list[Scored]:
    """The next beam from the current one and this iteration's samples grouped by plan.

    elitist: top-`width` over (current beam + each plan's best sample), identical sources
    collapsed, so the best-so-far always survives. Non-elitist (the reference code): top-
    `width` over the plans' best samples, a plan whose samples all failed contributing its
    parent instead.
    """
    children = [b for b in (best_of(s) for s in plan_samples) if b is not None]
    pool = beam + children if elitist else (children or beam)
    seen: set[str] = set()
    out: list[Scored] = []
    for s in sorted(pool, key=lambda s: s.rank_key):
        if not s.usable or s.source_hash in seen:
            continue
        seen.add(s.source_hash)
        out.append(s)
        if len(out) == width:
            break
    return out or beam[:width]


@dataclass(frozen=True)
class Pair:
    """A (parent, child) result of one plan: speedup = parent latency / child latency."""

    parent_id: str
    child_id: str
    speedup: float
    margin: float = 1.0  # the ratio either way below which parent and child are within noise
    estimated: bool = False  # both sides estimated (a cost model's figures), not measured


@dataclass(frozen=True)
class SummaryPick:
    slow_id: str
    fast_id: str
    speedup: float  # always >= 1: how much faster `fast` is than `slow`
    positive: bool  # False: a regression, shown reversed ("undo this change")
    estimated: bool = False


def noise_margin(spread_a: float, spread_b: float) -> float:
    """The ratio of two medians that their timing noise alone can make: 1 + (s_a + s_b) / 2,
    with s the relative IQR of each side's samples (where the two IQR bands stop overlapping)."""
    return 1.0 + (max(spread_a, 0.0) + max(spread_b, 0.0)) / 2.0


def relative_spread(samples: Sequence[float]) -> float:
    """(p75 - p25) / median of `samples` (0 for fewer than two)."""
    if len(samples) < 2:
        return 0.0
    q = statistics.quantiles(samples, n=4, method="inclusive")
    med = statistics.median(samples)
    return (q[2] - q[0]) / med if med > 0 else 0.0


def plan_pair(
    parent_id: str,
    parent_latency: float,
    samples: list[Scored],
    parent_spread: float = 0.0,
    *,
    noise_aware: bool = True,
    estimated: bool = False,
) -> Pair | None:
    """The pair one plan contributes to summarization (reference semantics): its best
    sample if any sped up, else its worst if all slowed down; nothing for ties or failures.
    The pair's `margin` is the noise of the parent's and the child's timings (1.0 when not
    `noise_aware`). With `estimated`, the parent's latency is an estimate and only estimated
    samples count (measured and estimated latencies are never compared)."""
    ok = [s for s in samples if s.comparable_ms(estimated)]
    if not ok or parent_latency <= 0:
        return None
    speedups = [(parent_latency / s.comparable_ms(estimated), s) for s in ok]  # type: ignore[operator]

    def margin(child: Scored) -> float:
        return noise_margin(parent_spread, child.spread) if noise_aware else 1.0

    best = min(speedups, key=lambda t: (-t[0], t[1].order, t[1].kernel_id))
    if best[0] > 1.0:
        return Pair(parent_id, best[1].kernel_id, best[0], margin(best[1]), estimated)
    worst = min(speedups, key=lambda t: (t[0], t[1].order, t[1].kernel_id))
    if worst[0] < 1.0:
        return Pair(parent_id, worst[1].kernel_id, worst[0], margin(worst[1]), estimated)
    return None


def select_summaries(
    pairs: list[Pair],
    *,
    positive_threshold: float,
    negative_threshold: float,
    max_positive: int,
    max_total: int,
) -> list[SummaryPick]:
    """Up to `max_positive` speedups > positive_threshold (largest first), then fill up to
    `max_total` with slowdowns < 1/negative_threshold (worst first), reversed. A pair's
    threshold is raised to its noise `margin` where that is larger."""
    pos = sorted(
        (p for p in pairs if p.speedup > max(positive_threshold, p.margin)),
        key=lambda p: (-p.speedup, p.child_id),
    )
    neg = sorted(
        (p for p in pairs if p.speedup < 1.0 / max(negative_threshold, p.margin)),
        key=lambda p: (p.speedup, p.child_id),
    )
    picks = [SummaryPick(p.parent_id, p.child_id, p.speedup, True, p.estimated) for p in pos[:max_positive]]
    for p in neg[: max(0, max_total - len(picks))]:
        picks.append(SummaryPick(p.child_id, p.parent_id, 1.0 / p.speedup, False, p.estimated))
    return picks
