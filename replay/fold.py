"""Fold a run's events into a read model: kernels with lineage (parent, plan, fix chain),
profiles, iterations, beams, memory snapshots, LLM usage and cost over time. Used by
`accelopt run` for its results table, by `accelopt runs`, reports and replay. Pure: events
in, state out.

The fold is one pass with a dispatch on the event's exact type (no isinstance chains), so
it keeps up with large logs (see benchmarks/replay_bench.py).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

from accelopt import catalog as ev
from accelopt.config import ConfigError, RunConfig, recorded_config
from accelopt.old_log_facts import OldLogFacts
from accelopt.profile import Profile


@dataclass
class KernelView:
    kernel_id: str
    problem: str
    iteration: int
    parent_id: str | None  # the candidate it was derived from (a fix keeps its broken kernel's)
    plan_id: str | None  # the PlanProposed event it implements (a fix keeps its broken kernel's)
    fix_of: str | None  # the broken kernel this one repairs
    fix_round: int
    language: str
    source: str
    profile: Profile | None = None
    fixed_by: str | None = None  # the kernel proposed to repair this one
    proposed_ts: float = 0.0

    @property
    def passed(self) -> bool:
        return self.profile is not None and self.profile.status == "passed"

    @property
    def latency_ms(self) -> float | None:
        return self.profile.latency_ms if self.passed and self.profile else None

    @property
    def peak_fraction(self) -> float | None:
        return self.profile.peak_fraction if self.passed and self.profile else None

    @property
    def estimated_ms(self) -> float | None:
        """A correct, unmeasured kernel's estimated latency (a cost model's, never measured)."""
        return self.profile.estimated_ms if self.profile is not None else None

    @property
    def estimated_pct_peak(self) -> float | None:
        return (
            self.profile.estimate.peak_fraction
            if self.estimated_ms is not None and self.profile and self.profile.estimate
            else None
        )

    @property
    def status(self) -> str:
        return self.profile.status if self.profile is not None else "pending"


@dataclass
class PlanView:
    plan_id: str
    problem: str
    iteration: int
    candidate_id: str
    text: str
    llm_call_id: str | None = None


@dataclass
class ProblemView:
    name: str
    device: str
    language: str
    baseline_id: str | None = None
    best_id: str | None = None
    iterations: list[ev.IterationCompleted] = field(default_factory=list)
    beams: dict[int, list[str]] = field(default_factory=dict)
    # the kernels the problem kept at each iteration's close, as the coordinator recorded them
    # (IterationCompleted.kept: its baseline, best and beam); a compact view keeps the last
    kept: dict[int, list[str]] = field(default_factory=dict)
    cost_usd: float = 0.0
    note: str = ""
    op_type: str = ""
    kernel_ids: list[str] = field(default_factory=list)  # a compact view keeps only baseline, best and beam
    kernels_seen: int = 0  # kernels proposed (distinct: a kernel's id is its content)
    # the id of every kernel proposed (compact views too: ids only), and how many proposals
    # were of a kernel already proposed: the first proposal owns it (accelopt/coordinator.py)
    proposed: set[str] = field(default_factory=set)
    duplicates: int = 0
    kernels_profiled: int = 0  # kernels with a recorded profile
    # the memory each iteration's candidates were planned with (one MemoryRetrieved per candidate)
    memory: dict[int, list[ev.MemoryRetrieved]] = field(default_factory=dict)
    # the problem's cumulative LLM cost when each iteration completed
    iteration_cost: dict[int, float] = field(default_factory=dict)
    # the end-of-problem interleaved re-measure of baseline and best (None: not made)
    remeasured: ev.ProblemRemeasured | None = None

    def best_per_iteration(self, kernels: dict[str, KernelView]) -> list[IterationPoint]:
        """Per completed iteration: the best kernel's latency, % of peak and speedup over the
        baseline, and the problem's LLM cost so far (`kernels`: the run's)."""
        base = kernels.get(self.baseline_id or "")
        base_ms = base.latency_ms if base is not None else None
        out: dict[int, IterationPoint] = {}
        for it in self.iterations:
            lat = it.best_latency_ms
            out[it.iteration] = IterationPoint(
                it.iteration,
                it.best_kernel_id,
                lat,
                it.best_pct_peak,
                base_ms / lat if base_ms and lat else None,
                self.iteration_cost.get(it.iteration, 0.0),
                it.ts,
            )
        return [out[i] for i in sorted(out)]

    def result(self, kernels: dict[str, KernelView]) -> ProblemResult:
        """The problem's figures: its baseline and best as profiled (or estimated), and the
        run's re-measure of that best where it made one (`kernels`: the run's)."""
        base = kernels.get(self.baseline_id or "")
        best = kernels.get(self.best_id or "")
        b_ms = base.latency_ms if base else None
        best_ms = best.latency_ms if best else None
        rm = (
            self.remeasured
            if self.remeasured is not None and self.remeasured.best.kernel_id == self.best_id
            else None
        )
        return ProblemResult(
            problem=self.name,
            device=self.device,
            baseline_ms=b_ms,
            best_ms=best_ms,
            speedup=(b_ms / best_ms) if b_ms and best_ms else None,
            baseline_pct_peak=base.profile.peak_fraction if base and base.passed and base.profile else None,
            best_pct_peak=best.profile.peak_fraction if best and best.passed and best.profile else None,
            kernels=self.kernels_seen,
            iterations=max((i.iteration for i in self.iterations), default=0),
            cost_usd=self.cost_usd,
            best_kernel_id=self.best_id,
            note=self.note,
            remeasured_speedup=rm.speedup if rm is not None else None,
            remeasure_noise=rm.noise if rm is not None else None,
            remeasure_agrees=rm.agrees if rm is not None else True,
            **_estimated(base, best),
        )


@dataclass
class RoleUsage:
    calls: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class CostPoint(NamedTuple):
    """The run's cumulative LLM spend right after one call."""

    ts: float
    cost_usd: float
    tokens: int
    calls: int


