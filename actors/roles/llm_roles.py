"""The four LLM roles: planner, executor, fixer, summarizer (see docs/architecture.md).

Each is a `Worker` on its role's durable consumer (durable name = the role; filter = its
request type on every run). For one request it resolves the problem from the run's
`RunStarted` (cached), renders the prompt from `prompts/`, calls the LLM gateway, parses
the reply and returns, in this order:

- one `LLMCallCompleted` per attempt (failed attempts included), then
- the result: `PlanProposed` / `KernelProposed` / `InsightSummarized`, or
- `ProposalFailed(stage, request_id, reason, detail, llm_call_id)`: the reply was unusable
  ("no code block in reply", "empty reply", "truncated": the model hit `max_tokens`, or its
  code block never closes, ...), the call failed after its retries
  ("llm error: <exception type>"), or the prompt could not be built.

Ids are derived from the request, so a redelivered request yields de-duplicated publishes:
result events `derive_event_id(run, "<Type>", request_id)`, LLM calls
`derive_event_id(run, "LLMCallCompleted", request_id, attempt)`. A kernel's id is its
content (`RunStarted.new_kernel_id`: problem, language, source; in a run recorded before
that, `derive_event_id(run, "Kernel", request_id)`). Executor kernels have parent_id = the
candidate; fixer kernels have fix_of = the broken kernel and its lineage (parent_id,
plan_id), which the fix request carries.
"""

from __future__ import annotations

import json
import time
from typing import Any, ClassVar

from accelopt import catalog as ev
from accelopt.config import LLMConfig
from accelopt.problem import Problem
from accelopt.records import ChatMessage
from actors.base.recordings import Recordings
from actors.base.run_context import RunContextError, RunContexts
from actors.base.worker import Worker, WorkerOptions
from actors.llm.gateway import LLMGateway
from actors.llm.parsing import (
    TRUNCATED,
    ReplyParseError,
    extract_code,
    extract_plan,
    parse_insight,
)
from events.log import EventLog, StreamSettings
from events.subjects import role_filter
from hardware_agents.languages import find_language
from prompts import PromptError, render

KERNEL_ROLES = frozenset({"executor", "fixer"})
"""Roles whose reply is a kernel: one cut at `max_tokens` is a `truncated` failure. A cut plan
or insight is kept (its `finish_reason` is recorded): its text is still usable."""


def role_options(role: ev.Role, llm_config: LLMConfig, **overrides: Any) -> WorkerOptions:
    """Default worker options of a role worker: its role's durable, filter and LLM concurrency."""
    r = llm_config.for_role(role)
    base: dict[str, Any] = {
        "durable": role,
        "filter_subject": role_filter(ev.REQUEST_OF_ROLE[role].__name__),
        "concurrency": r.concurrency,
    }
    base.update(overrides)
    return WorkerOptions(**base)


