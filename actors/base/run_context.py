"""Per-run context an agent needs besides its request: the run's `RunStarted` (problems,
config, seed). Fetched once per run from the log (the last message on
`accelopt.<run>.run.started`) and cached."""

from __future__ import annotations

import asyncio

from accelopt.catalog import ProblemTarget, RunStarted
from accelopt.config import ConfigError, RunConfig, recorded_config
from events.log import EventLog


class RunContextError(LookupError):
    pass


class RunContexts:
    def __init__(self, elog: EventLog, *, max_runs: int = 64) -> None:
        self.elog = elog
        self.max_runs = max_runs
        self._cache: dict[str, RunStarted] = {}
        self._settings: dict[str, RunConfig] = {}
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
                    self._settings.pop(self._cache.pop(next(iter(self._cache))).run_id, None)
                self._cache[run_id] = ev
        return self._cache[run_id]

    async def settings(self, run_id: str) -> RunConfig:
        """The run's recorded config, typed (decoded once per run, as the coordinator decodes it)."""
        started = await self.started(run_id)
        cfg = self._settings.get(run_id)
        if cfg is None:
            try:
                cfg = self._settings[run_id] = recorded_config(started.config)
            except ConfigError as e:
                raise RunContextError(f"run {run_id}: {e}") from e
        return cfg

    async def target(self, run_id: str, problem: str) -> ProblemTarget:
        started = await self.started(run_id)
        for t in started.targets:
            if t.problem.name == problem:
                return t
        raise RunContextError(f"run {run_id}: no problem {problem!r} in RunStarted")
