"""What the coordinator's search deciders hold of a run.

A problem moves through its `Phase`s; its kernels are `KernelRec`s. Which kernels a problem
keeps once an iteration is closed is the rule `kept_kernels`: the coordinator decides it and
records it (`IterationCompleted.kept`), readers read the record. `Run` is what the deciders
see of the core that composes them (accelopt/coordinator.py).
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field
from typing import Protocol

from accelopt import catalog as ev
from accelopt.beam_policy import Scored
from accelopt.config import RunConfig
from accelopt.profile import Profile
from accelopt.remeasure import Remeasure, Slot


class Phase(enum.StrEnum):
    """baseline -> (search -> summarize -> closing) per iteration -> remeasure -> done."""

    BASELINE = "baseline"  # the baseline's profile is awaited
    SEARCH = "search"  # an iteration's plans, implementations, fixes and profiles
    SUMMARIZE = "summarize"  # the beam is selected; the iteration's summaries are awaited
    CLOSING = "closing"  # its IterationCompleted is decided; the next iteration or the end follows
    REMEASURE = "remeasure"  # the end-of-problem re-measure of baseline and best
    DONE = "done"


def kept_kernels(baseline_id: str | None, best_id: str | None, beam: list[str]) -> list[str]:
    """The kernels a problem still needs once an iteration is closed, each once, in this
    order: its baseline, its best and its beam. No later decision reads the others."""
    return list(dict.fromkeys(k for k in (baseline_id, best_id, *beam) if k))


@dataclass
class KernelRec:
    kernel_id: str
    problem: str
    iteration: int
    source: str
    language: str
    parent_id: str | None  # the beam candidate this kernel descends from (a fix: its broken kernel's)
    plan_id: str | None
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
    phase: Phase = Phase.BASELINE
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
    kernel_ids: list[str] = field(default_factory=list)  # its kernels still held in Run.kernels
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


@dataclass
class Step:
    """What the core decided on one event: events to publish, and effects for its shell."""

    outputs: list[ev.Event] = field(default_factory=list)
    # retrievals to ask for: published by the shell, answered by the memory worker's
    # MemoryRetrieved of id `result_id` (not decisions: logs from before they existed replay too)
    effects: list[ev.MemoryRequested] = field(default_factory=list)


class Run(Protocol):
    """The core as its deciders see it: the run's state and its pending requests."""

    run_id: str
    started: ev.RunStarted | None
    problems: dict[str, ProblemState]
    kernels: dict[str, KernelRec]
    requests: dict[str, ev.Event]  # pending request id -> the request
    request_problem: dict[str, str]  # pending request id -> its problem

    @property
    def stopping(self) -> str | None: ...

    @property
    def cfg(self) -> RunConfig: ...

    def cfg_at(self, iteration: int) -> RunConfig: ...

    def env(self, kind: type[ev.Event], *key: object, cause: ev.Event | None = None) -> ev.Envelope: ...

    def request(self, problem: ProblemState, request: ev.Event) -> list[ev.Event]: ...

    def resolve(self, request_id: str) -> tuple[ProblemState | None, list[ev.Event]]: ...
