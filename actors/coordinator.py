"""The coordinator actor's shell around `accelopt.coordinator.CoordinatorCore`.

It follows the run's events from sequence 1, feeds each to the core, and publishes the
core's decisions once it has caught up with the log (so after a crash it first re-derives
everything already decided and publishes only what is missing). It performs the core's
effects: memory retrieval, after waiting until the curator has indexed the run's own
entries, published as `MemoryRetrieved`. It also watches for stalls: requests that nobody
consumes (e.g. a device with no profiler worker) are reported, not waited on silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass, field

import msgspec

from accelopt.config import RunConfig, config_from_dict
from accelopt.coordinator import CoordinatorCore, RetrieveMemory
from accelopt.logging import get_logger
from events import catalog as ev
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
    def __init__(self, nats_url: str, run_id: str, *, stall_warn_s: float = 60.0,
                 warm_config: dict | None = None) -> None:
        """`warm_config`: the run's config (as in RunStarted), to load the memory index and its
        embedding model at once instead of when RunStarted arrives (the session starts the
        coordinator while the other actors start, so the load overlaps theirs)."""
        self.nats_url = nats_url
        self.run_id = run_id
        self.stall_warn_s = stall_warn_s
        self.core = CoordinatorCore(run_id)
        self.log = get_logger(role="coordinator", run_id=run_id)
        self._stop = False
        self._memory = None
        self._parent_recording = None
        self._warm_task: asyncio.Task | None = None
        self._memory_lock = threading.Lock()
        self._effect_tasks: set[asyncio.Task] = set()
        self.warnings: list[str] = []
        self._warm_config = config_from_dict(warm_config, source="warm_config") if warm_config else None
        self._warmed = self._warm_config is None

    @property
    def is_ready(self) -> bool:
        """With `warm_config`: once the memory model is loaded (the session waits for it)."""
        return self._warmed

    def stop(self) -> None:
        self._stop = True

    async def run(self) -> CoordinatorReport:
        if self._warm_config is not None:
            self._warm_memory(self._warm_config)
        elog = await EventLog.connect(self.nats_url, name=f"accelopt-coordinator-{self.run_id}")
        present: set[str] = set()
        outbox: list[ev.Event] = []
        effects: list[RetrieveMemory] = []
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
                    present.add(event.event_id)
                    step = self.core.step(event)
                    if isinstance(event, ev.RunStarted) and self._warm_task is None and self._memory is None:
                        self._warm_memory(self.core.config)
                    outbox += step.outputs
                    effects += step.effects
                    decisions += len(step.outputs)
                caught_up = event is None or pending == 0
                if (caught_up or self.core.finished or self.core.failed) and (outbox or effects):
                    await self._flush(elog, outbox, effects, present)
                    outbox, effects = [], []
                if self.core.finished or self.core.failed:
                    break
                if event is None and self.core.started and time.monotonic() - last_progress > self.stall_warn_s:
                    self._warn_stall()
                    last_progress = time.monotonic()
        finally:
            for t in list(self._effect_tasks):
                t.cancel()
            await elog.close()
        reason = None
        if self.core.finished:
            reason = self.core.stopping or "completed"
        elif self.core.failed:  # a RunFailed of its own (e.g. the model cannot be reached) ends it too
            reason = f"failed: {self.core.failed}"
        return CoordinatorReport(self.run_id, self.core.finished or bool(self.core.failed), reason, decisions, seen,
                                 self.warnings)

    async def _flush(self, elog: EventLog, outbox: list[ev.Event], effects: list[RetrieveMemory],
                     present: set[str]) -> None:
        if self._warm_task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._warm_task, timeout=300)
            self._warm_task = None
        fresh = [o for o in outbox if o.event_id not in present]
        if fresh:
            await elog.publish_many(fresh)
            if any(isinstance(o, ev.RunCompleted) for o in fresh):
                self.core.finished = True
        for eff in effects:
            if eff.result_id in present:
                continue
            task = asyncio.create_task(self._retrieve(elog, eff))
            self._effect_tasks.add(task)
            task.add_done_callback(self._effect_tasks.discard)

    # --- effects ----------------------------------------------------------------------------

    def _memory_index(self, cfg: RunConfig):
        with self._memory_lock:
            if self._memory is None:
                from memory_index import MemoryIndex, default_uri

                self._memory = MemoryIndex.open(cfg.memory.uri or default_uri(cfg.root),
                                                embedder=cfg.memory.embedding_model)
            return self._memory

    def _warm_memory(self, cfg: RunConfig | None) -> None:
        """Load the memory index and embedding model before the first decisions go out: the
        load is CPU-heavy and would otherwise run while the baselines are being timed."""
        if cfg is None or not cfg.memory.enabled or cfg.memory.top_m <= 0:
            self._warmed = True
            return

        def warm() -> None:
            try:
                _ = self._memory_index(cfg).embedder.model
            except Exception as e:  # retrieval will report it when it is needed
                self.log.warning("memory warm-up failed", error=repr(e))
            finally:
                self._warmed = True

        self._warm_task = asyncio.create_task(asyncio.to_thread(warm))

    async def _recording(self, elog: EventLog):
        started = self.core.started
        if started is None or not started.parent_run:
            return None
        if self._parent_recording is None:
            from replay.recording import Recording

            self._parent_recording = Recording.from_events(await elog.history(started.parent_run))
        return self._parent_recording

    def _may_serve_retrieval(self, iteration: int, recorded_config: dict | None) -> bool:
        """A recorded retrieval stands for a new one if the memory settings that produced it
        are the ones in force now."""
        if recorded_config is None:
            return False
        return recorded_config.get("memory") == self.core.cfg_at(iteration).to_dict()["memory"]

    async def _retrieve(self, elog: EventLog, eff: RetrieveMemory) -> None:
        cfg = self.core.cfg_at(eff.iteration)
        entries: list[ev.RetrievedInsight] = []
        query = ""
        recording = await self._recording(elog)
        served = recording.retrievals.get(eff.result_id) if recording else None
        if served is not None and self._may_serve_retrieval(eff.iteration, recording.config):
            await elog.publish(msgspec.structs.replace(served, run_id=self.run_id, ts=time.time()))
            return
        try:
            from memory_index import query_for

            index = await asyncio.to_thread(self._memory_index, cfg)
            if eff.expect_entry_ids:
                missing = set(eff.expect_entry_ids) - await index.wait_for_ids(
                    eff.expect_entry_ids, timeout_s=cfg.memory.index_wait_s)
                if missing:
                    self._warning(f"memory: {len(missing)} of this run's entries not indexed after "
                                  f"{cfg.memory.index_wait_s:.0f}s (is the memory curator running?)")
            query = query_for(eff.problem, eff.op_type, eff.device, eff.language, eff.candidate_source)
            # never this run's own future: of its lineage's entries (its own, its parent's when it
            # is an ablation), only those it has emitted itself so far
            started = self.core.started
            lineage = [self.run_id] + ([started.parent_run] if started and started.parent_run else [])
            m = cfg.memory
            entries = await asyncio.to_thread(
                index.retrieve, query, device=eff.device, language=eff.language, top_m=m.top_m,
                cross_device_share=m.cross_device_share, same_device_only=m.same_device_only,
                exclude_source_runs=lineage, allow_ids=list(eff.expect_entry_ids),
                speedup_weight=m.rank_speedup_weight, recency_weight=m.rank_recency_weight)
        except Exception as e:  # retrieval must not stall the run: plan without memory, say so
            self._warning(f"memory retrieval failed for {eff.problem}/{eff.candidate_id[:8]}: {e!r}")
        result = ev.MemoryRetrieved(
            event_id=eff.result_id, run_id=self.run_id, ts=time.time(), problem=eff.problem,
            iteration=eff.iteration, candidate_id=eff.candidate_id, query=query, entries=entries,
        )
        await elog.publish(result)

    # --- diagnostics ------------------------------------------------------------------------

    def _warning(self, text: str) -> None:
        self.warnings.append(text)
        self.log.warning(text)

    def _warn_stall(self) -> None:
        waiting: dict[str, int] = {}
        for p in self.core.problems.values():
            for rid in p.pending:
                req = self.core.requests.get(rid)
                kind = req.type if req else "MemoryRetrieved"
                if isinstance(req, ev.ProfileRequested):
                    kind = f"ProfileRequested[{req.device}]"
                waiting[kind] = waiting.get(kind, 0) + 1
        if waiting:
            what = ", ".join(f"{n} {k}" for k, n in sorted(waiting.items()))
            self._warning(f"no progress for {self.stall_warn_s:.0f}s; waiting on {what} "
                          "(is a worker for that role/device running?)")

    async def close(self) -> None:
        self.stop()
        with contextlib.suppress(Exception):
            for t in list(self._effect_tasks):
                t.cancel()