@dataclass
class ProblemResult:
    problem: str
    device: str
    baseline_ms: float | None
    best_ms: float | None
    speedup: float | None
    baseline_pct_peak: float | None
    best_pct_peak: float | None
    kernels: int
    iterations: int
    cost_usd: float
    best_kernel_id: str | None
    note: str = ""
    remeasured_speedup: float | None = None  # interleaved re-measure on fresh seeds, if made
    remeasure_noise: float | None = None  # relative band within which speedups cannot be told apart
    remeasure_agrees: bool = True  # the recorded speedup is within that band of the re-measured one
    # ESTIMATED figures (a cost model's, e.g. NKI in the emulator), never mixed with the measured ones
    est_baseline_ms: float | None = None
    est_best_ms: float | None = None
    est_speedup: float | None = None
    est_baseline_pct_peak: float | None = None
    est_best_pct_peak: float | None = None

    @property
    def reported_speedup(self) -> float | None:
        """The speedup to show: re-measured where the run made one, else the recorded one."""
        return self.remeasured_speedup if self.remeasured_speedup is not None else self.speedup


# the requests the roles and profilers answer: the view keeps which problem each is about
_REQUESTS: tuple[type[ev.Event], ...] = (*ev.ROLE_OF_REQUEST, ev.ProfileRequested)


