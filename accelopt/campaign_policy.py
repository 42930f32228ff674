"""A campaign's scheduling policies: which of a device's items runs next, and why.

A policy is a small pure component: it ranks the items of one device kind that are ready to
run (`Candidate`: what the campaign knows of each, folded from its log by
`accelopt/campaign_core.py`) and says why each ranks where it does (`ScheduleScore`, recorded
in the decision). The campaign file names it (`scheduler.policy`); a new one is a class with
`name`, `insight_scope` and `rank` added to `POLICIES`. Stop rules, budgets and device slots
are not a policy's business: the core applies them the same way whatever ranks the items.

A policy's name is recorded with the campaign (its file, in `CampaignStarted`) and with each
decision, and `replay --verify` re-derives the decisions with the policy the log names: so a
policy's behaviour never changes under its name. A better one is a new name (`expected_gain_v2`),
and the old one stays in `POLICIES` so the campaigns logged with it still verify.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol

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
    # memory insights learnt on other items since its last run that its planner sees
    # (`CampaignStarted.insight_sources`; `insight_scope`)
    new_insights: int
    reopened: bool = False  # it had plateaued; new insights bring it back
    # its `log_gains` less what each measurement's noise alone could make (>= 0; v4 ranks by them)
    net_log_gains: tuple[float, ...] = ()


@dataclass(frozen=True)
class PolicyContext:
    prior_gain: float  # expected log-speedup of a run of an item nothing is known of (the file's)
    device_run_s: float  # mean length of a run on this device so far (a prior where none ran)
    fair_share_usd: float | None  # the total budget over the items (None: no total budget)
    # what a first run gains here: the mean log-gain of the device's items' first runs, with
    # the prior counted as one of them (an item not run yet expects this)
    first_run_gain: float | None = None
    # what a repeat run gains here: the same over the device's items' runs after their first
    repeat_run_gain: float | None = None
    # the median length of a run on this device so far (a prior where none ran): unlike the
    # mean, not pulled up by a few stretched runs
    device_run_median_s: float | None = None
    # `first_run_gain` and `repeat_run_gain` of the runs' gains beyond their noise
    first_run_net_gain: float | None = None
    repeat_run_net_gain: float | None = None


# which memory insights count as an item's new ones (its score's bonus, and what re-opens it
# after a plateau), of those of its operator its planner sees (`CampaignStarted.insight_sources`,
# the memory's rule: its own chip's; another chip's only where its runs share across chips):
# "operator": all of them; "language": only those learnt on items in the same kernel language
InsightScope = Literal["operator", "language"]


class Policy(Protocol):
    name: str
    insight_scope: InsightScope

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
      one. An item run already expects what REPEAT runs on its device have gained (the
      prior counted as one of them), moved toward its own runs after its first (the last
      `window`) by their weight: its first run started from the baseline and says little of
      its next, so a big first run does not keep the item on top; one whose later runs keep
      gaining stays there, one whose runs stopped gaining sinks;
    - new insights: memory insights of the same operator learnt since its last run on another
      item that its planner sees (its own chip's; another chip's only where its runs share
      memory across chips, `memory.cross_device_share`) add up to another prior's worth
      (n / (n + 2) of it); the same insights re-open a plateaued item
      (`ExpectedGainSameLanguage` counts only those of its own kernel language);
    - headroom: 1 - its fraction of peak (an item near the roofline has little left);
    - cost: per expected minute of device time (its own mean run; an item not run yet, the
      device's median run), and divided by (1 + its LLM spend over its fair share of the
      total budget), so one item does not take the whole budget.
    """

    name = "expected_gain_v2"
    insight_scope: InsightScope = "operator"
    window = 2

    def rank(
        self, candidates: Sequence[Candidate], ctx: PolicyContext
    ) -> list[tuple[Candidate, ScheduleScore]]:
        scored = [(c, self.score(c, ctx)) for c in candidates]
        scored.sort(key=lambda cs: (-cs[1].score, cs[0].runs, cs[0].order))  # ties: the less tried first
        return scored

    def expected(self, c: Candidate, ctx: PolicyContext) -> tuple[float, str]:
        """The expected log-gain of its next run, and where it comes from ("": its runs)."""
        if c.runs == 0:
            first = ctx.first_run_gain if ctx.first_run_gain is not None else ctx.prior_gain
            return first, "not run yet: what first runs here gained, with the prior"
        base = ctx.repeat_run_gain if ctx.repeat_run_gain is not None else ctx.prior_gain
        recent = self.recent(c.log_gains)
        where = "" if recent else "run once: what repeat runs here gained, with the prior"
        return (sum(recent) + base) / (len(recent) + 1), where

    def recent(self, log_gains: Sequence[float]) -> list[float]:
        """Its last `window` repeat runs' gains (its first run's left out), each >= 0."""
        return [max(0.0, g) for g in log_gains[1:][-self.window :]]

    def expected_s(self, c: Candidate, ctx: PolicyContext) -> float:
        if c.runs:
            return c.seconds / c.runs
        return ctx.device_run_median_s if ctx.device_run_median_s is not None else ctx.device_run_s

    def novelty(self, c: Candidate, ctx: PolicyContext, expected: float) -> float:
        """What its new insights add to its expected log-gain."""
        return ctx.prior_gain * c.new_insights / (c.new_insights + 2)

    def score(self, c: Candidate, ctx: PolicyContext) -> ScheduleScore:
        expected, where = self.expected(c, ctx)
        novelty = self.novelty(c, ctx, expected)
        headroom = _headroom(c)
        expected_s = max(1.0, self.expected_s(c, ctx))
        spend = 1.0 + (c.cost_usd / ctx.fair_share_usd if ctx.fair_share_usd else 0.0)
        score = headroom * (expected + novelty) / (expected_s / 60.0) / spend
        parts = [f"expected gain {math.exp(expected) - 1:+.0%} per run"]
        if where:
            parts[0] += f" ({where})"
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


