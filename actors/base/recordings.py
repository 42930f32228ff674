"""Recordings for runs that repeat a recorded run (ablations; resumes on a recording):
`RunStarted.parent_run` names the run whose LLM replies, profiles and memory retrievals may
be served instead of being produced again. Loaded from the log once per parent and cached."""

from __future__ import annotations

import asyncio

from actors.base.run_context import RunContexts
from events.log import EventLog
from replay.recording import Recording


class Recordings:
    def __init__(self, elog: EventLog, contexts: RunContexts, *, max_runs: int = 8) -> None:
        self.elog = elog
        self.contexts = contexts
        self.max_runs = max_runs
        self._cache: dict[str, Recording] = {}
        self._lock = asyncio.Lock()

    async def for_run(self, run_id: str) -> Recording | None:
        started = await self.contexts.started(run_id)
        parent = started.parent_run
        if not parent:
            return None
        async with self._lock:
            if parent not in self._cache:
                if len(self._cache) >= self.max_runs:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[parent] = Recording.from_events(await self.elog.history(parent))
        return self._cache[parent]
