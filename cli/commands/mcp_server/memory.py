"""The memory tools: search the optimization memory a run retrieves from (a query text, or a
kernel as a run's planner asks for it) with each hit's provenance, and write a verified pair's
insight into it. The index opens lazily (LanceDB, the embedding model) and is shared by the
server's sessions."""

from __future__ import annotations

import threading
from pathlib import Path

from accelopt.records import MemoryEntry
from cli.commands.mcp_server.records import MemoryHit, SearchMemoryArgs, SearchMemoryResult


class MemoryError_(RuntimeError):
    """The memory cannot answer (it cannot be opened); one line."""


class Memory:
    def __init__(self, uri: str | Path) -> None:
        from memory_index import normalize_uri

        self.uri = normalize_uri(uri)
        self._index = None
        self._lock = threading.Lock()

    def index(self):  # -> memory_index.MemoryIndex (imported lazily: LanceDB, torch)
        with self._lock:
            if self._index is None:
                from memory_index import MemoryIndex, MemoryIndexError

                try:
                    self._index = MemoryIndex.open(self.uri)
                except (MemoryIndexError, OSError, ValueError) as e:
                    raise MemoryError_(f"memory {self.uri}: {e}") from None
            return self._index

    def search(
        self, args: SearchMemoryArgs, op_type: str | None, problem_name: str | None
    ) -> SearchMemoryResult:
        """Blocking (call it in a thread)."""
        from memory_index import SearchQuery, query_for

        if args.kernel is not None:
            query = query_for(problem_name or "", op_type or "", None, None, args.kernel)
        else:
            query = args.query or ""
        index = self.index()
        found = index.search(
            query,
            SearchQuery(top_m=args.top_m, device=args.device, language=args.language, op_type=args.op_type),
        )
        hits = []
        for r in found:
            entry: MemoryEntry | None = index.get(r.entry_id)
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
        return SearchMemoryResult(memory=self.uri, query=query, hits=hits)

    def add(self, entry: MemoryEntry) -> bool:
        """Write `entry` (blocking); False where its id was there already."""
        return self.index().upsert([entry]) > 0