class ExpectedGainV1(ExpectedGain):
    """The first `expected_gain`, kept so that campaigns logged with it replay and verify. It
    over-rates repeat runs and under-rates items not run yet: an item run already expects its
    last runs' gains (its first run's included) shrunk toward the prior, so an item with a big
    first run keeps being picked; an item not run yet is charged the device's MEAN run, which a
    few stretched runs inflate; and insights of its operator count whatever kernel language
    they were learnt in."""

    name = "expected_gain"
    insight_scope: InsightScope = "operator"

    def expected(self, c: Candidate, ctx: PolicyContext) -> tuple[float, str]:
        if c.runs == 0:
            return super().expected(c, ctx)
        recent = [max(0.0, g) for g in c.log_gains[-self.window :]]
        return (sum(recent) + ctx.prior_gain) / (len(recent) + 1), ""

    def expected_s(self, c: Candidate, ctx: PolicyContext) -> float:
        return _expected_s(c, ctx)


class ExpectedGainSameLanguage(ExpectedGain):
    """`expected_gain_v2` with only the insights of an item's own kernel language counted (its
    bonus, and what re-opens it): for a model whose insights do not carry across languages
    (the offline `builtin/tuner`'s moves are C- or NKI-specific), where another chip's insights
    re-open items for nothing."""

    name = "expected_gain_v2_same_language"
    insight_scope: InsightScope = "language"


class ExpectedGainV3(ExpectedGain):
    """`expected_gain_v2` with one more rule: an item not run yet expects at least what a
    repeat run on its device is expected to gain. Its first run starts from the suite's
    baseline, the least tuned kernel there is, so it has at least as much to find as a run
    that starts from an item's best. Without the rule, one noisy first run on a device (a best
    that measured slower than its start: log-gain 0) pulls every untried item's expectation
    down to half the prior, while one lucky repeat run raises both its own item's recent
    gains and the device's repeat prior, and the campaign keeps re-running that item instead
    of trying the others (seen: 8 runs of one cpu item, 11 items never run)."""

    name = "expected_gain_v3"

    def expected(self, c: Candidate, ctx: PolicyContext) -> tuple[float, str]:
        if c.runs == 0:
            first = ctx.first_run_gain if ctx.first_run_gain is not None else ctx.prior_gain
            repeat = ctx.repeat_run_gain if ctx.repeat_run_gain is not None else ctx.prior_gain
            if repeat > first:
                return repeat, "not run yet: at least what repeat runs here gained"
        return super().expected(c, ctx)


class ExpectedGainV3SameLanguage(ExpectedGainV3):
    """`expected_gain_v3` with only the insights of an item's own kernel language counted
    (as `expected_gain_v2_same_language` is to `expected_gain_v2`)."""

    name = "expected_gain_v3_same_language"
    insight_scope: InsightScope = "language"


class ExpectedGainV4(ExpectedGainV3):
    """`expected_gain_v3` on gains told apart from noise, with insights worth at most what the
    item's own runs promise.

    - a run's gain counts only beyond what its measurement's noise alone could make (its start
      and its best timed in the same rounds, `noise_margin`): a gain inside the noise is 0. In
      v3 a noisy item's "gains" (max(0, noise): positive on average) kept it on top, raised the
      device's repeat prior for every item and kept it from plateauing;
    - new insights add at most what the item's own last runs gained beyond noise (an item run
      at most once: at most its expected gain): insights that did not pay on its last runs are
      not counted again. In v3 they added up to a whole prior whatever the item's runs said, so
      two items of one operator fed each other's bonus with every run, gaining or not, and took
      the device by turns (seen: 30 runs of rmsnorm_matmul and add_rmsnorm_matmul in a row,
      most within noise, while matmul, transpose_matmul, swiglu and bmm, run once, each gained
      about 2x on their next run).
    """

    name = "expected_gain_v4"

    def expected(self, c: Candidate, ctx: PolicyContext) -> tuple[float, str]:
        net = replace(
            ctx,
            first_run_gain=ctx.first_run_net_gain
            if ctx.first_run_net_gain is not None
            else ctx.first_run_gain,
            repeat_run_gain=ctx.repeat_run_net_gain
            if ctx.repeat_run_net_gain is not None
            else ctx.repeat_run_gain,
        )
        return super().expected(replace(c, log_gains=c.net_log_gains or c.log_gains), net)

    def novelty(self, c: Candidate, ctx: PolicyContext, expected: float) -> float:
        recent = self.recent(c.net_log_gains or c.log_gains)
        cap = sum(recent) / len(recent) if recent else expected
        return min(super().novelty(c, ctx, expected), cap)


class ExpectedGainV4SameLanguage(ExpectedGainV4):
    """`expected_gain_v4` with only the insights of an item's own kernel language counted
    (as `expected_gain_v2_same_language` is to `expected_gain_v2`)."""

    name = "expected_gain_v4_same_language"
    insight_scope: InsightScope = "language"


class RoundRobin:
    """Every item in turn: the one with the fewest runs first, then the campaign file's order."""

    name = "round_robin"
    insight_scope: InsightScope = "operator"  # what re-opens a plateaued item (as when it was written)

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


POLICIES: dict[str, type[Policy]] = {
    p.name: p
    for p in (
        ExpectedGain,
        ExpectedGainSameLanguage,
        ExpectedGainV1,
        ExpectedGainV3,
        ExpectedGainV3SameLanguage,
        ExpectedGainV4,
        ExpectedGainV4SameLanguage,
        RoundRobin,
    )
}


def policy(name: str) -> Policy:
    return POLICIES[name]()