class RoleWorker(Worker):
    """Render -> gateway -> parse -> publish; subclasses define the role's pieces."""

    role: ClassVar[ev.Role]  # each subclass names its role

    def __init__(
        self,
        nats_url: str,
        llm_config: LLMConfig,
        *,
        options: WorkerOptions | None = None,
        gateway: LLMGateway | None = None,
        stream: StreamSettings | None = None,
    ) -> None:
        super().__init__(nats_url, options or role_options(self.role, llm_config), stream=stream)
        self.llm_config = llm_config
        self.gateway = gateway or LLMGateway(llm_config)
        self._contexts: RunContexts | None = None
        self._recordings: Recordings | None = None
        self._run_gateways: dict[str, LLMGateway] = {}  # run LLM settings -> gateway

    async def on_start(self, elog: EventLog) -> None:
        self._contexts = RunContexts(elog)
        self._recordings = Recordings(elog, self._contexts)

    # --- role-specific -----------------------------------------------------------------------

    def messages(self, event: Any, problem: Problem, seed: int) -> list[ChatMessage]:
        raise NotImplementedError

    def sample_index(self, event: Any) -> int:
        return 0

    def result(
        self, event: Any, problem: Problem, call: ev.LLMCallCompleted, started: ev.RunStarted
    ) -> ev.Event:
        """The result event from a successful call; raises ReplyParseError."""
        raise NotImplementedError

    # --- shared --------------------------------------------------------------------------------

    async def handle(self, event: ev.Event) -> list[ev.Event]:
        if type(event) is not ev.REQUEST_OF_ROLE[self.role]:
            return []
        assert self._contexts is not None
        started = await self._contexts.started(event.run_id)  # missing: raise, so the request is retried
        try:
            target = await self._contexts.target(event.run_id, event.problem)  # type: ignore[attr-defined]
        except RunContextError as e:
            return [self.failed(event, "unknown problem", str(e))]
        try:
            messages = self.messages(event, target.problem, started.seed)
        except PromptError as e:
            return [self.failed(event, "prompt error", str(e))]
        recording = await self._recordings.for_run(event.run_id) if self._recordings else None
        gateway = self.gateway_for(started, event.iteration)  # type: ignore[attr-defined]
        calls = await gateway.complete(
            self.role,
            messages,
            run_id=event.run_id,
            request_id=event.event_id,
            sample_index=self.sample_index(event),
            seed=started.seed,
            recording=recording.llm if recording else None,
        )
        last = calls[-1]
        if last.error is not None:
            kind = last.error.split(":", 1)[0]
            return [*calls, self.failed(event, f"llm error: {kind}", last.error, last.event_id)]
        if (
            last.finish_reason == "length" and self.role in KERNEL_ROLES
        ):  # cut at max_tokens: never half a kernel
            limit = last.params.get("max_tokens")
            return [
                *calls,
                self.failed(
                    event,
                    TRUNCATED,
                    f"the reply stopped at the token limit (max_tokens={limit}, "
                    f"{last.usage.completion_tokens} completion tokens); raise "
                    f"llm.{self.role}.max_tokens",
                    last.event_id,
                ),
            ]
        try:
            return [*calls, self.result(event, target.problem, last, started)]
        except ReplyParseError as e:
            return [*calls, self.failed(event, e.reason, e.detail, last.event_id)]

    def gateway_for(self, started: ev.RunStarted, iteration: int) -> LLMGateway:
        """A gateway with the run's own LLM settings, as recorded in its RunStarted.

        Role workers are shared by every run on the log (a fleet's `accelopt worker` hosts serve
        them all), so a run's model, temperature, limits and prices must come from the run,
        not from whatever config the worker was started with; the worker's host supplies only
        the API keys its environment holds. An ablation forked at iteration K keeps its
        parent's LLM settings up to K (`RunStarted.parent_settings_at`, the rule the
        coordinator's search and memory settings follow too), so those calls have the parent's content
        hashes and are served from its recording.
        """
        config = started.config_at(iteration)
        llm = config.get("llm")
        if llm is None:  # a RunStarted without a config (hand-made in tests): the worker's own
            return self.gateway
        key = json.dumps(llm, sort_keys=True, default=str)
        gateway = self._run_gateways.get(key)
        if gateway is None:
            from accelopt.config import recorded_config

            run_llm = recorded_config(config).llm
            gateway = (
                self.gateway
                if run_llm == self.llm_config
                else LLMGateway(run_llm, call_kwargs=self.gateway.call_kwargs)
            )
            self._run_gateways[key] = gateway
        return gateway

    async def give_up(self, event: ev.Event, error: str) -> list[ev.Event]:
        if type(event) is not ev.REQUEST_OF_ROLE[self.role]:
            return []
        return [self.failed(event, "role error", error[-4000:])]

    def envelope(self, event: ev.Event, kind: type[ev.Event]) -> ev.Envelope:
        """The envelope of this role's answer to request `event` (`ev.envelope`)."""
        return ev.envelope(kind, event.run_id, event.event_id, ts=time.time(), cause=event)

    def failed(
        self, event: Any, reason: str, detail: str = "", llm_call_id: str | None = None
    ) -> ev.ProposalFailed:
        return ev.ProposalFailed(
            **self.envelope(event, ev.ProposalFailed),
            stage=ev.STAGE_OF_ROLE[self.role],
            request_id=event.event_id,
            problem=event.problem,
            iteration=event.iteration,
            reason=reason,
            detail=detail[:8000],
            llm_call_id=llm_call_id,
        )

    def kernel(
        self,
        event: Any,
        problem: Problem,
        call: ev.LLMCallCompleted,
        started: ev.RunStarted,
        **lineage: Any,
    ) -> ev.KernelProposed:
        entry = problem.baseline.entry_symbol
        block = extract_code(call.response, entry=entry)
        lang = find_language(event.language)
        source = lang.complete_source(block.code, entry) if lang and lang.complete_source else block.code
        return ev.KernelProposed(
            **self.envelope(event, ev.KernelProposed),
            kernel_id=started.new_kernel_id(event.problem, event.language, source, event.event_id),
            problem=event.problem,
            iteration=event.iteration,
            request_id=event.event_id,
            language=event.language,
            source=source,
            llm_call_id=call.event_id,
            **lineage,
        )


