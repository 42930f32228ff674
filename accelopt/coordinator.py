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

The core composes deciders of one concern each and holds what they share, the run's state
and its pending requests: the search loop (`accelopt.search_loop`, a problem's phases and
iterations) and the kernels' flow (`accelopt.kernel_flow`: proposals, profiles, fixes), the
end-of-problem re-measure (`accelopt.run_remeasure` over the protocol of `accelopt.remeasure`),
lanes and backpressure (`accelopt.lanes`), spend and budget (`accelopt.spend`) and model
health (`accelopt.model_health`).

No Ray, NATS or LanceDB here; time only enters through the `clock` used for `ts`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import ClassVar

from accelopt import catalog as ev
from accelopt.config import RunConfig, recorded_config
from accelopt.kernel_flow import KernelFlow
from accelopt.lanes import Lanes
from accelopt.model_health import ModelHealth
from accelopt.old_log_facts import OldLogFacts
from accelopt.search_loop import SearchLoop
from accelopt.search_state import KernelRec, ProblemState, Step
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


class CoordinatorCore:
    # the types of a run's log that change nothing here: its own decisions applied when they
    # were made (a copy coming back is a no-op), the retrieval it asked for as an effect, and
    # the curator's receipts. With the table (`_handlers`) and what `_handle` takes apart
    # (RunStarted, the requests) they are every type of a run's log (tests/events/test_event_catalog.py)
    # (each declared with its type: `ignored_by`)
    IGNORED: ClassVar[frozenset[type[ev.Event]]] = ev.skipped_by("coordinator")

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
        # what a log of an older version left out of its events (a fix's lineage), filled in
        # as they arrive, so the deciders read every log's facts from its events
        self.old_log = OldLogFacts()
        self.finished = False
        self.failed: str | None = None
        # the deciders of one concern each (lanes, spend and health set from the run's config
        # at RunStarted)
        self.loop = SearchLoop(self)
        self.kernel_flow = KernelFlow(self, self.loop)
        self.lanes = Lanes(0, 0)
        self.spend = Spend(None)
        self.health = ModelHealth(0)
        # what each event type of the run's log does to the core (`ev.on` holds each handler
        # to its type); RunStarted and the requests are handled apart (`_handle`), and the
        # types in IGNORED change nothing here
        self._handlers: dict[type[ev.Event], Callable[..., list[ev.Event]]] = ev.dispatch_table(
            ev.on(ev.KernelProposed, self.kernel_flow.on_kernel_proposed),
            ev.on(ev.KernelProfiled, self.kernel_flow.on_kernel_profiled),
            ev.on(ev.IterationStarted, self.loop.on_iteration_started),
            ev.on(ev.IterationCompleted, self.loop.on_iteration_completed),
            ev.on(ev.MemoryRetrieved, self.loop.on_memory_retrieved),
            ev.on(ev.PlanProposed, self.loop.on_plan_proposed),
            ev.on(ev.ProposalFailed, self.loop.on_proposal_failed),
            ev.on(ev.InsightSummarized, self.loop.on_insight_summarized),
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
        work: deque[ev.Event] = deque([self.old_log.read(event)])
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

    def env(self, kind: type[ev.Event], *key: object, cause: ev.Event | None = None) -> ev.Envelope:
        """The envelope of a decision of this run, on the core's clock (`ev.envelope`)."""
        return ev.envelope(kind, self.run_id, *key, ts=self.clock(), cause=cause)

    # --- the pending requests -------------------------------------------------------------------

    def request(self, problem: ProblemState, request: ev.Event) -> list[ev.Event]:
        """Register a request as pending; publish it now or queue it behind its lane's limit."""
        problem.pending.add(request.event_id)
        self.request_problem[request.event_id] = problem.name
        return [request] if self.lanes.admit(request) else []

    def resolve(self, request_id: str) -> tuple[ProblemState | None, list[ev.Event]]:
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
        return self.kernel_flow.baselines(e)

    def _on_llm_call_completed(self, e: ev.LLMCallCompleted, out: Step) -> list[ev.Event]:
        # a role publishes its calls before its result, so a call of a request no longer
        # pending is a copy of one already counted
        if e.request_id not in self.request_problem or not self.spend.count(e):
            return []
        failing = self.health.step(e, self.env, ended=bool(self.failed or self.finished))
        if failing:
            return list(failing)
        outs: list[ev.Event] = list(self.spend.step(e, self.env))
        if outs:  # the run stops spending: no queued LLM request goes out, each problem winds down
            for request in self.lanes.drop_llm():
                self._drop(request)
            for p in self.problems.values():
                outs += self.loop.maybe_advance(p, e)
        return outs

    def _on_run_completed(self, e: ev.RunCompleted, out: Step) -> list[ev.Event]:
        self.finished = True
        return []

    def _on_run_failed(self, e: ev.RunFailed, out: Step) -> list[ev.Event]:
        self.failed = e.reason
        return []