class RunView:
    """The read model of one run.

    `compact=True` keeps only what a run's summary needs (results, usage, status), for the
    CLI that follows a run for days: the kernels a problem's beam left behind are dropped
    when its next beam is selected; a problem keeps its last beam and completed iteration;
    plans, the cost series, answered requests, failures, insights and retrievals are not
    kept, and memory entries only by id, so its size follows the current iterations, not the
    run's length. Reports, replay and the dashboard fold the full view."""

    # the types of a run's log that add nothing to the view (iterations start in the beam the
    # view already holds; retrievals are read from their answers; the curator's receipts)
    # (each declared with its type: `ignored_by`)
    IGNORED: ClassVar[frozenset[type[ev.Event]]] = ev.skipped_by("fold")

    def __init__(self, run_id: str | None = None, *, compact: bool = False) -> None:
        self.run_id = run_id
        self.compact = compact
        self.started: ev.RunStarted | None = None
        self.completed: ev.RunCompleted | None = None
        self.failed: ev.RunFailed | None = None
        self.budget: ev.BudgetExceeded | None = None
        self.kernels: dict[str, KernelView] = {}
        self.problems: dict[str, ProblemView] = {}
        self.usage: dict[str, RoleUsage] = {}
        self.request_problem: dict[str, str] = {}
        self.failures: list[ev.ProposalFailed] = []
        self.insights: list[ev.InsightSummarized] = []
        self.memory_entries: list[ev.MemoryEntryAdded | ev.AgentMemoryEntryAdded] = []
        self.memory_entry_ids: list[str] = []  # every memory entry the run added (compact views too)
        self.events = 0
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        # additions for reports and replay
        self.plans: dict[str, PlanView] = {}
        self.memory_retrieved: list[ev.MemoryRetrieved] = []
        self.memory_entry_iteration: dict[str, int] = {}  # memory entry id -> iteration it was learnt in
        self.cost_series: list[CostPoint] = []
        self.models: dict[str, int] = {}  # model -> LLM calls
        self.until_iteration: int | None = None
        self._cost = 0.0
        self._tokens = 0
        self._calls = 0
        self._insight_iteration: dict[str, int] = {}
        self._settings: RunConfig | None = None
        # what a log of an older version left out of its events (a fix's lineage, the kernels
        # a problem kept), filled in as they are folded: the handlers read every log's facts
        self._old_log = OldLogFacts()
        # what each event type of a run's log adds to the view (`ev.on` holds each handler to
        # its type); the requests the roles and profilers answer share one, and the types in
        # IGNORED add nothing
        self._dispatch: dict[type[ev.Event], Callable[..., None]] = ev.dispatch_table(
            ev.on(ev.RunStarted, self._on_run_started),
            ev.on(ev.RunCompleted, self._on_run_completed),
            ev.on(ev.RunFailed, self._on_run_failed),
            ev.on(ev.BudgetExceeded, self._on_budget_exceeded),
            *(ev.on(t, self._on_request) for t in _REQUESTS),
            ev.on(ev.KernelProposed, self._on_kernel_proposed),
            ev.on(ev.KernelProfiled, self._on_kernel_profiled),
            ev.on(ev.BeamSelected, self._on_beam_selected),
            ev.on(ev.IterationCompleted, self._on_iteration_completed),
            ev.on(ev.LLMCallCompleted, self._on_llm_call_completed),
            ev.on(ev.ProposalFailed, self._on_proposal_failed),
            ev.on(ev.PlanProposed, self._on_plan_proposed),
            ev.on(ev.InsightSummarized, self._on_insight_summarized),
            ev.on(ev.MemoryEntryAdded, self._on_memory_entry_added),
            ev.on(ev.AgentMemoryEntryAdded, self._on_agent_memory_entry_added),
            ev.on(ev.ProblemRemeasured, self._on_problem_remeasured),
            ev.on(ev.MemoryRetrieved, self._on_memory_retrieved),
        )

    @classmethod
    def from_events(cls, events: Iterable[ev.Event], *, until_iteration: int | None = None) -> RunView:
        """Fold `events`; with `until_iteration`, the state at the end of that iteration.

        Problems advance independently, so "the end of iteration i" is per problem: every
        event that belongs to an iteration after i (requests, kernels, their profiles and LLM
        calls, memory entries learnt later) is left out, as is the run's ending unless nothing
        was left out.
        """
        view = cls()
        # a bulk fold allocates many small objects and makes no reference cycles: pausing the
        # cyclic collector keeps it from re-scanning the growing state (2-3x faster on big logs)
        paused = gc.isenabled()
        gc.disable()
        try:
            if until_iteration is None:
                apply = view.apply
                for e in events:
                    apply(e)
                return view
            view.until_iteration = until_iteration
            cut = IterationCut(until_iteration)
            for e in events:
                if cut.keep(e):
                    view.apply(e)
            return view
        finally:
            if paused:
                gc.enable()

    def apply(self, e: ev.Event) -> None:
        self.events += 1
        if self.run_id is None:
            self.run_id = e.run_id
        ts = e.ts
        if self.first_ts is None:
            self.first_ts = self.last_ts = ts
        elif ts > self.last_ts:  # type: ignore[operator]
            self.last_ts = ts
        elif ts < self.first_ts:
            self.first_ts = ts
        handler = self._dispatch.get(type(e))
        if handler is not None:
            handler(self._old_log.read(e))

    # --- handlers -----------------------------------------------------------------------------

    def _on_run_started(self, e: ev.RunStarted) -> None:
        self.started = e
        self._settings = None
        for t in e.targets:
            self.problems[t.problem.name] = ProblemView(
                t.problem.name, t.device, t.language, op_type=t.problem.definition.op_type
            )

    def _on_run_completed(self, e: ev.RunCompleted) -> None:
        self.completed = e

    def _on_run_failed(self, e: ev.RunFailed) -> None:
        self.failed = e

    def _on_budget_exceeded(self, e: ev.BudgetExceeded) -> None:
        self.budget = e

    def _on_request(self, e: ev.Event) -> None:
        self.request_problem[e.event_id] = e.problem  # type: ignore[attr-defined]

    def _on_kernel_proposed(self, e: ev.KernelProposed) -> None:
        p = self.problems.get(e.problem)
        if self.compact:
            self.request_problem.pop(e.request_id, None)
        if p is not None:
            if e.kernel_id in p.proposed:  # the same source again: the same kernel, its first proposal's
                p.duplicates += 1
                return
            p.proposed.add(e.kernel_id)
        kernels = self.kernels
        broken = kernels.get(e.fix_of) if e.fix_of else None
        if broken is not None:
            broken.fixed_by = e.kernel_id
        kernels[e.kernel_id] = KernelView(
            e.kernel_id,
            e.problem,
            e.iteration,
            e.parent_id,  # its lineage, as its proposal records it (a fix: its broken kernel's)
            e.plan_id,
            e.fix_of,
            e.fix_round,
            e.language,
            e.source,
            None,
            None,
            e.ts,
        )
        if p is not None:
            p.kernel_ids.append(e.kernel_id)
            p.kernels_seen += 1
            if e.iteration == 0 and p.baseline_id is None and e.parent_id is None:
                p.baseline_id = e.kernel_id

    def _on_kernel_profiled(self, e: ev.KernelProfiled) -> None:
        # a kernel's first profile is its profile, as for the coordinator: a re-measure (which
        # names the kernel it times again) or a late copy changes nothing
        k = self.kernels.get(e.kernel_id)
        if k is not None and k.profile is None:
            p = self.problems.get(k.problem)
            if p is not None:
                p.kernels_profiled += 1
            k.profile = e.profile
        if self.compact:
            self.request_problem.pop(e.request_id, None)

    def _on_beam_selected(self, e: ev.BeamSelected) -> None:
        p = self.problems.get(e.problem)
        if p:
            if self.compact:
                p.beams.clear()
            p.beams[e.iteration] = [m.kernel_id for m in e.beam]
            p.best_id = e.best_kernel_id

    def _forget_left_behind(self, p: ProblemView, keep: list[str]) -> None:
        """Compact view: drop the problem's kernels outside what it keeps (`keep`, recorded)."""
        kept = set(keep)
        for kid in p.kernel_ids:
            if kid not in kept:
                self.kernels.pop(kid, None)
        p.kernel_ids = [k for k in p.kernel_ids if k in kept]

    def _on_iteration_completed(self, e: ev.IterationCompleted) -> None:
        p = self.problems.get(e.problem)
        if p:
            if self.compact:  # the last one is what the summary reads
                if not p.iterations or e.iteration >= p.iterations[-1].iteration:
                    p.iterations = [e]
                    if e.kept is not None:
                        p.kept = {e.iteration: list(e.kept)}
                        self._forget_left_behind(p, e.kept)
            else:
                p.iterations.append(e)
                p.iteration_cost[e.iteration] = p.cost_usd
                if e.kept is not None:
                    p.kept[e.iteration] = list(e.kept)
            p.best_id = e.best_kernel_id or p.best_id
            p.note = e.note or p.note

    def _on_llm_call_completed(self, e: ev.LLMCallCompleted) -> None:
        u = self.usage.get(e.role)
        if u is None:
            u = self.usage[e.role] = RoleUsage()
        usage = e.usage
        tokens = usage.prompt_tokens + usage.completion_tokens
        u.calls += 1
        if e.error is not None:
            u.failed_calls += 1
        u.prompt_tokens += usage.prompt_tokens
        u.completion_tokens += usage.completion_tokens
        u.cost_usd += e.cost_usd
        u.latency_s += e.latency_s
        self.models[e.model] = self.models.get(e.model, 0) + 1
        self._cost += e.cost_usd
        self._tokens += tokens
        self._calls += 1
        if not self.compact:
            self.cost_series.append(CostPoint(e.ts, self._cost, self._tokens, self._calls))
        name = self.request_problem.get(e.request_id)
        if name is not None:
            p = self.problems.get(name)
            if p is not None:
                p.cost_usd += e.cost_usd

    def _on_proposal_failed(self, e: ev.ProposalFailed) -> None:
        if self.compact:
            self.request_problem.pop(e.request_id, None)
            return
        self.failures.append(e)

    def _on_plan_proposed(self, e: ev.PlanProposed) -> None:
        if self.compact:
            self.request_problem.pop(e.request_id, None)
            return
        self.plans[e.event_id] = PlanView(
            e.event_id, e.problem, e.iteration, e.candidate_id, e.plan, e.llm_call_id
        )

    def _on_insight_summarized(self, e: ev.InsightSummarized) -> None:
        if self.compact:
            self.request_problem.pop(e.request_id, None)
            return
        self.insights.append(e)
        self._insight_iteration[e.event_id] = e.iteration

    def _on_memory_entry_added(self, e: ev.MemoryEntryAdded) -> None:
        self.memory_entry_ids.append(e.entry.id)
        if self.compact:
            return
        self.memory_entries.append(e)
        it = self._insight_iteration.get(e.causation_id or "")
        if it is not None:
            self.memory_entry_iteration[e.entry.id] = it

    def _on_agent_memory_entry_added(self, e: ev.AgentMemoryEntryAdded) -> None:
        """An agent session's entry (`accelopt mcp`): an entry of the session's, as a run's."""
        self.memory_entry_ids.append(e.entry.id)
        if not self.compact:
            self.memory_entries.append(e)

    def _on_problem_remeasured(self, e: ev.ProblemRemeasured) -> None:
        p = self.problems.get(e.problem)
        if p is not None:
            p.remeasured = e

    def _on_memory_retrieved(self, e: ev.MemoryRetrieved) -> None:
        if self.compact:
            return
        self.memory_retrieved.append(e)
        p = self.problems.get(e.problem)
        if p is not None:
            p.memory.setdefault(e.iteration, []).append(e)

    # --- derived ------------------------------------------------------------------------------

    @property
    def settings(self) -> RunConfig:
        """The run's recorded config, typed (decoded once, as the coordinator decoded it); the
        defaults when there is no RunStarted yet or its config does not decode (a log written
        by another version, or made by hand)."""
        if self._settings is None:
            try:
                self._settings = recorded_config(self.started.config) if self.started else RunConfig()
            except ConfigError:
                self._settings = RunConfig()
        return self._settings

    @property
    def status(self) -> str:
        if self.failed:
            return "failed"
        if self.completed:
            return (
                f"completed ({self.completed.reason})"
                if self.completed.reason != "completed"
                else "completed"
            )
        return "running" if self.started else "empty"

    @property
    def cost_usd(self) -> float:
        return sum(u.cost_usd for u in self.usage.values())

    @property
    def llm_calls(self) -> int:
        return self._calls

    @property
    def tokens(self) -> int:
        return self._tokens

    @property
    def duration_s(self) -> float:
        return (
            (self.last_ts - self.first_ts) if self.first_ts is not None and self.last_ts is not None else 0.0
        )

    def lineage(self, kernel_id: str) -> list[KernelView]:
        """The kernel's ancestors from the baseline down to it (fix attempts included)."""
        chain: list[KernelView] = []
        seen: set[str] = set()
        k = self.kernels.get(kernel_id)
        while k is not None and k.kernel_id not in seen:
            seen.add(k.kernel_id)
            chain.append(k)
            k = self.kernels.get(k.fix_of or k.parent_id or "")
        return list(reversed(chain))

    def plan_text(self, kernel_id: str) -> str | None:
        """The plan the kernel implements (a fix implements its broken kernel's plan)."""
        k = self.kernels.get(kernel_id)
        plan = self.plans.get(k.plan_id) if k is not None and k.plan_id else None
        return plan.text if plan is not None else None

    def fix_chain(self, kernel_id: str) -> list[KernelView]:
        """The kernel and every repair attempt made on it, in order (round 0, 1, ...)."""
        chain: list[KernelView] = []
        k = self.kernels.get(kernel_id)
        while k is not None and len(chain) <= 64:
            chain.append(k)
            k = self.kernels.get(k.fixed_by or "")
        return chain

    def memory_snapshot(self, problem: str, iteration: int) -> MemorySnapshot:
        """What memory iteration `iteration` of `problem` planned with, and what this run had
        learnt into the memory before that iteration (all problems)."""
        p = self.problems.get(problem)
        retrieved = list(p.memory.get(iteration, [])) if p is not None else []
        learnt = [
            m.entry for m in self.memory_entries if self.memory_entry_iteration.get(m.entry.id, 0) < iteration
        ]
        return MemorySnapshot(problem, iteration, retrieved, learnt)

    def best_per_iteration(self, problem: str) -> list[IterationPoint]:
        """Per completed iteration of `problem`: its best (`ProblemView.best_per_iteration`)."""
        p = self.problems.get(problem)
        return p.best_per_iteration(self.kernels) if p is not None else []

    def results(self) -> list[ProblemResult]:
        """Each problem's figures (`ProblemView.result`), by name."""
        return [p.result(self.kernels) for _, p in sorted(self.problems.items())]