class Planner(RoleWorker):
    role = "planner"

    def messages(self, event: ev.PlanRequested, problem: Problem, seed: int) -> list[ChatMessage]:
        return render(
            "planner",
            event.language,
            problem=problem,
            source=event.candidate_source,
            profile=event.candidate_profile,
            insights=event.insights,
            device=event.device,
            seed=seed,
            request_id=event.event_id,
        )

    def sample_index(self, event: ev.PlanRequested) -> int:
        return event.sample_index

    def result(
        self, event: ev.PlanRequested, problem: Problem, call: ev.LLMCallCompleted, started: ev.RunStarted
    ) -> ev.Event:
        return ev.PlanProposed(
            **self.envelope(event, ev.PlanProposed),
            problem=event.problem,
            iteration=event.iteration,
            candidate_id=event.candidate_id,
            request_id=event.event_id,
            plan=extract_plan(call.response),
            llm_call_id=call.event_id,
        )


class Executor(RoleWorker):
    role = "executor"

    def messages(self, event: ev.ImplementationRequested, problem: Problem, seed: int) -> list[ChatMessage]:
        return render(
            "executor",
            event.language,
            problem=problem,
            source=event.candidate_source,
            plan=event.plan,
            device=event.device,
        )

    def sample_index(self, event: ev.ImplementationRequested) -> int:
        return event.sample_index

    def result(
        self,
        event: ev.ImplementationRequested,
        problem: Problem,
        call: ev.LLMCallCompleted,
        started: ev.RunStarted,
    ) -> ev.Event:
        return self.kernel(event, problem, call, started, parent_id=event.candidate_id, plan_id=event.plan_id)


class Fixer(RoleWorker):
    role = "fixer"

    def messages(self, event: ev.FixRequested, problem: Problem, seed: int) -> list[ChatMessage]:
        return render(
            "fixer",
            event.language,
            problem=problem,
            source=event.source,
            error_log=event.error_log,
            status=event.status,
            parent_source=event.parent_source,
            device=event.device,
        )

    def sample_index(self, event: ev.FixRequested) -> int:
        return event.fix_round

    def result(
        self, event: ev.FixRequested, problem: Problem, call: ev.LLMCallCompleted, started: ev.RunStarted
    ) -> ev.Event:
        return self.kernel(
            event,
            problem,
            call,
            started,
            parent_id=event.parent_id,  # the fix stands in for the broken kernel: its request's lineage
            plan_id=event.plan_id,
            fix_of=event.kernel_id,
            fix_round=event.fix_round,
        )


class Summarizer(RoleWorker):
    role = "summarizer"

    def messages(self, event: ev.SummaryRequested, problem: Problem, seed: int) -> list[ChatMessage]:
        return render(
            "summarizer",
            event.language,
            problem=problem,
            slow_source=event.slow_source,
            fast_source=event.fast_source,
            speedup=event.speedup,
            positive=event.positive,
            estimated=event.estimated,
            device=event.device,
        )

    def result(
        self, event: ev.SummaryRequested, problem: Problem, call: ev.LLMCallCompleted, started: ev.RunStarted
    ) -> ev.Event:
        insight = parse_insight(call.response)
        return ev.InsightSummarized(
            **self.envelope(event, ev.InsightSummarized),
            problem=event.problem,
            iteration=event.iteration,
            request_id=event.event_id,
            title=insight.title,
            text=insight.text,
            noop=insight.noop,
            llm_call_id=call.event_id,
        )


# each LLM role's worker, by the role it declares (one per role of `ev.LLM_ROLE_TABLE`:
# tests/test_layers.py)
ROLE_WORKERS: dict[ev.Role, type[RoleWorker]] = {w.role: w for w in (Planner, Executor, Fixer, Summarizer)}
