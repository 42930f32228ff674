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

What is decided here, whatever the policy (`accelopt/campaign_policy.py`) ranks, by the core
and the helpers it composes:

- slots: each device kind runs at most `runs_at_once` runs at a time, an item at most one
  (its runs start from its best kernel so far);
- items (`accelopt/campaign_items.py`): an item's figures after each of its runs, settled at
  its target % of peak or on a plateau, re-opened by insights of its operator from other items;
- money (`accelopt/campaign_budget.py`): every run's `llm.budget_usd`, a share of what is left
  of the total and of the day less a reserve for its calls in flight, held until it ends;
- the campaign stops when its time or run count is used up, when no run can be funded,
  when every item is settled, or when what is left waits on devices nobody serves.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from accelopt import catalog as ev
from accelopt.campaign import BudgetSpec, CampaignSpec, spec_from_dict
from accelopt.campaign_budget import CampaignBudget, Funded, Held, next_day_ts, utc_day
from accelopt.campaign_items import SETTLED_WORDS, Insights, ItemState, fold_outcome
from accelopt.campaign_policy import Candidate, Policy, PolicyContext, policy

DEVICE_RUN_PRIOR_S = 300.0  # a run's expected length on a device none has run on yet


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
        self.budget = CampaignBudget(BudgetSpec(), 0.0)  # the spec's caps, once started
        self.insights = Insights(self.items, None, False)  # the items', once started
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
    def spent_usd(self) -> float:
        return self.budget.spent_usd

    @property
    def day_spent(self) -> dict[str, float]:
        return self.budget.day_spent

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
        self.budget = CampaignBudget(self.spec.budget, e.max_call_usd)
        self.insights = Insights(self.items, e.insight_sources, self.policy.insight_scope == "language")
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
        self.budget.charge(s.day, e)
        item.cost_usd += e.cost_usd
        item.seconds += e.duration_s
        self.insights.learn(item, len(e.memory_entries))
        outs: list[ev.Event] = [self.budget.spent(e, s.day, self._env)]
        parked = [q.removeprefix("profiler-") for q in e.unserved if q.startswith("profiler-")]
        if parked:
            outs += self._park(parked, e)
        else:
            assert self.spec is not None and self.started is not None
            product = self.started.item_figures == "product"
            fold_outcome(item, e, self.measures.get(e.run), product, self.spec.stop, self.insights)
        return outs + self._schedule(e)

    # --- decisions ------------------------------------------------------------------------------

    def _env(self, kind: type[ev.Event], *key: object, cause: ev.Event) -> ev.Envelope:
        """The envelope of a decision of this campaign, on the core's clock (`ev.envelope`)."""
        return ev.envelope(kind, self.campaign_id, *key, ts=self.clock(), cause=cause)

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
        open_items = [it for it in self.items.values() if self.insights.ready(it)[0]]
        waiting = [it for it in open_items if it.item.device in self.parked]
        if open_items and len(waiting) < len(open_items):
            return "budget", self.budget.exhausted()
        if waiting:
            return "no profilers", "; ".join(
                self.parked[d] for d in sorted({it.item.device for it in waiting})
            )
        states = [it.settled for it in self.items.values() if it.settled]
        counts = ", ".join(f"{states.count(k)} {what}" for k, what in SETTLED_WORDS.items() if k in states)
        return "settled", f"every item is settled: {counts}"

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
                funded = self.budget.fund(now, sum(free.values()), self._held())
                if funded is None:
                    if self.budget.day_binds(now, self._held()):
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
            ready, reopened = self.insights.ready(it)
            if it.item.device != device or it.running is not None or not ready:
                continue
            out.append(
                Candidate(
                    key=it.key,
                    device=device,
                    order=it.order,
                    runs=it.runs,
                    log_gains=tuple(it.log_gains),
                    net_log_gains=tuple(it.net_log_gains),
                    pct_peak=it.pct_peak,
                    cost_usd=it.cost_usd,
                    seconds=it.seconds,
                    new_insights=self.insights.relevant(it) - it.insights_at_run,
                    reopened=reopened,
                )
            )
        return out

    def _pick(
        self,
        device: str,
        candidates: list[Candidate],
        funded: Funded,
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
        it.insights_at_run = self.insights.relevant(it)
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
        items = [it for it in self.items.values() if it.item.device == device]
        first_gain, repeat_gain = _run_gain_priors(prior, [it.log_gains for it in items])
        first_net, repeat_net = _run_gain_priors(prior, [it.net_log_gains for it in items])
        return PolicyContext(
            prior_gain=prior,
            device_run_s=sum(done) / len(done) if done else DEVICE_RUN_PRIOR_S,
            fair_share_usd=total / len(self.items) if total else None,
            first_run_gain=first_gain,
            repeat_run_gain=repeat_gain,
            device_run_median_s=statistics.median(done) if done else DEVICE_RUN_PRIOR_S,
            first_run_net_gain=first_net,
            repeat_run_net_gain=repeat_net,
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

    def _held(self) -> Held:
        """What the running runs hold of the budget: (day, usd) each."""
        return [(r.scheduled.day, r.committed_usd) for r in self.running]


def _run_gain_priors(prior: float, gains: list[list[float]]) -> tuple[float, float]:
    """What a device's first runs and its repeat runs gained (log, each >= 0), the prior
    counted as one of each."""
    firsts = [max(0.0, g[0]) for g in gains if g]
    repeats = [max(0.0, x) for g in gains for x in g[1:]]
    return (prior + sum(firsts)) / (1 + len(firsts)), (prior + sum(repeats)) / (1 + len(repeats))
