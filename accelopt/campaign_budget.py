"""A campaign's money (see `accelopt/campaign_core.py`, which composes it): what its runs spent,
in total and per UTC day, and what a run about to start may be given. Pure.

Every run gets `llm.budget_usd` = its share of what is left of the total and of the day, minus a
reserve for the calls it may have in flight when it reaches that budget (a run stops asking at
its budget, but finishes what it asked: `limits.llm_inflight_per_role` x 4 roles x the priciest
call); what is handed out is held until the run ends (the core's `RunRec.committed_usd`, passed
in here as `held`: (day, usd) per running run), so the spend never passes a cap as long as no
call costs more than that priciest call.
"""

from __future__ import annotations

import calendar
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from accelopt import catalog as ev
from accelopt.campaign import BudgetSpec, floor_cents

ROLES_IN_FLIGHT = len(ev.LLM_ROLES)  # a run's LLM lanes (one per role), each bounded by the in-flight limit
MAX_INFLIGHT = 16  # the runs' default `limits.llm_inflight_per_role`

Held = list[tuple[str, float]]  # (day, usd) handed to each running run
Funded = tuple[float | None, int | None, float]  # a run's budget, its in-flight limit, what it holds
Envelope = Callable[..., ev.Envelope]  # (event type, *key, cause=...) -> its envelope


def utc_day(ts: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ts))


def next_day_ts(ts: float) -> float:
    """The start of the UTC day after the one `ts` is in."""
    y, m, d = (int(x) for x in utc_day(ts).split("-"))
    return float(calendar.timegm((y, m, d, 0, 0, 0)) + 86400)


@dataclass
class CampaignBudget:
    caps: BudgetSpec
    first_max_call_usd: float  # the priciest call before any was seen (`CampaignStarted.max_call_usd`)
    spent_usd: float = 0.0
    day_spent: dict[str, float] = field(default_factory=dict)
    max_call_seen: float = 0.0

    def charge(self, day: str, e: ev.CampaignRunFinished) -> None:
        """A run of `day` ended having spent `e.cost_usd`."""
        self.spent_usd += e.cost_usd
        self.day_spent[day] = self.day_spent.get(day, 0.0) + e.cost_usd
        self.max_call_seen = max(self.max_call_seen, e.max_call_usd)

    def spent(self, e: ev.CampaignRunFinished, day: str, env: Envelope) -> ev.CampaignBudgetSpent:
        """The spend so far, after run `e` of `day` was charged."""
        return ev.CampaignBudgetSpent(
            **env(ev.CampaignBudgetSpent, e.run, cause=e),
            run=e.run,
            day=day,
            spent_usd=self.spent_usd,
            day_spent_usd=self.day_spent[day],
            total_usd=self.caps.total_usd,
            daily_usd=self.caps.daily_usd,
        )

    def exhausted(self) -> str:
        """Why a campaign with open items stopped on money (`CampaignStopped.detail`)."""
        if self.caps.total_usd is not None:
            return (
                f"spent ${self.spent_usd:.2f} of ${self.caps.total_usd:.2f}: what is left cannot fund a run"
            )
        return f"spent ${self.spent_usd:.2f}: what is left cannot fund a run"

    def fund(self, now: float, free_slots: int, held: Held) -> Funded | None:
        """(the run's budget, its in-flight limit, what it holds) for one of `free_slots` runs
        about to start; None when what is left cannot fund one."""
        if self.caps.total_usd is None and self.caps.daily_usd is None:
            return None, None, 0.0
        return self._fund_from(self._available(now, held), max(1, free_slots))

    def day_binds(self, now: float, held: Held) -> bool:
        """Whether the day's cap, not the total, is what cannot fund a run."""
        if self.caps.daily_usd is None:
            return False
        total_left = self._total_left(held)
        if self._day_available(now, held) >= total_left:
            return False
        return math.isinf(total_left) or self._fund_from(total_left, 1) is not None

    def _max_call(self) -> float:
        if self.caps.max_call_usd is not None:
            return self.caps.max_call_usd
        if self.max_call_seen > 0:
            return self.max_call_seen * 2
        return self.first_max_call_usd

    def _total_left(self, held: Held) -> float:
        if self.caps.total_usd is None:
            return math.inf
        return self.caps.total_usd - self.spent_usd - sum(usd for _, usd in held)

    def _available(self, now: float, held: Held) -> float:
        """What the caps leave for new runs (inf: no cap): spent and held taken off."""
        return min(self._total_left(held), self._day_available(now, held))

    def _day_available(self, now: float, held: Held) -> float:
        if self.caps.daily_usd is None:
            return math.inf
        day = utc_day(now)
        return self.caps.daily_usd - self.day_spent.get(day, 0.0) - sum(usd for d, usd in held if d == day)

    def _fund_from(self, available: float, free_slots: int) -> Funded | None:
        share = available / free_slots
        max_call = self._max_call()
        if max_call <= 0:
            budget = floor_cents(share)
            return (budget, None, budget) if budget > 0 else None
        # half of the share at most goes to the reserve: fewer calls in flight where money is short
        inflight = min(MAX_INFLIGHT, math.floor(share / 2 / (ROLES_IN_FLIGHT * max_call)))
        if inflight < 1:
            return None
        reserve = ROLES_IN_FLIGHT * inflight * max_call
        budget = floor_cents(share - reserve)
        if budget <= 0:
            return None
        return budget, inflight, budget + reserve
