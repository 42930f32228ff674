"""Fold a run's events into a read model: kernels with lineage, profiles, iterations, beams,
LLM usage and cost. Used by `accelopt run` for its results table, by `accelopt runs`,
reports and replay. Pure: events in, state out."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from accelopt.profile import Profile
from events import catalog as ev


@dataclass
class KernelView:
    kernel_id: str
    problem: str
    iteration: int
    parent_id: str | None
    plan_id: str | None
    fix_of: str | None
    fix_round: int
    language: str
    source: str
    profile: Profile | None = None

    @property
    def passed(self) -> bool:
        return self.profile is not None and self.profile.status == "passed"

    @property
    def latency_ms(self) -> float | None:
        return self.profile.latency_ms if self.passed and self.profile else None


@dataclass
class ProblemView:
    name: str
    device: str
    language: str
    baseline_id: str | None = None
    best_id: str | None = None
    iterations: list[ev.IterationCompleted] = field(default_factory=list)
    beams: dict[int, list[str]] = field(default_factory=dict)
    cost_usd: float = 0.0
    note: str = ""


@dataclass
class RoleUsage:
    calls: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0


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


class RunView:
    def __init__(self, run_id: str | None = None) -> None:
        self.run_id = run_id
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
        self.memory_entries: list[ev.MemoryEntryAdded] = []
        self.events = 0
        self.first_ts: float | None = None
        self.last_ts: float | None = None

    @classmethod
    def from_events(cls, events: Iterable[ev.Event], *, until_iteration: int | None = None) -> RunView:
        view = cls()
        for e in events:
            if until_iteration is not None and getattr(e, "iteration", 0) > until_iteration:
                continue
            view.apply(e)
        return view

    def apply(self, e: ev.Event) -> None:
        self.events += 1
        self.run_id = self.run_id or e.run_id
        self.first_ts = e.ts if self.first_ts is None else min(self.first_ts, e.ts)
        self.last_ts = e.ts if self.last_ts is None else max(self.last_ts, e.ts)
        if isinstance(e, ev.RunStarted):
            self.started = e
            for t in e.targets:
                self.problems[t.problem.name] = ProblemView(t.problem.name, t.device, t.language)
        elif isinstance(e, ev.RunCompleted):
            self.completed = e
        elif isinstance(e, ev.RunFailed):
            self.failed = e
        elif isinstance(e, ev.BudgetExceeded):
            self.budget = e
        elif isinstance(e, (ev.PlanRequested, ev.ImplementationRequested, ev.FixRequested, ev.SummaryRequested,
                            ev.ProfileRequested)):
            self.request_problem[e.event_id] = e.problem
        elif isinstance(e, ev.KernelProposed):
            parent, plan = e.parent_id, e.plan_id
            if e.fix_of and e.fix_of in self.kernels:
                broken = self.kernels[e.fix_of]
                parent, plan = broken.parent_id, broken.plan_id
            self.kernels[e.kernel_id] = KernelView(e.kernel_id, e.problem, e.iteration, parent, plan, e.fix_of,
                                                   e.fix_round, e.language, e.source)
            p = self.problems.get(e.problem)
            if p and e.iteration == 0 and p.baseline_id is None and e.parent_id is None:
                p.baseline_id = e.kernel_id
        elif isinstance(e, ev.KernelProfiled):
            k = self.kernels.get(e.kernel_id)
            if k is not None:
                k.profile = e.profile
        elif isinstance(e, ev.BeamSelected):
            p = self.problems.get(e.problem)
            if p:
                p.beams[e.iteration] = [m.kernel_id for m in e.beam]
                p.best_id = e.best_kernel_id
        elif isinstance(e, ev.IterationCompleted):
            p = self.problems.get(e.problem)
            if p:
                p.iterations.append(e)
                p.best_id = e.best_kernel_id or p.best_id
                p.note = e.note or p.note
        elif isinstance(e, ev.LLMCallCompleted):
            u = self.usage.setdefault(e.role, RoleUsage())
            u.calls += 1
            u.failed_calls += e.error is not None
            u.prompt_tokens += e.usage.prompt_tokens
            u.completion_tokens += e.usage.completion_tokens
            u.cost_usd += e.cost_usd
            u.latency_s += e.latency_s
            name = self.request_problem.get(e.request_id)
            if name in self.problems:
                self.problems[name].cost_usd += e.cost_usd
        elif isinstance(e, ev.ProposalFailed):
            self.failures.append(e)
        elif isinstance(e, ev.InsightSummarized):
            self.insights.append(e)
        elif isinstance(e, ev.MemoryEntryAdded):
            self.memory_entries.append(e)

    # --- derived ------------------------------------------------------------------------------

    @property
    def status(self) -> str:
        if self.failed:
            return "failed"
        if self.completed:
            return f"completed ({self.completed.reason})" if self.completed.reason != "completed" else "completed"
        return "running" if self.started else "empty"

    @property
    def cost_usd(self) -> float:
        return sum(u.cost_usd for u in self.usage.values())

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

    def results(self) -> list[ProblemResult]:
        out = []
        for name, p in sorted(self.problems.items()):
            base = self.kernels.get(p.baseline_id or "")
            best = self.kernels.get(p.best_id or "")
            b_ms = base.latency_ms if base else None
            best_ms = best.latency_ms if best else None
            out.append(ProblemResult(
                problem=name, device=p.device, baseline_ms=b_ms, best_ms=best_ms,
                speedup=(b_ms / best_ms) if b_ms and best_ms else None,
                baseline_pct_peak=base.profile.pct_peak if base and base.passed and base.profile else None,
                best_pct_peak=best.profile.pct_peak if best and best.passed and best.profile else None,
                kernels=sum(1 for k in self.kernels.values() if k.problem == name),
                iterations=max((i.iteration for i in p.iterations), default=0),
                cost_usd=p.cost_usd, best_kernel_id=p.best_id, note=p.note,
            ))
        return out
