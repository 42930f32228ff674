"""The coordinator's decisions as a pure function of the run's event history.

`CoordinatorCore.step(event)` folds one event into the run state and returns the events the
coordinator decides to publish (requests, beam selections, iteration boundaries) plus
effects for its shell to publish (`MemoryRequested`: a retrieval the memory worker answers
with the `MemoryRetrieved` event). Decisions are applied to the state at once, so the core never
decides twice; when its own events come back from the log they are recognised by id and
skipped. Event ids are derived from what they are about, so the live coordinator, a
coordinator resuming after a crash, and `replay --verify` all run this same code over the
same history and produce the same ids: a resumed run re-publishes only what is missing.

A duplicate of any event, arriving at any time, changes nothing: results count only while
their request is pending, an LLM call's cost only once per pending request, and an
iteration starts and completes once. The ids already applied are therefore kept only for a
window (`RecentIds`), a fast path that keeps a run of any length at a bounded size.

No Ray, NATS or LanceDB here; time only enters through the `clock` used for `ts`.
"""

from __future__ import annotations

import hashlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import msgspec

from accelopt import catalog as ev
from accelopt.config import RunConfig, recorded_config
from accelopt.lanes import Lanes
from accelopt.model_health import ModelHealth
from accelopt.policy import (
    Pair,
    Scored,
    plan_pair,
    select_beam,
    select_summaries,
)
from accelopt.profile import KERNEL_FAILURES, Profile
from accelopt.records import MemoryEntry, mark_estimated
from accelopt.remeasure import Remeasure, Slot, compare, run_seed_base
from accelopt.spend import Spend


