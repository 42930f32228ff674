"""The coordinator actor's shell around `accelopt.coordinator.CoordinatorCore`.

It follows the run's events from sequence 1, feeds each to the core, and publishes the
core's decisions once it has caught up with the log (so after a crash it first re-derives
everything already decided and publishes only what is missing). A decision's copy on the
log always follows the event it was decided on, so a decision waiting to be published is
dropped as soon as its copy goes by: what waits is only what the log does not hold yet,
and re-deriving a long history holds no more than the live run did. The core's effects (memory
retrievals, `MemoryRequested`) are published for the memory worker (actors/roles/retriever.py),
which answers with `MemoryRetrieved`: the coordinator itself does no memory I/O and loads
no model. It also watches for stalls: requests that nobody
consumes (e.g. a device with no profiler worker) are reported, not waited on silently.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from accelopt import catalog as ev
from accelopt.coordinator import CoordinatorCore
from accelopt.logging import get_logger
from events.log import EventLog
from events.subjects import run_filter


@dataclass
class CoordinatorReport:
    run_id: str
    finished: bool
    reason: str | None
    decisions: int
    events_seen: int
    warnings: list[str] = field(default_factory=list)


class CoordinatorService:
    def __init__(
        self,
        nats_url: str,
        run_id: str,
        *,
        stall_warn_s: float = 60.0,
        stall_hint: Callable[[str | None], str | None] | None = None,
    ) -> None:
        self.nats_url = nats_url
        # why work for a device (None: an LLM role, the memory) may wait: a death its host saw
        self.stall_hint = stall_hint
        self.run_id = run_id
        self.stall_warn_s = stall_warn_s
        self.core = CoordinatorCore(run_id)
        self.log = get_logger(role="coordinator", run_id=run_id)
        self._stop = False
        self.warnings: list[str] = []

    def stop(self) -> None:
        self._stop = True

    async def run(self) -> CoordinatorReport:
        elog = await EventLog.connect(self.nats_url, name=f"accelopt-coordinator-{self.run_id}")
        outbox: dict[str, ev.Event] = {}  # event id -> a decision not seen on the log yet
        effects: dict[str, ev.MemoryRequested] = {}  # result id -> a retrieval not asked for nor answered yet
        decisions = 0
        seen = 0
        last_progress = time.monotonic()
        try:
            async for _seq, event, pending in elog.follow(run_filter(self.run_id)):
                if self._stop:
                    break
                if event is not None:
                    seen += 1
                    last_progress = time.monotonic()
                    outbox.pop(event.event_id, None)
                    effects.pop(
                        event.result_id if isinstance(event, ev.MemoryRequested) else event.event_id, None
                    )
                    step = self.core.step(event)
                    if isinstance(event, ev.MemoryRetrieved) and event.note:
                        self._warning(event.note)
                    outbox.update((o.event_id, o) for o in step.outputs)
                    effects.update((r.result_id, r) for r in step.effects)
                    decisions += len(step.outputs)
                caught_up = event is None or pending == 0
                if (caught_up or self.core.finished or self.core.failed) and (outbox or effects):
                    await self._flush(elog, list(outbox.values()), list(effects.values()))
                    outbox, effects = {}, {}
                if self.core.finished or self.core.failed:
                    break
                if (
                    event is None
                    and self.core.started
                    and time.monotonic() - last_progress > self.stall_warn_s
                ):
                    self._warn_stall()
                    last_progress = time.monotonic()
        finally:
            await elog.close()
        reason = None
        if self.core.finished:
            reason = self.core.stopping or "completed"
        elif self.core.failed:  # a RunFailed of its own (e.g. the model cannot be reached) ends it too
            reason = f"failed: {self.core.failed}"
        return CoordinatorReport(
            self.run_id, self.core.finished or bool(self.core.failed), reason, decisions, seen, self.warnings
        )

    async def _flush(self, elog: EventLog, outbox: list[ev.Event], effects: list[ev.MemoryRequested]) -> None:
        if outbox:
            await elog.publish_many(outbox)
            if any(isinstance(o, ev.RunCompleted) for o in outbox):
                self.core.finished = True
        if effects:
            await elog.publish_many(effects)

    # --- diagnostics ------------------------------------------------------------------------

    def _warning(self, text: str) -> None:
        self.warnings.append(text)
        self.log.warning(text)

    def _warn_stall(self) -> None:
        waiting: dict[str, int] = {}
        devices: set[str | None] = set()
        for p in self.core.problems.values():
            for rid in p.pending:
                req = self.core.requests.get(rid)
                kind = req.type if req else "MemoryRetrieved"
                if isinstance(req, ev.ProfileRequested):
                    kind = f"ProfileRequested[{req.device}]"
                devices.add(req.device if isinstance(req, ev.ProfileRequested) else None)
                waiting[kind] = waiting.get(kind, 0) + 1
        if waiting:
            what = ", ".join(f"{n} {k}" for k, n in sorted(waiting.items()))
            hints = sorted({h for d in devices if (h := self._hint(d))})
            why = (
                "; ".join(hints)
                if hints
                else "no agent answered them: none serves that role or device, or their work takes longer"
            )
            self._warning(f"no progress for {self.stall_warn_s:.0f}s; waiting on {what}: {why}")

    def _hint(self, device: str | None) -> str | None:
        return self.stall_hint(device) if self.stall_hint is not None else None

    async def close(self) -> None:
        self.stop()
