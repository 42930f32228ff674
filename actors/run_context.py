"""Per-run context an agent needs besides its request: the run's `RunStarted` (problems,
config, seed). Fetched once per run from the log (the last message on
`accelopt.<run>.run.started`) and cached."""

from __future__ import annotations

import asyncio

from accelopt.catalog import ProblemTarget, RunStarted
from events.log import EventLog


class RunContextError(LookupError):
    pass


class RunContexts:
    def __init__(self, elog: EventLog, *, max_runs: int = 64) -> None:
        self.elog = elog
        self.max_runs = max_runs
        self._cache: dict[str, RunStarted] = {}
        self._lock = asyncio.Lock()

    async def started(self, run_id: str) -> RunStarted:
        if run_id in self._cache:
            return self._cache[run_id]
        async with self._lock:
            if run_id not in self._cache:
                ev = await self.elog.last_event(run_id, "run.started")
                if not isinstance(ev, RunStarted):
                    raise RunContextError(f"run {run_id}: no RunStarted on the log")
                if len(self._cache) >= self.max_runs:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[run_id] = ev
        return self._cache[run_id]

    async def target(self, run_id: str, problem: str) -> ProblemTarget:
        started = await self.started(run_id)
        for t in started.targets:
            if t.problem.name == problem:
                return t
        raise RunContextError(f"run {run_id}: no problem {problem!r} in RunStarted")
