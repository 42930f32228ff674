"""A campaign's scheduler as a pure function of its log (see docs/campaigns.md).

`CampaignCore.step(event)` folds one of the campaign's inputs (its start, a resume, a clock
tick, the outcome of one of its runs) and returns the decisions it makes because of it: runs
to start (`CampaignRunScheduled`, with the policy's reasons and the device's queue), the
spend so far (`CampaignBudgetSpent`), a device nobody serves (`CampaignDeviceParked`), a
pause until the next day's budget (`CampaignPaused`) and the end (`CampaignStopped`). Time
enters only through the inputs' timestamps, so the live driver, a driver resuming after a
crash and `replay --verify` make the same decisions with the same ids, and a resumed
campaign publishes only what its log does not hold yet (its decisions coming back from the
log are recognised by id and skipped).

What is decided here, whatever the policy (`accelopt/campaign_policy.py`) ranks:

- slots: each device kind runs at most `runs_at_once` runs at a time, an item at most one
  (its runs start from its best kernel so far);
- an item is settled at its target % of peak, or after `plateau_runs` runs in a row each
  gaining less than `min_gain`; a plateaued item re-opens when memory insights of its
  operator that its planner sees arrive from another item (`CampaignStarted.insight_sources`:
  its own chip's, another chip's only where its runs share memory across chips): those in its
  kernel language, or any, as the policy's `insight_scope` says (so a log replays under its policy);
- money: every run gets `llm.budget_usd` = its share of what is left of the total and of the
  day, minus a reserve for the calls it may have in flight when it reaches that budget (a
  run stops asking at its budget, but finishes what it asked: `limits.llm_inflight_per_role`
  x 4 roles x the priciest call), and what is handed out is held until the run ends, so the
  spend never passes a cap as long as no call costs more than that priciest call;
- the campaign stops when its time or run count is used up, when no run can be funded,
  when every item is settled, or when what is left waits on devices nobody serves.
"""

from __future__ import annotations

import calendar
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from accelopt import catalog as ev
from accelopt.beam_policy import noise_margin
from accelopt.campaign import CampaignSpec, floor_cents, spec_from_dict
from accelopt.campaign_policy import Candidate, Policy, PolicyContext, policy

ROLES_IN_FLIGHT = len(ev.LLM_ROLES)  # a run's LLM lanes (one per role), each bounded by the in-flight limit
MAX_INFLIGHT = 16  # the runs' default `limits.llm_inflight_per_role`
DEVICE_RUN_PRIOR_S = 300.0  # a run's expected length on a device none has run on yet
SETTLED_WORDS = {
    "target": "at their target",
    "plateau": "on a plateau",
    "failed": "whose baseline did not run",
}


def utc_day(ts: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ts))


def next_day_ts(ts: float) -> float:
    """The start of the UTC day after the one `ts` is in."""
    y, m, d = (int(x) for x in utc_day(ts).split("-"))
    return float(calendar.timegm((y, m, d, 0, 0, 0)) + 86400)


def _usable(side: ev.RemeasuredSide | None) -> bool:
    """A side with a figure: measured (passed) or estimated (unmeasured), a positive median."""
    return side is not None and side.status in ("passed", "unmeasured") and bool(side.median_ms)


def _ms(side: ev.RemeasuredSide) -> float:
    return side.median_ms or math.nan


@dataclass
class ItemState:
    item: ev.CampaignItem
    order: int
    runs: int = 0  # finished runs that reached a profiler
    log_gains: list[float] = field(default_factory=list)
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


@dataclass
class RunRec:
    scheduled: ev.CampaignRunScheduled
    committed_usd: float = 0.0  # its budget and in-flight reserve, held until it ends
    finished: ev.CampaignRunFinished | None = None