def _estimated(base: KernelView | None, best: KernelView | None) -> dict[str, float | None]:
    """The ESTIMATED baseline/best figures of a problem whose kernels were estimated, not timed."""
    b = base.estimated_ms if base is not None else None
    k = best.estimated_ms if best is not None else None
    return {
        "est_baseline_ms": b,
        "est_best_ms": k,
        "est_speedup": b / k if b and k else None,
        "est_baseline_pct_peak": base.estimated_pct_peak if base is not None else None,
        "est_best_pct_peak": best.estimated_pct_peak if best is not None else None,
    }


class IterationPoint(NamedTuple):
    iteration: int
    best_kernel_id: str
    best_latency_ms: float | None
    best_pct_peak: float | None
    speedup: float | None
    cost_usd: float
    ts: float


@dataclass
class MemorySnapshot:
    problem: str
    iteration: int
    retrieved: list[ev.MemoryRetrieved]  # one per beam candidate of the iteration
    learnt: list  # MemoryEntry records this run added before the iteration


class IterationCut:
    """Decides which events belong to the state at the end of iteration `until`.

    An event belongs to an iteration by its own `iteration` field, or through what it is
    about: an LLM call through its request, a profile through its kernel, a memory entry
    through the insight it records. Run-level endings are kept only if nothing was cut.
    """

    _ENDINGS = (ev.RunCompleted, ev.RunFailed, ev.BudgetExceeded, ev.ProblemRemeasured)

    def __init__(self, until: int) -> None:
        self.until = until
        self.iteration_of: dict[str, int] = {}
        self.cut_any = False

    def keep(self, e: ev.Event) -> bool:
        t = type(e)
        it: int | None = getattr(e, "iteration", None)
        if it is not None:
            self.iteration_of[e.event_id] = it
            if t is ev.KernelProposed:  # a kernel belongs to the iteration of its first proposal
                self.iteration_of.setdefault(e.kernel_id, it)  # type: ignore[attr-defined]
        elif t is ev.LLMCallCompleted:
            it = self.iteration_of.get(e.request_id)  # type: ignore[attr-defined]
        elif t is ev.KernelProfiled or t is ev.ProfileRequested:
            it = self.iteration_of.get(e.kernel_id)  # type: ignore[attr-defined]
        elif t is ev.MemoryEntryAdded:
            it = self.iteration_of.get(e.causation_id or "")
        elif t in self._ENDINGS:
            return not self.cut_any
        if it is not None and it > self.until:
            self.cut_any = True
            return False
        return True
