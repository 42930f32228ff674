"""The memory retriever: answers a run's `MemoryRequested` with `MemoryRetrieved`.

A `Worker` on the durable consumer of one memory (by its URI and table): every memory's
retrievers see every request and answer those of runs that use their memory (the others
are let pass, as the curator does with entries). It lives in the memory curator's process
by default (one index, one embedding model). Per request it
- serves the parent's recorded retrieval when the run is an ablation whose memory settings
  at that iteration are the parent's (so an unchanged ablation retrieves nothing anew);
- otherwise waits until the run's own entries so far are indexed (`memory.index_wait_s`),
  then retrieves with the run's settings, never from its lineage's future: of its own (and
  its parent's) entries only those it has emitted so far are eligible.
A failed retrieval is answered too, empty and with a note, so the run plans without memory
and says why instead of stalling.
"""

from __future__ import annotations

import asyncio
import time

import msgspec

from accelopt import catalog as ev
from accelopt.config import MemoryConfig
from actors.base.recordings import Recordings
from actors.base.worker import WorkerOptions
from actors.roles.curator import MemoryWorker, memory_digest, serves_memory
from events.log import EventLog
from events.subjects import role_filter
from memory_index import query_for


def retriever_options(uri: str, table: str = "memory") -> WorkerOptions:
    return WorkerOptions(
        durable=f"memory-retriever-{memory_digest(uri, table)}",
        filter_subject=role_filter("MemoryRequested"),
        concurrency=8,
        ack_wait_s=60.0,
        heartbeat_s=10.0,
        max_deliver=5,
    )


class MemoryRetriever(MemoryWorker):
    role = "memory-retriever"
    default_options = staticmethod(retriever_options)
    _recordings: Recordings | None = None

    async def on_start(self, elog: EventLog) -> None:
        await super().on_start(elog)
        assert self._contexts is not None
        self._recordings = Recordings(elog, self._contexts)

    async def handle(self, event: ev.Event) -> list[ev.Event]:
        assert isinstance(event, ev.MemoryRequested) and self._contexts and self._recordings
        if not serves_memory(event.memory.get("uri"), self.uri):
            return []  # another memory's run: its own retriever answers
        started = await self._contexts.started(event.run_id)
        recording = await self._recordings.for_run(event.run_id)
        if recording is not None:
            served = recording.retrievals.get(event.result_id)
            if served is not None and (recording.config or {}).get("memory") == event.memory:
                # the recorded answer, in an envelope of this run (its id is the request's result id)
                env = ev.envelope(
                    ev.MemoryRetrieved, event.run_id, ts=time.time(), cause=event, event_id=served.event_id
                )
                return [msgspec.structs.replace(served, **env)]
        m = msgspec.convert(event.memory, MemoryConfig)
        query, entries, notes = "", [], []
        try:
            assert self.index is not None
            if event.expect_entry_ids:
                missing = set(event.expect_entry_ids) - await self.index.wait_for_ids(
                    event.expect_entry_ids, timeout_s=m.index_wait_s
                )
                if missing:
                    notes.append(
                        f"memory: {len(missing)} of this run's entries not indexed after "
                        f"{m.index_wait_s:.0f}s (is the memory curator running?)"
                    )
            query = query_for(
                event.problem, event.op_type, event.device, event.language, event.candidate_source
            )
            lineage = [event.run_id] + ([started.parent_run] if started.parent_run else [])
            entries = await asyncio.to_thread(
                self.index.retrieve,
                query,
                device=event.device,
                language=event.language,
                op_type=event.op_type,
                top_m=m.top_m,
                cross_device_share=m.cross_device_share,
                same_device_only=m.same_device_only,
                exclude_source_runs=lineage,
                allow_ids=list(event.expect_entry_ids),
                speedup_weight=m.rank_speedup_weight,
                recency_weight=m.rank_recency_weight,
            )
        except Exception as e:  # retrieval must not stall the run: it plans without memory, and says so
            notes.append(f"memory retrieval failed for {event.problem}/{event.candidate_id[:8]}: {e!r}")
        return [
            ev.MemoryRetrieved(
                **ev.envelope(
                    ev.MemoryRetrieved, event.run_id, ts=time.time(), cause=event, event_id=event.result_id
                ),
                problem=event.problem,
                iteration=event.iteration,
                candidate_id=event.candidate_id,
                query=query,
                entries=entries,
                note="; ".join(notes),
            )
        ]
