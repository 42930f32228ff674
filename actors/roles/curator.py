"""The memory curator: projects `MemoryEntryAdded` events into the LanceDB memory, and says
so with a `MemoryIndexed` event per committed entry.

A `Worker` on one durable pull consumer over every run's `MemoryEntryAdded` subject.
Concurrent deliveries are gathered into micro-batches (one embedding call and one LanceDB
commit per batch); each delivery is acked only after its batch is committed, so a crash
loses nothing (JetStream redelivers) and a redelivery writes nothing twice (the upsert is
idempotent by entry id). Several curators, in one fleet or in fleets with their own NATS,
may write the same memory URI: LanceDB commits are optimistic and conflicts are retried.

The durable consumer's name is derived from the memory URI and table by default, so
pointing a curator at a new memory makes it project the whole log into it from the start.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from accelopt.catalog import Event, MemoryEntryAdded, MemoryIndexed, envelope
from accelopt.records import MemoryEntry
from actors.base.run_context import RunContextError, RunContexts
from actors.base.worker import Worker, WorkerOptions
from events.log import EventLog, StreamSettings
from events.subjects import role_filter
from memory_index import Embedder, MemoryIndex, normalize_uri


def memory_digest(uri: str, table: str = "memory") -> str:
    """A short stable name of one memory (its normalized URI and table), for durable names."""
    return hashlib.sha256(f"{normalize_uri(uri)}\x1f{table}".encode()).hexdigest()[:12]


def serves_memory(config_memory_uri: str | None, uri: str) -> bool:
    """Whether a run whose config names `config_memory_uri` uses the memory at `uri` (a run
    that names none goes to every memory worker)."""
    return config_memory_uri is None or normalize_uri(config_memory_uri) == normalize_uri(uri)


def curator_durable(uri: str, table: str = "memory") -> str:
    """The durable consumer name of the curators writing `table` at `uri`."""
    return f"memory-curator-{memory_digest(uri, table)}"


def curator_options(uri: str, table: str = "memory", **overrides: Any) -> WorkerOptions:
    base = WorkerOptions(
        durable=curator_durable(uri, table),
        filter_subject=role_filter("MemoryEntryAdded"),
        concurrency=64,  # deliveries in flight: the batcher turns them into few commits
        ack_wait_s=60.0,
        heartbeat_s=10.0,
        max_deliver=10,
        retry_delay_s=1.0,
    )
    return dataclasses.replace(base, **overrides)


class MicroBatcher:
    """Collects items from concurrent callers and flushes them together.

    `await add(item)` returns once the batch holding `item` was flushed (or raises the
    flush's error). A batch goes out when it has `max_items` or `window_s` after its
    first item; flushes run one at a time.
    """

    def __init__(
        self, flush: Callable[[list[Any]], Awaitable[None]], *, max_items: int = 64, window_s: float = 0.05
    ) -> None:
        self._flush = flush
        self.max_items = max_items
        self.window_s = window_s
        self._pending: list[tuple[Any, asyncio.Future[None]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    async def add(self, item: Any) -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._pending.append((item, fut))
        if len(self._pending) >= self.max_items:
            self._kick()
        elif self._timer is None:
            self._timer = loop.call_later(self.window_s, self._kick)
        await fut

    def _kick(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if batch:
            task = asyncio.get_running_loop().create_task(self._run(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: list[tuple[Any, asyncio.Future[None]]]) -> None:
        async with self._lock:
            try:
                await self._flush([item for item, _ in batch])
            except Exception as e:
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(e)
                return
            for _, fut in batch:
                if not fut.done():
                    fut.set_result(None)


class MemoryWorker(Worker):
    """A worker on one memory table (the curator writes it, the retriever reads it): the
    index opens, and its embedding model loads, when the worker starts."""

    @staticmethod
    def default_options(uri: str, table: str) -> WorkerOptions:
        raise NotImplementedError

    def __init__(
        self,
        nats_url: str,
        uri: str,
        *,
        table: str = "memory",
        embedder: Embedder | str | None = None,
        storage_options: dict[str, str] | None = None,
        options: WorkerOptions | None = None,
        stream: StreamSettings | None = None,
    ) -> None:
        super().__init__(nats_url, options or self.default_options(uri, table), stream=stream)
        self.uri = uri
        self.table = table
        self._embedder = embedder
        self._storage_options = storage_options
        self.index: MemoryIndex | None = None
        self._contexts: RunContexts | None = None

    async def on_start(self, elog: EventLog) -> None:
        self._contexts = RunContexts(elog)
        self.index = await asyncio.to_thread(
            MemoryIndex.open,
            self.uri,
            embedder=self._embedder,
            table=self.table,
            storage_options=self._storage_options,
        )
        # Load the model now rather than inside the first delivery's ack window.
        await asyncio.to_thread(lambda: self.index.embedder.model if self.index else None)


class MemoryCurator(MemoryWorker):
    """Keeps the memory table equal to the log's MemoryEntryAdded events."""

    role = "memory-curator"
    default_options = staticmethod(curator_options)

    def __init__(
        self,
        nats_url: str,
        uri: str,
        *,
        table: str = "memory",
        embedder: Embedder | str | None = None,
        storage_options: dict[str, str] | None = None,
        options: WorkerOptions | None = None,
        stream: StreamSettings | None = None,
        batch_max: int = 64,
        batch_window_s: float = 0.05,
        maintain_every_rows: int = 1000,
    ) -> None:
        super().__init__(
            nats_url,
            uri,
            table=table,
            embedder=embedder,
            storage_options=storage_options,
            options=options,
            stream=stream,
        )
        self.written = 0
        self.batches = 0
        self.maintain_every_rows = maintain_every_rows
        self._since_maintain = 0
        self._batcher = MicroBatcher(self._flush, max_items=batch_max, window_s=batch_window_s)

    async def handle(self, event: Event) -> list[Event]:
        if isinstance(event, MemoryEntryAdded) and await self._writes_here(event.run_id):
            await self._batcher.add(event.entry)
            # said on the log once committed (an id derived from the entry: a redelivery says it once)
            return [
                MemoryIndexed(
                    **envelope(MemoryIndexed, event.run_id, event.entry.id, ts=time.time(), cause=event),
                    entry_id=event.entry.id,
                )
            ]
        return []

    async def _writes_here(self, run_id: str) -> bool:
        """Whether the run's memory is this curator's (runs on one log may use different
        memories). A run whose RunStarted names no URI, or has none, goes to every curator."""
        if self._contexts is None:
            return True
        try:
            settings = await self._contexts.settings(run_id)
        except RunContextError:
            return True
        return serves_memory(settings.memory.uri, self.uri)

    async def _flush(self, entries: list[MemoryEntry]) -> None:
        assert self.index is not None
        written = await asyncio.to_thread(self.index.upsert, entries)
        self.written += written
        self.batches += 1
        self._since_maintain += written
        if self.maintain_every_rows and self._since_maintain >= self.maintain_every_rows:
            self._since_maintain = 0
            await self._maintain()

    async def _maintain(self) -> None:
        """Compact the one-fragment-per-commit files, build the vector index once the memory
        is large, fold new rows into the indices (best effort)."""
        assert self.index is not None
        try:
            done = await asyncio.to_thread(self.index.maintain)
            self.log.info("memory maintained", **done)
        except Exception as e:  # a concurrent writer's commit won: try again next time
            self.log.warning("memory maintenance skipped", error=str(e))

    def summary(self) -> dict[str, Any]:
        return {
            **dataclasses.asdict(self.stats),
            "written": self.written,
            "batches": self.batches,
            "durable": self.options.durable,
            "uri": self.uri,
            "table": self.table,
        }