class RecentIds:
    """The last `capacity` ids added: set membership with first-in-first-out eviction."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._ids: set[str] = set()
        self._order: deque[str] = deque()

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, event_id: str) -> None:
        if event_id in self._ids:
            return
        self._ids.add(event_id)
        self._order.append(event_id)
        if len(self._order) > self.capacity:
            self._ids.discard(self._order.popleft())


# ids the core remembers as applied: far more than the events between a decision and its
# copy coming back from the log; older duplicates are caught by the semantic guards
APPLIED_WINDOW = 65_536


@dataclass
class Step:
    outputs: list[ev.Event] = field(default_factory=list)
    # retrievals to ask for: published by the shell, answered by the memory worker's
    # MemoryRetrieved of id `result_id` (not decisions: logs from before they existed replay too)
    effects: list[ev.MemoryRequested] = field(default_factory=list)


@dataclass
class KernelRec:
    kernel_id: str
    problem: str
    iteration: int
    source: str
    language: str
    parent_id: str | None
    plan_id: str | None
    candidate_id: str | None  # the beam candidate this kernel descends from
    fix_of: str | None
    fix_round: int
    order: int
    profile: Profile | None = None

    @property
    def passed(self) -> bool:
        return self.profile is not None and self.profile.status == "passed"

    @property
    def latency_ms(self) -> float | None:
        return self.profile.latency_ms if self.profile else None

    def scored(self) -> Scored:
        # ties (identical sources served from one profile) break on iteration then kernel id,
        # never on arrival order: a replay or an ablation that sees results in another order
        # must select the same kernels
        return Scored(
            self.kernel_id,
            self.latency_ms if self.passed else None,
            self.passed,
            hashlib.sha256(self.source.encode()).hexdigest(),
            self.iteration,
            unmeasured=self.profile is not None and self.profile.status == "unmeasured",
            spread=self.spread,
            estimated_ms=self.estimated_ms,
        )

    @property
    def estimated_ms(self) -> float | None:
        return self.profile.estimated_ms if self.profile is not None else None

    @property
    def spread(self) -> float:
        return self.profile.latency.spread if self.profile is not None and self.profile.latency else 0.0


@dataclass
class ProblemState:
    target: ev.ProblemTarget
    phase: str = "baseline"  # baseline -> search -> summarize -> (next iteration) ... -> done
    iteration: int = 0
    started_through: int = 0  # the last iteration whose IterationStarted was folded
    completed_through: int = -1  # the last iteration whose IterationCompleted was folded
    beam: list[str] = field(default_factory=list)
    best_id: str | None = None
    pending: set[str] = field(default_factory=set)
    plan_kernels: dict[str, list[str]] = field(default_factory=dict)  # plan_id -> kernel ids
    plan_candidate: dict[str, str] = field(default_factory=dict)  # plan_id -> candidate id
    # candidate id -> plan samples drawn for it so far: a candidate the beam keeps is planned
    # again with the next sample indices, so it gets new plans rather than the cached replies
    plans_drawn: dict[str, int] = field(default_factory=dict)
    kernel_ids: list[str] = field(default_factory=list)  # its kernels still held in CoordinatorCore.kernels
    # the id of every kernel proposed for it, forgotten or not (ids only, never sources): the
    # same source proposed again is the same kernel, which its first proposal owns
    proposed: set[str] = field(default_factory=set)
    # the kernel pairs summarized so far: a pair is learnt once, though a kernel proposed again
    # may pair with the same kernel in a later iteration
    summarized: set[frozenset[str]] = field(default_factory=set)
    kernels_profiled: int = 0
    memory_ids: list[str] = field(default_factory=list)
    baseline_id: str = ""
    # the end-of-problem re-measure of (baseline, best) and its requests' slots by request id
    remeasure: Remeasure | None = None
    remeasure_slots: dict[str, Slot] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.target.problem.name


class CoordinatorCore:
    # the types of a run's log that change nothing here: its own decisions applied when they
    # were made (a copy coming back is a no-op), the retrieval it asked for as an effect, and
    # the curator's receipts. With the table (`_handlers`) and what `_handle` takes apart
    # (RunStarted, the requests) they are every type of a run's log (tests/events/test_event_catalog.py)
    IGNORED: ClassVar[frozenset[type[ev.Event]]] = frozenset(
        {
            ev.BeamSelected,
            ev.BudgetExceeded,
            ev.MemoryEntryAdded,
            ev.ProblemRemeasured,
            ev.MemoryRequested,
            ev.MemoryIndexed,
        }
    )

    def __init__(
        self, run_id: str, *, clock: Callable[[], float] = time.time, applied_window: int = APPLIED_WINDOW
    ) -> None:
        self.run_id = run_id
        self.clock = clock
        self.config: RunConfig | None = None
        self.fork_config: RunConfig | None = None
        self.started: ev.RunStarted | None = None
        self.problems: dict[str, ProblemState] = {}
        self.kernels: dict[str, KernelRec] = {}
        # pending requests only: a request's entries go when its result is folded, and the
        # kernels a problem's search left behind go when its next iteration starts, so the
        # state of a run that goes on for days stays the size of its current iterations
        # (benchmarks/long_run_bench.py measures it)
        self.requests: dict[str, ev.Event] = {}  # request id -> request event
        self.request_problem: dict[str, str] = {}
        self.applied = RecentIds(applied_window)
        # the deciders of one concern each, set from the run's config at RunStarted
        self.lanes = Lanes(0, 0)
        self.spend = Spend(None)
        self.health = ModelHealth(0)
        self.finished = False
        self.failed: str | None = None
        self._order = 0
        # what each event type of the run's log does to the core (`ev.on` holds each handler
        # to its type); RunStarted and the requests are handled apart (`_handle`), and the
        # types in IGNORED change nothing here
        self._handlers: dict[type[ev.Event], Callable[..., list[ev.Event]]] = ev.dispatch_table(
            ev.on(ev.KernelProposed, self._on_kernel_proposed),
            ev.on(ev.KernelProfiled, self._on_kernel_profiled),
            ev.on(ev.IterationStarted, self._on_iteration_started),
            ev.on(ev.IterationCompleted, self._on_iteration_completed),
            ev.on(ev.MemoryRetrieved, self._on_memory_retrieved),
            ev.on(ev.PlanProposed, self._on_plan_proposed),
            ev.on(ev.ProposalFailed, self._on_proposal_failed),
            ev.on(ev.InsightSummarized, self._on_insight_summarized),
            ev.on(ev.LLMCallCompleted, self._on_llm_call_completed),
            ev.on(ev.RunCompleted, self._on_run_completed),
            ev.on(ev.RunFailed, self._on_run_failed),
        )

    # --- public -------------------------------------------------------------------------------

    def step(self, event: ev.Event) -> Step:
        """Fold `event` and return what to publish and perform because of it."""
        out = Step()
        if event.event_id in self.applied or event.run_id != self.run_id:
            return out
        work: deque[ev.Event] = deque([event])
        while work:
            e = work.popleft()
            if e.event_id in self.applied:
                continue
            self.applied.add(e.event_id)
            produced = self._handle(e, out)
            for p in produced:
                if p.event_id in self.applied:
                    continue
                out.outputs.append(p)
                work.append(p)
        return out

    @property
    def spent_usd(self) -> float:
        return self.spend.spent_usd

    @property
    def stopping(self) -> str | None:
        """Why the run stops deciding new work ("budget"), or None."""
        return "budget" if self.spend.exceeded else None

    @property
    def cfg(self) -> RunConfig:
        assert self.config is not None, "RunStarted not seen yet"
        return self.config

    def cfg_at(self, iteration: int) -> RunConfig:
        """The config in force for an iteration's decisions: an ablation fork repeats its
        parent's settings up to `fork_iteration` and uses its own after."""
        if (
            self.fork_config is not None
            and self.started is not None
            and self.started.parent_settings_at(iteration)
        ):
            return self.fork_config
        return self.cfg

    # --- helpers ------------------------------------------------------------------------------

    def _env(self, kind: type[ev.Event], *key: object, cause: ev.Event | None = None) -> ev.Envelope:
        """The envelope of a decision of this run, on the core's clock (`ev.envelope`)."""
        return ev.envelope(kind, self.run_id, *key, ts=self.clock(), cause=cause)

    def _request(self, problem: ProblemState, request: ev.Event) -> list[ev.Event]:
        """Register a request as pending; publish it now or queue it behind its lane's limit."""
        problem.pending.add(request.event_id)
        self.request_problem[request.event_id] = problem.name
        return [request] if self.lanes.admit(request) else []

    def _resolve(self, request_id: str) -> tuple[ProblemState | None, list[ev.Event]]:
        """A request got its result: free its lane slot, release the next queued request."""
        name = self.request_problem.get(request_id)
        problem = self.problems.get(name) if name else None
        if problem is None or request_id not in problem.pending:
            return problem, []
        problem.pending.discard(request_id)
        del self.request_problem[request_id]
        self.spend.forget(request_id)
        req = self.requests.pop(request_id, None)
        if req is None:
            return problem, []
        released, dropped = self.lanes.release(req, stopping=self.stopping is not None)
        for d in dropped:
            self._drop(d)
        return problem, released

    def _drop(self, request: ev.Event) -> None:
        name = self.request_problem.pop(request.event_id, None)
        self.requests.pop(request.event_id, None)
        self.spend.forget(request.event_id)
        if name:
            self.problems[name].pending.discard(request.event_id)

    # --- dispatch -----------------------------------------------------------------------------

    def _handle(self, e: ev.Event, out: Step) -> list[ev.Event]:
        if isinstance(e, ev.RunStarted):
            return self._start_run(e)
        if self.config is None or self.failed:
            return []  # nothing is decided before the run's config is known, nor after it failed
        if type(e) in ev.ROLE_OF_REQUEST or isinstance(e, ev.ProfileRequested):
            if e.event_id in self.request_problem:  # a copy of an answered request is not kept again
                self.requests[e.event_id] = e
            return []
        handler = self._handlers.get(type(e))
        return handler(e, out) if handler else []

    def _start_run(self, e: ev.RunStarted) -> list[ev.Event]:
        if self.started is not None:
            return []
        self.started = e
        self.config = recorded_config(e.config)
        lim = self.config.limits
        self.lanes = Lanes(lim.llm_inflight_per_role, lim.profiles_inflight_per_device)
        self.spend = Spend(self.config.llm.budget_usd)
        self.health = ModelHealth(self.config.llm.fail_after)
        if e.fork_config is not None:
            self.fork_config = recorded_config(e.fork_config, source="RunStarted.fork_config")
        outs: list[ev.Event] = []
        for target in sorted(e.targets, key=lambda t: t.problem.name):
            p = ProblemState(target=target)
            self.problems[p.name] = p
            source = target.problem.baseline.entry_file().content
            kid = e.new_kernel_id(p.name, target.language, source, "baseline", p.name)
            p.baseline_id = kid
            outs.append(
                ev.KernelProposed(
                    **self._env(ev.KernelProposed, kid, cause=e),
                    kernel_id=kid,
                    problem=p.name,
                    iteration=0,
                    parent_id=None,
                    plan_id=None,
                    request_id=e.event_id,
                    language=target.language,
                    source=source,
                )
            )
        return outs

    def _on_kernel_proposed(self, e: ev.KernelProposed, out: Step) -> list[ev.Event]:
        p = self.problems.get(e.problem)
        if p is None or e.iteration < p.iteration:
            return []  # unknown, or of an iteration already closed (its kernels may be forgotten)
        if e.kernel_id in p.proposed:
            if e.request_id not in p.pending:
                return []  # a copy of a proposal already folded (the baseline's too)
            return self._proposed_again(p, e)
        if e.kernel_id != p.baseline_id and e.request_id not in p.pending:
            return []  # a copy of a proposal already folded: its request is answered
        p.proposed.add(e.kernel_id)
        _, released = self._resolve(e.request_id)
        parent_id, plan_id, candidate_id = e.parent_id, e.plan_id, e.parent_id
        if e.fix_of and e.fix_of in self.kernels:
            broken = self.kernels[e.fix_of]
            parent_id, plan_id, candidate_id = broken.parent_id, broken.plan_id, broken.candidate_id
        self._order += 1
        rec = KernelRec(
            e.kernel_id,
            e.problem,
            e.iteration,
            e.source,
            e.language,
            parent_id,
            plan_id,
            candidate_id,
            e.fix_of,
            e.fix_round,
            self._order,
        )
        self.kernels[e.kernel_id] = rec
        p.kernel_ids.append(e.kernel_id)
        if plan_id:
            p.plan_kernels.setdefault(plan_id, []).append(e.kernel_id)
        seed_offset = (
            int(hashlib.sha256(e.kernel_id.encode()).hexdigest()[:6], 16) % 100_000 if e.iteration else 0
        )
        req = ev.ProfileRequested(
            **self._env(ev.ProfileRequested, e.kernel_id, cause=e),
            kernel_id=e.kernel_id,
            problem=e.problem,
            device=p.target.device,
            language=e.language,
            source=e.source,
            purpose="baseline" if e.iteration == 0 and parent_id is None else "candidate",
            seed_offset=seed_offset,
        )
        return released + self._request(p, req)

    def _proposed_again(self, p: ProblemState, e: ev.KernelProposed) -> list[ev.Event]:
        """A kernel proposed again (its id is its content): the same kernel. Its first proposal
        owns it (its record: iteration, lineage, fix chain, its one profile); this proposal
        answers its request, is not profiled, and is a sample of its own plan too, as it was
        when each proposal was a kernel of its own, so the beam and the summaries do not
        depend on which of two plans came first (a kernel is one candidate, however many plans
        reached it: `select_beam` collapses it). A fix that returns a known kernel ends its
        chain; a kernel the search already let go of is not a candidate again."""
        _, released = self._resolve(e.request_id)
        plan_id = e.plan_id
        if e.fix_of and e.fix_of in self.kernels:
            plan_id = self.kernels[e.fix_of].plan_id
        if plan_id:
            samples = p.plan_kernels.setdefault(plan_id, [])
            if e.kernel_id not in samples:
                samples.append(e.kernel_id)
        return released + self._maybe_advance(p, e)

    def _on_kernel_profiled(self, e: ev.KernelProfiled, out: Step) -> list[ev.Event]:
        req = self.requests.get(e.request_id)
        if isinstance(req, ev.ProfileRequested) and req.purpose == "remeasure":
            return self._remeasure_profiled(e)
        p, released = self._resolve(e.request_id)
        k = self.kernels.get(e.kernel_id)
        if p is None or k is None or k.profile is not None:
            return released
        k.profile = e.profile
        p.kernels_profiled += 1
        outs = list(released)
        if p.phase == "baseline":
            return outs + self._baseline_done(p, k, e)
        prof = e.profile
        if (
            prof.status in KERNEL_FAILURES
            and k.fix_round < self.cfg_at(k.iteration).search.fix_rounds
            and not self.stopping
        ):
            parent = self.kernels.get(k.parent_id) if k.parent_id else None
            fix = ev.FixRequested(
                **self._env(ev.FixRequested, k.kernel_id, cause=e),
                kernel_id=k.kernel_id,
                problem=p.name,
                iteration=k.iteration,
                fix_round=k.fix_round + 1,
                error_log=prof.log[-8000:],
                status=prof.status,
                language=k.language,
                device=p.target.device,
                source=k.source,
                parent_source=parent.source if parent else "",
            )
            outs += self._request(p, fix)
        return outs + self._maybe_advance(p, e)

    def _baseline_done(self, p: ProblemState, k: KernelRec, cause: ev.Event) -> list[ev.Event]:
        prof = k.profile
        assert prof is not None
        usable = prof.status == "passed" or prof.status == "unmeasured"
        p.beam = [k.kernel_id] if usable else []
        p.best_id = k.kernel_id
        note = "" if usable else f"baseline {prof.status}: nothing to optimize from"
        return [self._iteration_completed(p, 0, cause, note=note)]

    def _iteration_completed(
        self, p: ProblemState, iteration: int, cause: ev.Event, note: str = ""
    ) -> ev.Event:
        best = self.kernels.get(p.best_id) if p.best_id else None
        return ev.IterationCompleted(
            **self._env(ev.IterationCompleted, p.name, iteration, cause=cause),
            problem=p.name,
            iteration=iteration,
            best_kernel_id=p.best_id or "",
            best_latency_ms=best.latency_ms if best and best.passed else None,
            best_pct_peak=best.profile.peak_fraction if best and best.passed and best.profile else None,
            kernels_profiled=p.kernels_profiled,
            note=note,
            best_estimated_ms=best.estimated_ms if best else None,
            best_estimated_pct_peak=(
                best.profile.estimate.peak_fraction
                if best and best.estimated_ms is not None and best.profile and best.profile.estimate
                else None
            ),
        )

    def _on_iteration_completed(self, e: ev.IterationCompleted, out: Step) -> list[ev.Event]:
        p = self.problems[e.problem]
        if e.iteration <= p.completed_through:
            return []
        p.completed_through = e.iteration
        self._forget_left_behind(p)
        more = e.iteration < self.cfg.search.iterations and p.beam and not self.stopping and not e.note
        if more:
            p.iteration = e.iteration + 1
            p.phase = "search"
            p.plan_kernels.clear()
            p.plan_candidate.clear()
            return [
                ev.IterationStarted(
                    **self._env(ev.IterationStarted, p.name, p.iteration, cause=e),
                    problem=p.name,
                    iteration=p.iteration,
                    beam=list(p.beam),
                )
            ]
        p.remeasure = self._start_remeasure(p)
        if p.remeasure is not None:
            p.phase = "remeasure"
            return self._next_remeasure(p, e)
        return self._problem_done(p, e)

    def _forget_left_behind(self, p: ProblemState) -> None:
        """Drop the problem's kernels that are neither its baseline, its best nor in its beam:
        no later decision reads them (a late result for one is ignored, as for any kernel
        already profiled), and keeping every kernel's source would grow without bound."""
        keep = {p.baseline_id, p.best_id, *p.beam}
        for kid in p.kernel_ids:
            if kid not in keep:
                self.kernels.pop(kid, None)
        p.kernel_ids = [k for k in p.kernel_ids if k in keep]
        p.plans_drawn = {k: n for k, n in p.plans_drawn.items() if k in keep}

    def _problem_done(self, p: ProblemState, cause: ev.Event) -> list[ev.Event]:
        p.phase = "done"
        if all(q.phase == "done" for q in self.problems.values()):
            return [
                ev.RunCompleted(
                    **self._env(ev.RunCompleted, cause=cause),
                    reason=self.stopping or "completed",
                    best_kernel_ids={q.name: q.best_id or "" for q in self.problems.values()},
                )
            ]
        return []

    # --- the end-of-problem re-measure (the protocol: accelopt/remeasure.py) ------------------------

    def _start_remeasure(self, p: ProblemState) -> Remeasure | None:
        """The re-measure of baseline and best; None when there is nothing to compare
        (re-measure off, a failed or unmeasured side, or the best is the baseline)."""
        rounds = self.cfg.search.remeasure_rounds
        base, best = self.kernels.get(p.baseline_id), self.kernels.get(p.best_id or "")
        if (
            rounds <= 0
            or base is None
            or best is None
            or not base.passed
            or not best.passed
            or not base.latency_ms
            or not best.latency_ms
            or base.source == best.source
        ):
            return None
        return Remeasure(sides=2, rounds=rounds, seed_base=run_seed_base(self.run_id, p.name))

    def _next_remeasure(self, p: ProblemState, cause: ev.Event) -> list[ev.Event]:
        assert p.remeasure is not None and self.started is not None
        slot = p.remeasure.next_slot()
        if slot is None:
            return self._remeasure_done(p, cause)
        kid = (p.baseline_id, p.best_id or "")[slot.side]
        k = self.kernels[kid]
        req = ev.ProfileRequested(
            **self._env(ev.ProfileRequested, "remeasure", p.name, slot.step, cause=cause),
            # the kernel it times again; a run recorded before kernels were content-addressed
            # gave each re-measure an id of its own
            kernel_id=kid
            if self.started.kernel_ids == "content"
            else ev.derive_event_id(self.run_id, "Kernel", "remeasure", p.name, slot.step),
            problem=p.name,
            device=p.target.device,
            language=k.language,
            source=k.source,
            purpose="remeasure",
            seed_offset=slot.seed_offset,
        )
        p.remeasure_slots[req.event_id] = slot
        return self._request(p, req)

    def _remeasure_profiled(self, e: ev.KernelProfiled) -> list[ev.Event]:
        p, released = self._resolve(e.request_id)
        slot = p.remeasure_slots.get(e.request_id) if p is not None else None
        if p is None or slot is None or p.remeasure is None or p.phase != "remeasure":
            return released
        p.remeasure.record(slot, e.profile)
        return released + self._next_remeasure(p, e)

    def _remeasure_done(self, p: ProblemState, cause: ev.Event) -> list[ev.Event]:
        assert p.remeasure is not None
        base, best = self.kernels[p.baseline_id], self.kernels[p.best_id or ""]
        b, k = p.remeasure.results([base.kernel_id, best.kernel_id])
        c = compare(b, k, (base.latency_ms, best.latency_ms), (base.spread, best.spread))
        done = ev.ProblemRemeasured(
            **self._env(ev.ProblemRemeasured, p.name, cause=cause),
            problem=p.name,
            rounds=p.remeasure.rounds,
            seed_offsets=p.remeasure.seed_offsets,
            baseline=b,
            best=k,
            recorded_speedup=c.recorded_speedup,
            speedup=c.speedup,
            noise=c.noise,
            agrees=c.agrees,
        )
        return [done, *self._problem_done(p, done)]

    def _on_iteration_started(self, e: ev.IterationStarted, out: Step) -> list[ev.Event]:
        p = self.problems[e.problem]
        if e.iteration <= p.started_through:
            return []
        p.started_through = e.iteration
        outs: list[ev.Event] = []
        mem = self.cfg_at(e.iteration).memory
        for cand_id in e.beam:
            cand = self.kernels[cand_id]
            if mem.enabled and mem.top_m > 0:
                result_id = ev.derive_event_id(self.run_id, "MemoryRetrieved", p.name, e.iteration, cand_id)
                p.pending.add(result_id)
                self.request_problem[result_id] = p.name
                d = p.target.problem.definition
                out.effects.append(
                    ev.MemoryRequested(
                        **self._env(ev.MemoryRequested, result_id, cause=e),
                        result_id=result_id,
                        problem=p.name,
                        op_type=d.op_type,
                        device=p.target.device,
                        language=p.target.language,
                        iteration=e.iteration,
                        candidate_id=cand_id,
                        candidate_source=cand.source,
                        memory=msgspec.to_builtins(mem),
                        expect_entry_ids=self._all_memory_ids(),
                    )
                )
            else:
                outs += self._plan_requests(p, e.iteration, cand, [], None, e)
        return outs + self._maybe_advance(p, e)

    def _all_memory_ids(self) -> list[str]:
        return [i for q in self.problems.values() for i in q.memory_ids]

    def _plan_requests(
        self,
        p: ProblemState,
        iteration: int,
        cand: KernelRec,
        insights: list[ev.RetrievedInsight],
        memory_event_id: str | None,
        cause: ev.Event,
    ) -> list[ev.Event]:
        if self.stopping:
            return []
        outs: list[ev.Event] = []
        drawn = p.plans_drawn.get(cand.kernel_id, 0)
        n = self.cfg_at(iteration).search.plans_per_candidate
        p.plans_drawn[cand.kernel_id] = drawn + n
        for j in range(n):
            req = ev.PlanRequested(
                **self._env(ev.PlanRequested, p.name, iteration, cand.kernel_id, j, cause=cause),
                problem=p.name,
                iteration=iteration,
                candidate_id=cand.kernel_id,
                sample_index=drawn + j,
                language=p.target.language,
                device=p.target.device,
                candidate_source=cand.source,
                candidate_profile=cand.profile,
                insights=insights,
                memory_event_id=memory_event_id,
            )
            outs += self._request(p, req)
        return outs

    def _on_memory_retrieved(self, e: ev.MemoryRetrieved, out: Step) -> list[ev.Event]:
        p, _ = self._resolve(e.event_id)
        if p is None or e.candidate_id not in self.kernels:
            return []
        outs = self._plan_requests(
            p, e.iteration, self.kernels[e.candidate_id], list(e.entries), e.event_id, e
        )
        return outs + self._maybe_advance(p, e)

    def _on_plan_proposed(self, e: ev.PlanProposed, out: Step) -> list[ev.Event]:
        p, released = self._resolve(e.request_id)
        if p is None:
            return released
        outs = list(released)
        cand = self.kernels.get(e.candidate_id)
        p.plan_candidate[e.event_id] = e.candidate_id
        p.plan_kernels.setdefault(e.event_id, [])
        if cand is not None and not self.stopping:
            for k in range(self.cfg_at(e.iteration).search.samples_per_plan):
                req = ev.ImplementationRequested(
                    **self._env(ev.ImplementationRequested, e.event_id, k, cause=e),
                    problem=p.name,
                    iteration=e.iteration,
                    candidate_id=e.candidate_id,
                    plan_id=e.event_id,
                    sample_index=k,
                    language=p.target.language,
                    device=p.target.device,
                    plan=e.plan,
                    candidate_source=cand.source,
                )
                outs += self._request(p, req)
        return outs + self._maybe_advance(p, e)

    def _on_proposal_failed(self, e: ev.ProposalFailed, out: Step) -> list[ev.Event]:
        p, released = self._resolve(e.request_id)
        if p is None:
            return released
        return released + self._maybe_advance(p, e)

    def _on_insight_summarized(self, e: ev.InsightSummarized, out: Step) -> list[ev.Event]:
        req = self.requests.get(e.request_id)
        p, released = self._resolve(e.request_id)
        if p is None:
            return released
        outs = list(released)
        if not e.noop and isinstance(req, ev.SummaryRequested):
            entry_id = ev.derive_event_id(self.run_id, "MemoryEntry", self.run_id, e.request_id)
            p.memory_ids.append(entry_id)
            d = p.target.problem.definition
            entry = MemoryEntry(
                id=entry_id,
                source_run=self.run_id,
                problem=p.name,
                op_type=d.op_type,
                device=p.target.device,
                language=p.target.language,
                slow_kernel=req.slow_source,
                fast_kernel=req.fast_source,
                speedup=req.speedup,
                title=e.title,
                created_at=e.ts,
                positive=req.positive,
                text=mark_estimated(e.text) if req.estimated else e.text,
            )
            outs.append(ev.MemoryEntryAdded(**self._env(ev.MemoryEntryAdded, entry_id, cause=e), entry=entry))
        return outs + self._maybe_advance(p, e)

    def _on_llm_call_completed(self, e: ev.LLMCallCompleted, out: Step) -> list[ev.Event]:
        # a role publishes its calls before its result, so a call of a request no longer
        # pending is a copy of one already counted
        if e.request_id not in self.request_problem or not self.spend.count(e):
            return []
        failing = self.health.step(e, self._env, ended=bool(self.failed or self.finished))
        if failing:
            return list(failing)
        outs: list[ev.Event] = list(self.spend.step(e, self._env))
        if outs:  # the run stops spending: no queued LLM request goes out, each problem winds down
            for request in self.lanes.drop_llm():
                self._drop(request)
            for p in self.problems.values():
                outs += self._maybe_advance(p, e)
        return outs

    def _on_run_completed(self, e: ev.RunCompleted, out: Step) -> list[ev.Event]:
        self.finished = True
        return []

    def _on_run_failed(self, e: ev.RunFailed, out: Step) -> list[ev.Event]:
        self.failed = e.reason
        return []

    # --- iteration barrier ----------------------------------------------------------------------

    def _maybe_advance(self, p: ProblemState, cause: ev.Event) -> list[ev.Event]:
        """When nothing of the current iteration is pending, move to its next phase."""
        if p.pending:
            return []
        if p.phase == "search":
            return self._select_and_summarize(p, cause)
        if p.phase == "summarize":
            p.phase = "closing"
            return [self._iteration_completed(p, p.iteration, cause)]
        return []

    def _beam_member(self, kernel_id: str) -> ev.BeamMember:
        k = self.kernels[kernel_id]
        return ev.BeamMember(
            kernel_id=kernel_id,
            latency_ms=k.latency_ms or 0.0,
            peak_fraction=k.profile.peak_fraction if k.profile else None,
            estimated_ms=k.estimated_ms,
        )

    def _plan_samples(self, p: ProblemState) -> dict[str, list[KernelRec]]:
        """This iteration's kernels per plan, fix chains included (only the final attempt of a
        chain can pass, and it counts as a sample of the plan)."""
        return {
            plan: [self.kernels[k] for k in ks if k in self.kernels]
            for plan, ks in sorted(p.plan_kernels.items())
        }

    def _select_and_summarize(self, p: ProblemState, cause: ev.Event) -> list[ev.Event]:
        s = self.cfg_at(p.iteration).search
        samples = self._plan_samples(p)
        beam_now = [self.kernels[k].scored() for k in p.beam]
        new_beam = select_beam(
            beam_now, [[k.scored() for k in ks] for ks in samples.values()], s.beam_width, elitist=s.elitist
        )
        p.beam = [b.kernel_id for b in new_beam]
        best = min(
            (self.kernels[b] for b in p.beam + ([p.best_id] if p.best_id else [])),
            key=lambda k: k.scored().rank_key,
        )
        p.best_id = best.kernel_id
        outs: list[ev.Event] = [
            ev.BeamSelected(
                **self._env(ev.BeamSelected, p.name, p.iteration, cause=cause),
                problem=p.name,
                iteration=p.iteration,
                beam=[self._beam_member(k) for k in p.beam],
                best_kernel_id=p.best_id,
            )
        ]
        p.phase = "summarize"
        if self.stopping:
            return outs + self._maybe_advance(p, cause)
        pairs = self._plan_pairs(p, samples)
        picks = select_summaries(
            pairs,
            positive_threshold=s.summary_positive_threshold,
            negative_threshold=s.summary_negative_threshold,
            max_positive=s.summary_max_positive,
            max_total=s.summary_max_total,
        )
        for pick in picks:
            p.summarized.add(frozenset((pick.slow_id, pick.fast_id)))
            slow, fast = self.kernels[pick.slow_id], self.kernels[pick.fast_id]
            req = ev.SummaryRequested(
                **self._env(
                    ev.SummaryRequested, p.name, p.iteration, pick.slow_id, pick.fast_id, cause=cause
                ),
                problem=p.name,
                iteration=p.iteration,
                slow_kernel_id=pick.slow_id,
                fast_kernel_id=pick.fast_id,
                speedup=pick.speedup,
                positive=pick.positive,
                language=p.target.language,
                device=p.target.device,
                slow_source=slow.source,
                fast_source=fast.source,
                estimated=pick.estimated,
            )
            outs += self._request(p, req)
        return outs + self._maybe_advance(p, cause)

    def _plan_pairs(self, p: ProblemState, samples: dict[str, list[KernelRec]]) -> list[Pair]:
        """The (parent, best child) pair of each plan whose parent has a figure, each pair of
        kernels once per problem (two plans of one candidate that reached one kernel, or a
        kernel reached again later, teach nothing new)."""
        s = self.cfg_at(p.iteration).search
        pairs: list[Pair] = []
        seen = set(p.summarized)
        for plan_id, ks in samples.items():
            parent = self.kernels.get(p.plan_candidate.get(plan_id, ""))
            if parent is None:
                continue
            if parent.passed and parent.latency_ms:
                pair = plan_pair(
                    parent.kernel_id,
                    parent.latency_ms,
                    [k.scored() for k in ks],
                    parent.spread,
                    noise_aware=s.summary_noise_margin,
                )
            elif parent.estimated_ms:  # estimated pairs: a cost model's figures on both sides
                pair = plan_pair(
                    parent.kernel_id,
                    parent.estimated_ms,
                    [k.scored() for k in ks],
                    noise_aware=False,
                    estimated=True,
                )
            else:
                continue
            # two plans of one candidate that reached one kernel make one pair, learnt once
            if pair and frozenset((pair.parent_id, pair.child_id)) not in seen:
                seen.add(frozenset((pair.parent_id, pair.child_id)))
                pairs.append(pair)
        return pairs