class CampaignCore:
    def __init__(self, campaign_id: str, *, clock: Callable[[], float] = time.time) -> None:
        self.campaign_id = campaign_id
        self.clock = clock
        self.started: ev.CampaignStarted | None = None
        self.spec: CampaignSpec | None = None
        self.policy: Policy | None = None  # the spec's, once started
        self.items: dict[str, ItemState] = {}
        self.runs: dict[str, RunRec] = {}
        self.spent_usd = 0.0
        self.day_spent: dict[str, float] = {}
        self.max_call_seen = 0.0
        self.insights: dict[str, dict[str, int]] = {}  # op_type -> item key -> entries learnt
        self.parked: dict[str, str] = {}  # device -> why
        self.measures: dict[str, ev.CampaignItemMeasured] = {}  # run -> its item measured at its end
        self.paused_until: float | None = None
        self.stopped: str | None = None
        self.resumes = 0
        self.applied: set[str] = set()
        # the inputs of a campaign's log; its decisions (CAMPAIGN_DECISION_TYPES) are made here
        # and never re-applied (`step`)
        self._handlers: dict[type[ev.Event], Callable[..., list[ev.Event]]] = ev.dispatch_table(
            ev.on(ev.CampaignStarted, self._on_campaign_started),
            ev.on(ev.CampaignResumed, self._on_campaign_resumed),
            ev.on(ev.CampaignTicked, self._on_campaign_ticked),
            ev.on(ev.CampaignRunFinished, self._on_campaign_run_finished),
            ev.on(ev.CampaignItemMeasured, self._on_campaign_item_measured),
        )

    # --- public -------------------------------------------------------------------------------

    def step(self, event: ev.Event) -> list[ev.Event]:
        """Fold `event` and return the decisions made because of it (applied already)."""
        if event.event_id in self.applied or event.run_id != self.campaign_id:
            return []
        self.applied.add(event.event_id)
        if type(event) in ev.CAMPAIGN_DECISION_TYPES:
            return []  # a decision not made here: a reader folds it, the core never re-applies one
        handler = self._handlers.get(type(event))
        if handler is None or (self.started is None and not isinstance(event, ev.CampaignStarted)):
            return []
        outs = handler(event)
        self.applied.update(o.event_id for o in outs)
        return outs

    @property
    def running(self) -> list[RunRec]:
        return [r for r in self.runs.values() if r.finished is None]

    @property
    def deadline_ts(self) -> float | None:
        hours = self.spec.stop.max_hours if self.spec else None
        return self.started.ts + hours * 3600.0 if self.started is not None and hours else None

    # --- inputs ---------------------------------------------------------------------------------

    def _on_campaign_started(self, e: ev.CampaignStarted) -> list[ev.Event]:
        if self.started is not None:
            return []
        self.started = e
        self.spec = spec_from_dict(e.spec, source="CampaignStarted.spec")
        self.policy = policy(self.spec.scheduler.policy)
        self.items = {it.key: ItemState(it, i) for i, it in enumerate(e.items)}
        return self._schedule(e)

    def _on_campaign_resumed(self, e: ev.CampaignResumed) -> list[ev.Event]:
        self.resumes = max(self.resumes, e.attempt)
        self.parked.clear()  # a worker may serve it now: try again
        return self._schedule(e)

    def _on_campaign_ticked(self, e: ev.CampaignTicked) -> list[ev.Event]:
        return self._schedule(e)

    def _on_campaign_item_measured(self, e: ev.CampaignItemMeasured) -> list[ev.Event]:
        """Kept for the run's `CampaignRunFinished`, which follows it (no decision before)."""
        self.measures.setdefault(e.run, e)
        return []

    def _on_campaign_run_finished(self, e: ev.CampaignRunFinished) -> list[ev.Event]:
        rec = self.runs.get(e.run)
        if rec is None or rec.finished is not None:
            return []
        rec.finished = e
        s = rec.scheduled
        item = self.items[s.item]
        item.running = None
        self.spent_usd += e.cost_usd
        self.day_spent[s.day] = self.day_spent.get(s.day, 0.0) + e.cost_usd
        self.max_call_seen = max(self.max_call_seen, e.max_call_usd)
        item.cost_usd += e.cost_usd
        item.seconds += e.duration_s
        if e.memory_entries:
            per_item = self.insights.setdefault(item.item.op_type, {})
            per_item[item.key] = per_item.get(item.key, 0) + len(e.memory_entries)
        outs: list[ev.Event] = [self._budget_spent(e, s)]
        parked = [q.removeprefix("profiler-") for q in e.unserved if q.startswith("profiler-")]
        if parked:
            outs += self._park(parked, e)
        else:
            self._fold_outcome(item, e)
        return outs + self._schedule(e)

    def _fold_outcome(self, item: ItemState, e: ev.CampaignRunFinished) -> None:
        spec = self.spec
        assert spec is not None
        item.runs += 1
        if e.gain is None:
            item.failures += 1
            item.log_gains.append(0.0)
            if item.failures >= 2 and item.runs == item.failures:
                item.settled = "failed"  # its baseline never ran: nothing to optimize from
        else:
            item.failures = 0
            measured = self.measures.get(e.run)
            if measured is not None:
                self._fold_measured(item, e, measured)
            elif self.started is not None and self.started.item_figures == "product":
                self._fold_product(item, e)
            else:
                item.log_gains.append(0.0)  # not measured: its kernels are not taken
        stop = spec.stop
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
                item.settled_insights = self._relevant(item)

    def _fold_measured(self, item: ItemState, e: ev.CampaignRunFinished, m: ev.CampaignItemMeasured) -> None:
        """The item's figures from its measurement at the run's end: the run's best is taken
        where it beat the kernel the run started from in the same rounds (that ratio is the
        run's gain, what plateaus are judged by); the item's speedup is the baseline's median
        over its best's, its % of peak its best's."""
        origin, cand = m.origin, m.candidate
        start = m.start or origin
        if origin is None or start is None or not (_usable(origin) and _usable(start)):
            item.log_gains.append(0.0)  # the baseline or its best no longer runs: nothing taken
            return
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

    def _fold_product(self, item: ItemState, e: ev.CampaignRunFinished) -> None:
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

    # --- decisions ------------------------------------------------------------------------------

    def _env(self, kind: type[ev.Event], *key: object, cause: ev.Event) -> ev.Envelope:
        """The envelope of a decision of this campaign, on the core's clock (`ev.envelope`)."""
        return ev.envelope(kind, self.campaign_id, *key, ts=self.clock(), cause=cause)

    def _budget_spent(self, e: ev.CampaignRunFinished, s: ev.CampaignRunScheduled) -> ev.CampaignBudgetSpent:
        b = self.spec.budget if self.spec else None
        return ev.CampaignBudgetSpent(
            **self._env(ev.CampaignBudgetSpent, e.run, cause=e),
            run=e.run,
            day=s.day,
            spent_usd=self.spent_usd,
            day_spent_usd=self.day_spent[s.day],
            total_usd=b.total_usd if b else None,
            daily_usd=b.daily_usd if b else None,
        )

    def _park(self, devices: list[str], cause: ev.CampaignRunFinished) -> list[ev.Event]:
        outs: list[ev.Event] = []
        for device in sorted(set(devices) - set(self.parked)):
            why = (
                f"no profiler serves {device}: run {cause.run} waited "
                f"{self.spec.unserved_fail_after_s if self.spec else 0:g} s for one (start one with "
                f"`accelopt worker --device {device}`, then `accelopt campaign resume`)"
            )
            self.parked[device] = why
            outs.append(
                ev.CampaignDeviceParked(
                    **self._env(ev.CampaignDeviceParked, device, self.resumes, cause=cause),
                    device=device,
                    reason=why,
                    items=sorted(k for k, it in self.items.items() if it.item.device == device),
                )
            )
        return outs

    def _schedule(self, cause: ev.Event) -> list[ev.Event]:
        if self.stopped is not None or self.spec is None:
            return []
        now = cause.ts
        outs: list[ev.Event] = []
        limit = self._limit_reason(now)
        if limit is None:
            if self.paused_until is not None and now < self.paused_until:
                return []
            self.paused_until = None
            outs += self._fill_slots(cause, now)
        if not self.running and self.paused_until is None:
            reason, detail = limit if limit is not None else self._idle_reason()
            if reason:
                self.stopped = reason
                outs.append(
                    ev.CampaignStopped(
                        **self._env(ev.CampaignStopped, cause=cause), reason=reason, detail=detail
                    )
                )
        return outs

    def _limit_reason(self, now: float) -> tuple[str, str] | None:
        assert self.spec is not None
        deadline = self.deadline_ts
        if deadline is not None and now >= deadline:
            return "time", f"the campaign's {self.spec.stop.max_hours:g} h are up"
        max_runs = self.spec.stop.max_runs
        if max_runs is not None and len(self.runs) >= max_runs:
            return "max_runs", f"{len(self.runs)} runs scheduled (stop.max_runs)"
        return None

    def _idle_reason(self) -> tuple[str, str]:
        """Why a campaign with nothing running and nothing scheduled stops."""
        open_items = [it for it in self.items.values() if self._ready(it)[0]]
        waiting = [it for it in open_items if it.item.device in self.parked]
        if open_items and len(waiting) < len(open_items):
            b = self.spec.budget if self.spec else None
            return "budget", (
                f"spent ${self.spent_usd:.2f} of ${b.total_usd:.2f}: what is left cannot fund a run"
                if b is not None and b.total_usd is not None
                else f"spent ${self.spent_usd:.2f}: what is left cannot fund a run"
            )
        if waiting:
            return "no profilers", "; ".join(
                self.parked[d] for d in sorted({it.item.device for it in waiting})
            )
        states = [it.settled for it in self.items.values() if it.settled]
        counts = ", ".join(f"{states.count(k)} {what}" for k, what in SETTLED_WORDS.items() if k in states)
        return "settled", f"every item is settled: {counts}"

    def _ready(self, it: ItemState) -> tuple[bool, bool]:
        """(whether it may run, whether it re-opens after a plateau)."""
        if it.settled == "plateau" and self._relevant(it) > it.settled_insights:
            return True, True
        return not it.settled, False

    def _relevant(self, it: ItemState) -> int:
        """Insights of its operator that other items taught the memory and its planner sees
        (`CampaignStarted.insight_sources`: by default its own chip's; another chip's only
        where its runs share memory across chips): with the policy's `insight_scope`
        "language", only those of items in its kernel language. A log from before the sources
        were recorded counts every other item's, as it was decided."""
        same_language = self.policy is not None and self.policy.insight_scope == "language"
        sources = self.started.insight_sources if self.started is not None else None
        seen = None if sources is None else set(sources.get(it.key, ()))
        return sum(
            n
            for k, n in self.insights.get(it.item.op_type, {}).items()
            if k != it.key
            and (seen is None or k in seen)
            and (not same_language or self.items[k].item.language == it.item.language)
        )

    def _fill_slots(self, cause: ev.Event, now: float) -> list[ev.Event]:
        spec = self.spec
        assert spec is not None
        devices = sorted({it.item.device for it in self.items.values()} - set(self.parked))
        busy = {d: sum(1 for r in self.running if r.scheduled.device == d) for d in devices}
        free = {d: spec.device(d).slots - busy[d] for d in devices}
        outs: list[ev.Event] = []
        for device in devices:
            while free[device] > 0 and self._limit_reason(now) is None:
                candidates = self._candidates(device)
                if not candidates:
                    break
                funded = self._fund(now, sum(free.values()))
                if funded is None:
                    if self._day_binds(now):
                        self.paused_until = next_day_ts(now)
                        outs.append(
                            ev.CampaignPaused(
                                **self._env(ev.CampaignPaused, self.paused_until, cause=cause),
                                reason=f"the day's budget (${spec.budget.daily_usd:.2f}) cannot fund another run",
                                until_ts=self.paused_until,
                            )
                        )
                    return outs
                outs.append(self._pick(device, candidates, funded, cause, now))
                free[device] -= 1
        return outs

    def _candidates(self, device: str) -> list[Candidate]:
        out = []
        for it in self.items.values():
            ready, reopened = self._ready(it)
            if it.item.device != device or it.running is not None or not ready:
                continue
            out.append(
                Candidate(
                    key=it.key,
                    device=device,
                    order=it.order,
                    runs=it.runs,
                    log_gains=tuple(it.log_gains),
                    pct_peak=it.pct_peak,
                    cost_usd=it.cost_usd,
                    seconds=it.seconds,
                    new_insights=self._relevant(it) - it.insights_at_run,
                    reopened=reopened,
                )
            )
        return out

    def _pick(
        self,
        device: str,
        candidates: list[Candidate],
        funded: tuple[float | None, int | None, float],
        cause: ev.Event,
        now: float,
    ) -> ev.CampaignRunScheduled:
        spec = self.spec
        assert spec is not None
        pol = self.policy
        assert pol is not None
        ranked = pol.rank(candidates, self._context(device))
        chosen, reason = ranked[0]
        it = self.items[chosen.key]
        index = len(self.runs) + 1
        run_id = f"{self.campaign_id}-r{index:03d}"
        budget, inflight, committed = funded
        decision = ev.CampaignRunScheduled(
            **self._env(ev.CampaignRunScheduled, index, cause=cause),
            run=run_id,
            index=index,
            item=it.key,
            device=device,
            seed=spec.seed * 1000 + index,
            policy=pol.name,
            reason=reason,
            queue=self._queue(device, ranked),
            day=utc_day(now),
            budget_usd=budget,
            llm_inflight=inflight,
            deadline_ts=self.deadline_ts,
            start_run=it.best_run,
            start_kernel=it.best_kernel,
        )
        self.runs[run_id] = RunRec(decision, committed_usd=committed)
        it.running = run_id
        it.insights_at_run = self._relevant(it)
        if it.settled == "plateau":  # re-opened: its plateau is judged again after this run
            it.settled = ""
        return decision

    def _context(self, device: str) -> PolicyContext:
        spec = self.spec
        assert spec is not None
        done = [
            r.finished.duration_s for r in self.runs.values() if r.finished and r.scheduled.device == device
        ]
        total = spec.budget.total_usd
        prior = spec.scheduler.prior_gain
        gains = [it.log_gains for it in self.items.values() if it.item.device == device]
        firsts = [max(0.0, g[0]) for g in gains if g]
        repeats = [max(0.0, x) for g in gains for x in g[1:]]
        return PolicyContext(
            prior_gain=prior,
            device_run_s=sum(done) / len(done) if done else DEVICE_RUN_PRIOR_S,
            fair_share_usd=total / len(self.items) if total else None,
            first_run_gain=(prior + sum(firsts)) / (1 + len(firsts)),
            repeat_run_gain=(prior + sum(repeats)) / (1 + len(repeats)),
            device_run_median_s=statistics.median(done) if done else DEVICE_RUN_PRIOR_S,
        )

    def _queue(self, device: str, ranked: list) -> list[ev.QueueEntry]:
        out = [
            ev.QueueEntry(item=c.key, state="picked" if i == 0 else "ready", score=s.score, why=s.why)
            for i, (c, s) in enumerate(ranked)
        ]
        ranked_keys = {c.key for c, _ in ranked}
        for it in self.items.values():
            if it.item.device != device or it.key in ranked_keys:
                continue
            if it.running is not None:
                out.append(ev.QueueEntry(item=it.key, state="running", why=f"run {it.running}"))
            elif it.settled:
                why = {
                    "plateau": f"no gain over its last {self.spec.stop.plateau_runs if self.spec else 0} runs; "
                    "new insights of its operator would re-open it",
                    "target": f"reached {it.pct_peak:.0%} of peak"
                    if it.pct_peak is not None
                    else "reached its target",
                    "failed": "its baseline did not run",
                }.get(it.settled, "")
                out.append(ev.QueueEntry(item=it.key, state=f"settled: {it.settled}", why=why))
        return out

    # --- money ----------------------------------------------------------------------------------

    def _max_call(self) -> float:
        spec = self.spec
        assert spec is not None and self.started is not None
        if spec.budget.max_call_usd is not None:
            return spec.budget.max_call_usd
        if self.max_call_seen > 0:
            return self.max_call_seen * 2
        return self.started.max_call_usd

    def _available(self, now: float) -> float:
        """What the caps leave for new runs (inf: no cap): spent and committed taken off."""
        b = self.spec.budget if self.spec else None
        out = math.inf
        if b is None:
            return out
        committed = sum(r.committed_usd for r in self.running)
        if b.total_usd is not None:
            out = min(out, b.total_usd - self.spent_usd - committed)
        if b.daily_usd is not None:
            out = min(out, self._day_available(now))
        return out

    def _day_available(self, now: float) -> float:
        b = self.spec.budget if self.spec else None
        if b is None or b.daily_usd is None:
            return math.inf
        day = utc_day(now)
        committed = sum(r.committed_usd for r in self.running if r.scheduled.day == day)
        return b.daily_usd - self.day_spent.get(day, 0.0) - committed

    def _day_binds(self, now: float) -> bool:
        """Whether the day's cap, not the total, is what cannot fund a run."""
        b = self.spec.budget if self.spec else None
        if b is None or b.daily_usd is None:
            return False
        total_left = math.inf
        if b.total_usd is not None:
            committed = sum(r.committed_usd for r in self.running)
            total_left = b.total_usd - self.spent_usd - committed
        if self._day_available(now) >= total_left:
            return False
        return math.isinf(total_left) or self._fund_from(total_left, 1) is not None

    def _fund(self, now: float, free_slots: int) -> tuple[float | None, int | None, float] | None:
        """(the run's budget, its in-flight limit, what it commits) for one of `free_slots`
        runs about to start; None when what is left cannot fund one."""
        b = self.spec.budget if self.spec else None
        if b is None or (b.total_usd is None and b.daily_usd is None):
            return None, None, 0.0
        return self._fund_from(self._available(now), max(1, free_slots))

    def _fund_from(self, available: float, free_slots: int) -> tuple[float | None, int | None, float] | None:
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
