"""The memory tools: search the optimization memory a run retrieves from (a query text, or a
kernel as a run's planner asks for it) with each hit's provenance, and write a verified pair's
insight into it. The index (LanceDB, the embedding model) is shared by the server's sessions.

Where a search's time goes (benchmarks/mcp_bench.py): embedding the query, the rest is a
few milliseconds. So the memory is kept warm: its one thread (`warm`, when the server starts)
opens the table and loads the embedding model before the first call, every call runs on that
thread, and torch encodes there on one CPU thread: a query is one short sequence, which
torch's intra-op threads do not speed up, and on a host whose cores are busy (a profile in the
judge's worker, another session's kernels) they spin against each other (a query's embedding
measured 10x slower with 2 threads than with 1 on a loaded 2-core host). A hit's provenance is
read for all hits in one query. A query asked again (the same kernel searched by another
session) reuses its embedding: a kernel's query is the costly one (the model's 256 tokens,
~75 ms of one core, where a text's is ~8 ms). So the kernels the server has just shown or
is judging (a problem's baseline from get_problem; a kernel given to profile_kernel, embedded
while the judge compiles it) have their query embedded ahead of need (`prefetch`): the agent's
next step, searching the memory by that kernel, finds it kept. A search says which it was
(`SearchMemoryResult.query_embedding`)."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from accelopt.records import MemoryEntry
from cli.commands.mcp_server.records import MemoryHit, SearchMemoryArgs, SearchMemoryResult

log = logging.getLogger("accelopt.mcp")
T = TypeVar("T")
TORCH_THREADS = 1  # a query's embedding: see the module's doc
QUERY_VECTORS = 1024  # the queries whose embeddings are kept (384 floats each)


class MemoryError_(RuntimeError):
    """The memory cannot answer (it cannot be opened); one line."""


class _Thread:
    """One daemon thread that runs what it is given in order: it holds no server exit (a
    client that leaves while the model loads ends the server at once)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="accelopt-memory", daemon=True).start()

    def _loop(self) -> None:
        fn, done = self._jobs.get()
        try:  # before the first job (every encode of the server runs on this thread)
            import torch

            torch.set_num_threads(TORCH_THREADS)
        except Exception as e:  # the memory still answers, at torch's default
            log.warning("torch threads not set for the memory: %s", e)
        while True:
            if done.set_running_or_notify_cancel():
                try:
                    done.set_result(fn())
                except BaseException as e:
                    done.set_exception(e)
            fn, done = self._jobs.get()

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        done: Future[T] = Future()
        self._jobs.put((fn, done))
        return done


class Memory:
    def __init__(self, uri: str | Path) -> None:
        from memory_index import normalize_uri

        self.uri = normalize_uri(uri)
        self._index = None
        self._lock = threading.Lock()
        self._thread = _Thread()
        self._vectors: OrderedDict[str, Any] = OrderedDict()  # query -> its embedding, least recent first

    async def _on_thread(self, fn: Callable[[], T]) -> T:
        return await asyncio.wrap_future(self._thread.submit(fn))

    def warm(self) -> Future[None]:
        """Open the index and load its embedding model now, on the memory's thread (a failure
        is logged; the first call says it to the agent)."""
        return self._thread.submit(self._warm)

    def _warm(self) -> None:
        try:
            self.index().embedder.encode(["warm-up"])
        except Exception as e:
            log.warning("the memory %s is not warm: %s", self.uri, e)

    def index(self):  # -> memory_index.MemoryIndex (imported lazily: LanceDB, torch)
        with self._lock:
            if self._index is None:
                from memory_index import MemoryIndex, MemoryIndexError

                try:
                    self._index = MemoryIndex.open(self.uri)
                except (MemoryIndexError, OSError, ValueError) as e:
                    raise MemoryError_(f"memory {self.uri}: {e}") from None
            return self._index

    async def search(
        self, args: SearchMemoryArgs, op_type: str | None, problem_name: str | None
    ) -> SearchMemoryResult:
        return await self._on_thread(lambda: self._search(args, op_type, problem_name))

    def prefetch(self, problem_name: str, op_type: str, kernel: str) -> Future[None]:
        """Embed the query a search by `kernel` of this problem makes, on the memory's thread
        behind what is queued there (nothing where it is kept; a failure is logged: the search
        says it again)."""

        def embed() -> None:
            from memory_index import query_for

            query = query_for(problem_name, op_type, None, None, kernel)
            try:
                if query not in self._vectors:
                    self._vector(self.index(), query)
            except Exception as e:
                log.warning("the memory %s did not embed a kernel's query ahead: %s", self.uri, e)

        return self._thread.submit(embed)

    def _search(
        self, args: SearchMemoryArgs, op_type: str | None, problem_name: str | None
    ) -> SearchMemoryResult:
        from memory_index import SearchQuery, query_for

        if args.kernel is not None:
            query = query_for(problem_name or "", op_type or "", None, None, args.kernel)
        else:
            query = args.query or ""
        index = self.index()
        kept = query in self._vectors
        found = index.search(
            self._vector(index, query),
            SearchQuery(top_m=args.top_m, device=args.device, language=args.language, op_type=args.op_type),
        )
        entries: dict[str, MemoryEntry] = index.get_many([r.entry_id for r in found]) if found else {}
        hits = []
        for r in found:
            entry = entries.get(r.entry_id)
            hits.append(
                MemoryHit(
                    entry_id=r.entry_id,
                    score=r.score,
                    problem=r.problem,
                    device=r.device,
                    language=r.language,
                    speedup=r.speedup,
                    title=r.title,
                    text=r.text,
                    diff=r.diff,
                    source_run=entry.source_run if entry else "",
                    created_at=entry.created_at if entry else 0.0,
                    slow_kernel_id=entry.slow_kernel_id if entry else "",
                    fast_kernel_id=entry.fast_kernel_id if entry else "",
                )
            )
        return SearchMemoryResult(
            memory=self.uri, query=query, query_embedding="kept" if kept else "computed", hits=hits
        )

    def _vector(self, index: Any, query: str) -> Any:
        """The query's embedding (on the memory's thread); a query asked before, from the
        last QUERY_VECTORS (the same kernel searched again: a session's baseline, every
        agent's first search on a problem)."""
        vector = self._vectors.pop(query, None)
        if vector is None:
            vector = index.embedder.encode([query])[0]
        self._vectors[query] = vector  # the most recent last
        while len(self._vectors) > QUERY_VECTORS:
            self._vectors.popitem(last=False)
        return vector

    async def add(self, entry: MemoryEntry) -> bool:
        """Write `entry`; False where its id was there already."""
        return await self._on_thread(lambda: self.index().upsert([entry]) > 0)
