"""The LLM roles' worker: one `RoleWorker` class serves every role of the role table.

A role's worker is a `Worker` on its role's durable consumer (durable name = the role; filter
= its request type on every run). What differs between roles is their row
(`actors/llm/role_table.py`): for one request the worker resolves the problem from the run's
`RunStarted` (cached), renders the prompt from the row's context, calls the LLM gateway, has
the row answer the reply and returns, in this order:

- one `LLMCallCompleted` per attempt (failed attempts included), then
- the row's answer: `PlanProposed` / `KernelProposed` / `InsightSummarized` for the built-in
  roles, or
- `ProposalFailed(stage, request_id, reason, detail, llm_call_id)`: the reply was unusable
  ("no code block in reply", "empty reply", "truncated": the model hit `max_tokens` where the
  row's answer is a kernel, or its code block never closes, ...), the call failed after its
  retries ("llm error: <exception type>"), or the prompt could not be built.

Ids are derived from the request, so a redelivered request yields de-duplicated publishes:
result events `derive_event_id(run, "<Type>", request_id)`, LLM calls
`derive_event_id(run, "LLMCallCompleted", request_id, attempt)`. A kernel's id is its
content (`RunStarted.new_kernel_id`: problem, language, source; in a run recorded before
that, `derive_event_id(run, "Kernel", request_id)`). Executor kernels have parent_id = the
candidate; a fixer's kernel has fix_of = the broken kernel and carries its lineage (the
parent and plan its FixRequested names).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from accelopt import catalog as ev
from accelopt.config import LLMConfig
from accelopt.problem import Problem
from accelopt.records import ChatMessage
from actors.base.recordings import Recordings
from actors.base.run_context import RunContextError, RunContexts
from actors.base.worker import Worker, WorkerOptions
from actors.llm.gateway import LLMGateway
from actors.llm.parsing import TRUNCATED, ReplyParseError
from actors.llm.role_table import ROLE_ROWS, RoleRow, envelope, render
from events.log import EventLog, StreamSettings
from events.subjects import role_filter
from prompts import PromptError


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
    """Render -> gateway -> answer -> publish, by its role's row; each role's class
    (`ROLE_WORKERS`) names its role."""

    role: ClassVar[ev.Role]

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

    @property
    def row(self) -> RoleRow:
        return ROLE_ROWS[self.role]

    def messages(self, event: Any, problem: Problem, seed: int) -> list[ChatMessage]:
        """The prompt of request `event`, rendered from its row's context (PromptError where it
        cannot be built)."""
        return render(self.role, event.language, **self.row.context(event, problem, seed))

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
            sample_index=self.row.sample_index(event),
            seed=started.seed,
            recording=recording.llm if recording else None,
        )
        last = calls[-1]
        if last.error is not None:
            kind = last.error.split(":", 1)[0]
            return [*calls, self.failed(event, f"llm error: {kind}", last.error, last.event_id)]
        if last.finish_reason == "length" and self.row.kernel_reply:  # cut at max_tokens: never half a kernel
            limit = last.params.get("max_tokens")
            return [
                *calls,
                self.failed(
                    event,
                    TRUNCATED,
                    f"the reply stopped at the token limit (max_tokens={limit}, "
                    f"{last.usage.completion_tokens} completion tokens); raise "
                    f"llm.roles.{self.role}.max_tokens",
                    last.event_id,
                ),
            ]
        try:
            return [*calls, self.row.answer(event, target.problem, last, started)]
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

    def failed(
        self, event: Any, reason: str, detail: str = "", llm_call_id: str | None = None
    ) -> ev.ProposalFailed:
        return ev.ProposalFailed(
            **envelope(event, ev.ProposalFailed),
            stage=ev.STAGE_OF_ROLE[self.role],
            request_id=event.event_id,
            problem=event.problem,
            iteration=event.iteration,
            reason=reason,
            detail=detail[:8000],
            llm_call_id=llm_call_id,
        )


def _worker_class(row: RoleRow) -> type[RoleWorker]:
    name = "".join(part.title() for part in row.name.split("_")) + "Worker"
    return type(name, (RoleWorker,), {"role": row.name, "__doc__": f"The {row.name} role's worker."})


# each LLM role's worker, by its role (one per row of `ROLE_ROWS`: tests/test_layers.py)
ROLE_WORKERS: dict[ev.Role, type[RoleWorker]] = {role: _worker_class(row) for role, row in ROLE_ROWS.items()}
