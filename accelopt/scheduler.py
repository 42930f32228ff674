"""A campaign's scheduling policies: which of a device's items runs next, and why.

A policy is a small pure component: it ranks the items of one device kind that are ready to
run (`Candidate`: what the campaign knows of each, folded from its log by
`accelopt/campaign_core.py`) and says why each ranks where it does (`ScheduleScore`, recorded
in the decision). The campaign file names it (`scheduler.policy`); a new one is a class with
`name` and `rank` added to `POLICIES`. Stop rules, budgets and device slots are not a
policy's business: the core applies them the same way whatever ranks the items.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from accelopt.catalog import ScheduleScore


@dataclass(frozen=True)
class Candidate:
    """An item as a policy sees it."""

    key: str
    device: str
    order: int  # its place in the campaign file
    runs: int  # finished runs
    log_gains: tuple[float, ...]  # log(speedup over its start) of each finished run (0: no gain)
    pct_peak: float | None  # its best kernel's fraction of peak (None: not known)
    cost_usd: float  # LLM spend on it so far
    seconds: float  # wall time of its runs so far
    new_insights: int  # memory insights of its operator learnt on other items since its last run
    reopened: bool = False  # it had plateaued; new insights bring it back


@dataclass(frozen=True)
class PolicyContext:
    prior_gain: float  # expected log-speedup of a run of an item nothing is known of (the file's)
    device_run_s: float  # mean length of a run on this device so far (a prior where none ran)
    fair_share_usd: float | None  # the total budget over the items (None: no total budget)
    # what a first run gains here: the mean log-gain of the device's items' first runs, with
    # the prior counted as one of them (an item not run yet expects this)
    first_run_gain: float | None = None


class Policy(Protocol):
    name: str

    def rank(
        self, candidates: Sequence[Candidate], ctx: PolicyContext
    ) -> list[tuple[Candidate, ScheduleScore]]:
        """The candidates best first, each with why."""
        ...


def _headroom(c: Candidate) -> float:
    return 1.0 if c.pct_peak is None else min(1.0, max(0.05, 1.0 - c.pct_peak))


def _expected_s(c: Candidate, ctx: PolicyContext) -> float:
    return c.seconds / c.runs if c.runs else ctx.device_run_s


class ExpectedGain:
    """Spend where it pays: the expected log-speedup of the item's next run, per minute of the
    device it takes, scaled by how far it is from the roofline.

    - expected gain: an item not run yet expects what first runs on its device have gained
      so far (the prior counted as one of them), so while first runs pay, every item gets
      one; after that, its recent runs' gains (the last `window`) shrunk toward the prior by
      one run's weight, so an item that keeps gaining stays on top and one whose runs stopped
      gaining sinks;
    - new insights: memory insights of the same operator learnt since its last run (on another
      chip or problem) add up to another prior's worth (n / (n + 2) of it): an insight learnt
      on one device re-opens the problem on another;
    - headroom: 1 - its fraction of peak (an item near the roofline has little left);
    - cost: per expected minute of device time, and divided by (1 + its LLM spend over its fair
      share of the total budget), so one item does not take the whole budget.
    """

    name = "expected_gain"
    window = 2

    def rank(
        self, candidates: Sequence[Candidate], ctx: PolicyContext
    ) -> list[tuple[Candidate, ScheduleScore]]:
        scored = [(c, self.score(c, ctx)) for c in candidates]
        scored.sort(key=lambda cs: (-cs[1].score, cs[0].runs, cs[0].order))  # ties: the less tried first
        return scored

    def score(self, c: Candidate, ctx: PolicyContext) -> ScheduleScore:
        if c.runs == 0:
            expected = ctx.first_run_gain if ctx.first_run_gain is not None else ctx.prior_gain
        else:
            recent = [max(0.0, g) for g in c.log_gains[-self.window :]]
            expected = (sum(recent) + ctx.prior_gain) / (len(recent) + 1)
        novelty = ctx.prior_gain * c.new_insights / (c.new_insights + 2)
        headroom = _headroom(c)
        expected_s = max(1.0, _expected_s(c, ctx))
        spend = 1.0 + (c.cost_usd / ctx.fair_share_usd if ctx.fair_share_usd else 0.0)
        score = headroom * (expected + novelty) / (expected_s / 60.0) / spend
        parts = [f"expected gain {math.exp(expected) - 1:+.0%} per run"]
        if c.runs == 0:
            parts[0] += " (not run yet: what first runs here gained, with the prior)"
        if c.new_insights:
            parts.append(f"{c.new_insights} new insight{'s' if c.new_insights != 1 else ''} of its operator")
        if c.pct_peak is not None:
            parts.append(f"{c.pct_peak:.0%} of peak")
        parts.append(f"~{expected_s:.0f} s a run")
        if c.cost_usd:
            parts.append(f"${c.cost_usd:.2f} spent")
        if c.reopened:
            parts.insert(0, "re-opened")
        return ScheduleScore(
            score=round(score, 9),
            headroom=round(headroom, 6),
            expected_gain=round(expected, 6),
            new_insights=c.new_insights,
            cost_usd=round(c.cost_usd, 6),
            runs=c.runs,
            expected_s=round(expected_s, 3),
            why="; ".join(parts),
        )


class RoundRobin:
    """Every item in turn: the one with the fewest runs first, then the campaign file's order."""

    name = "round_robin"

    def rank(
        self, candidates: Sequence[Candidate], ctx: PolicyContext
    ) -> list[tuple[Candidate, ScheduleScore]]:
        ordered = sorted(candidates, key=lambda c: (c.runs, c.order))
        n = len(ordered)
        return [
            (
                c,
                ScheduleScore(
                    score=float(n - i),
                    headroom=round(_headroom(c), 6),
                    expected_gain=0.0,
                    new_insights=c.new_insights,
                    cost_usd=round(c.cost_usd, 6),
                    runs=c.runs,
                    expected_s=round(max(1.0, _expected_s(c, ctx)), 3),
                    why=f"round robin: {c.runs} run{'s' if c.runs != 1 else ''} so far",
                ),
            )
            for i, c in enumerate(ordered)
        ]


POLICIES: dict[str, type[Policy]] = {p.name: p for p in (ExpectedGain, RoundRobin)}


def policy(name: str) -> Policy:
    return POLICIES[name]()
