"""A campaign's items (see `accelopt/campaign_core.py`, which composes this): each item's state,
what one of its finished runs does to its figures and whether it settles, and the memory
insights that re-open a plateaued one. Pure.

- an item is settled at its target % of peak, or after `plateau_runs` runs in a row each
  gaining less than `min_gain`, or (`failed`) when its baseline never ran;
- a plateaued item re-opens when memory insights of its operator that its planner sees arrive
  from another item (`CampaignStarted.insight_sources`: its own chip's, another chip's only
  where its runs share memory across chips): those in its kernel language, or any, as the
  policy's `insight_scope` says (so a log replays under its policy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from accelopt import catalog as ev
from accelopt.beam_policy import noise_margin
from accelopt.campaign import StopSpec

SETTLED_WORDS = {
    "target": "at their target",
    "plateau": "on a plateau",
    "failed": "whose baseline did not run",
}


@dataclass
class ItemState:
    item: ev.CampaignItem
    order: int
    runs: int = 0  # finished runs that reached a profiler
    log_gains: list[float] = field(default_factory=list)
    # log of the ratio timing noise alone could make of each run's gain (its start and its best
    # in the same rounds, `noise_margin`; 0 where nothing was measured or it was estimated)
    log_noise: list[float] = field(default_factory=list)
    speedup: float = 1.0  # over the suite's baseline: its last measurement's (`measured`)
    pct_peak: float | None = None
    estimated: bool = False
    # how `speedup` and `pct_peak` were had: "interleaved" or "estimated" (CampaignItemMeasured,
    # at the end of run `measured_run`, over `measured_rounds` rounds, told apart from noise
    # within `noise`); "" before any, or (a log from before measured figures) the product of
    # its runs' gains
    measured: str = ""
    measured_run: str | None = None
    measured_rounds: int = 0
    noise: float | None = None
    cost_usd: float = 0.0
    seconds: float = 0.0
    running: str | None = None  # the run id working on it
    best_run: str | None = None  # where its best kernel is (None: the suite's baseline)
    best_kernel: str | None = None
    insights_at_run: int = 0  # relevant insights when its last run was scheduled
    settled: str = ""  # "", "plateau", "target", "failed"
    settled_insights: int = 0  # relevant insights when it plateaued
    failures: int = 0  # runs in a row with nothing usable

    @property
    def key(self) -> str:
        return self.item.key

    @property
    def net_log_gains(self) -> list[float]:
        """Each run's log-gain beyond what its measurement's noise alone could make (>= 0)."""
        return [max(0.0, g - n) for g, n in zip(self.log_gains, self.log_noise, strict=True)]


@dataclass
class Insights:
    """The memory entries each item's runs taught, per operator, and which of them an item's
    planner sees: those of other items, of its `sources` (None: a log from before the sources
    were recorded counts every other item's, as it was decided), in its kernel language only
    where `same_language`."""

    items: dict[str, ItemState]
    sources: dict[str, list[str]] | None
    same_language: bool
    learnt: dict[str, dict[str, int]] = field(default_factory=dict)  # op_type -> item key -> entries

    def learn(self, item: ItemState, entries: int) -> None:
        if entries:
            per_item = self.learnt.setdefault(item.item.op_type, {})
            per_item[item.key] = per_item.get(item.key, 0) + entries

    def relevant(self, it: ItemState) -> int:
        """Insights of its operator that other items taught the memory and its planner sees."""
        seen = None if self.sources is None else set(self.sources.get(it.key, ()))
        return sum(
            n
            for k, n in self.learnt.get(it.item.op_type, {}).items()
            if k != it.key
            and (seen is None or k in seen)
            and (not self.same_language or self.items[k].item.language == it.item.language)
        )

    def ready(self, it: ItemState) -> tuple[bool, bool]:
        """(whether it may run, whether it re-opens after a plateau)."""
        if it.settled == "plateau" and self.relevant(it) > it.settled_insights:
            return True, True
        return not it.settled, False


def fold_outcome(
    item: ItemState,
    e: ev.CampaignRunFinished,
    measured: ev.CampaignItemMeasured | None,
    product: bool,
    stop: StopSpec,
    insights: Insights,
) -> None:
    """Run `e` of `item` reached a profiler: its figures (from `measured`, the measurement at
    the run's end; with none, where `product` (a log from before measured figures) the product
    of its runs' gains), then whether it settles."""
    item.runs += 1
    noise = 0.0
    if e.gain is None:
        item.failures += 1
        item.log_gains.append(0.0)
        if item.failures >= 2 and item.runs == item.failures:
            item.settled = "failed"  # its baseline never ran: nothing to optimize from
    else:
        item.failures = 0
        if measured is not None:
            noise = _fold_measured(item, e, measured)
        elif product:
            _fold_product(item, e)
        else:
            item.log_gains.append(0.0)  # not measured: its kernels are not taken
    item.log_noise.append(noise)
    if (
        stop.target_pct_peak is not None
        and item.pct_peak is not None
        and item.pct_peak >= stop.target_pct_peak
    ):
        item.settled = "target"
    elif not item.settled and len(item.log_gains) >= stop.plateau_runs:
        floor = math.log1p(stop.min_gain)
        if all(g < floor for g in item.log_gains[-stop.plateau_runs :]):
            item.settled = "plateau"
            item.settled_insights = insights.relevant(item)


def _usable(side: ev.RemeasuredSide | None) -> bool:
    """A side with a figure: measured (passed) or estimated (unmeasured), a positive median."""
    return side is not None and side.status in ("passed", "unmeasured") and bool(side.median_ms)


def _ms(side: ev.RemeasuredSide) -> float:
    return side.median_ms or math.nan


def _fold_measured(item: ItemState, e: ev.CampaignRunFinished, m: ev.CampaignItemMeasured) -> float:
    """The item's figures from its measurement at the run's end: the run's best is taken
    where it beat the kernel the run started from in the same rounds (that ratio is the
    run's gain, what plateaus are judged by); the item's speedup is the baseline's median
    over its best's, its % of peak its best's. Returns the log of the ratio the noise of the
    run's comparison alone could make."""
    origin, cand = m.origin, m.candidate
    start = m.start or origin
    if origin is None or start is None or not (_usable(origin) and _usable(start)):
        item.log_gains.append(0.0)  # the baseline or its best no longer runs: nothing taken
        return 0.0
    best, gain = start, 1.0
    if cand is not None and _usable(cand) and e.best_kernel_id and _ms(cand) < _ms(start):
        best, gain = cand, _ms(start) / _ms(cand)
        item.best_run, item.best_kernel = e.run, e.best_kernel_id
    item.log_gains.append(math.log(gain))
    item.speedup = _ms(origin) / _ms(best)
    item.pct_peak = best.peak_fraction
    item.estimated = m.method == "estimated"
    item.measured, item.measured_run, item.measured_rounds = m.method, e.run, m.rounds
    item.noise = noise_margin(origin.spread, best.spread) - 1.0
    if cand is None or not _usable(cand):
        return 0.0
    return math.log(noise_margin(start.spread, cand.spread))


def _fold_product(item: ItemState, e: ev.CampaignRunFinished) -> None:
    """A log from before measured figures: the product of the runs' gains, as it was."""
    assert e.gain is not None
    item.estimated = e.estimated
    if e.gain > 1.0 and e.best_kernel_id:
        item.speedup *= e.gain
        item.best_run, item.best_kernel = e.run, e.best_kernel_id
        item.log_gains.append(math.log(e.gain))
    else:
        item.log_gains.append(0.0)
    if e.pct_peak is not None:
        item.pct_peak = e.pct_peak
