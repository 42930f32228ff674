"""The profiler actor: consumes one device kind's `ProfileRequested` and publishes
`KernelProfiled`. It wraps a hardware agent (compile -> correctness -> timing -> % of peak,
in the agent's sandbox); one kernel at a time per instance, because timing needs the device
to itself (an agent with no device to hold, `concurrent_profiles`, may take
`devices.<kind>.concurrency` at once)."""

from __future__ import annotations

import asyncio
import hashlib
import time
from concurrent.futures import ThreadPoolExecutor

import msgspec

from accelopt import catalog as ev
from accelopt.problem import Solution, SourceFile
from accelopt.profile import Profile
from actors.base.recordings import Recordings
from actors.base.run_context import RunContexts
from actors.base.worker import Worker, WorkerOptions
from events.log import EventLog
from events.subjects import role_filter
from hardware_agents.base import DEFAULT_SEEDS, HardwareAgent
from hardware_agents.families import get_agent
from hardware_agents.languages import find_language
from hardware_agents.sandbox import allow_unisolated


def kernel_solution(problem: str, kernel_id: str, language: str, source: str, baseline: Solution) -> Solution:
    """A kernel's source as a Solution with the baseline's entry point and build spec."""
    lang = find_language(language)
    path = baseline.spec.entry_point.split("::", 1)[0] or (lang.entry_file if lang else "kernel")
    spec = msgspec.structs.replace(baseline.spec, language=language)
    return Solution(
        name=f"{problem}_{kernel_id[:12]}",
        definition=baseline.definition,
        author="accelopt",
        spec=spec,
        sources=[SourceFile(path=path, content=source)],
    )


def offset_seeds(offset: int) -> tuple[int, ...]:
    """Correctness seeds offset from the defaults (fresh seeds per kernel or round)."""
    return tuple(s + offset for s in DEFAULT_SEEDS)


def solution_for(request: ev.ProfileRequested, baseline: Solution) -> Solution:
    return kernel_solution(request.problem, request.kernel_id, request.language, request.source, baseline)


def seeds_for(request: ev.ProfileRequested) -> tuple[int, ...]:
    return offset_seeds(request.seed_offset)


class ProfileCache:
    """Profiles by (run, problem, device, language, source): an identical kernel proposed again
    (two plans that land on the same variant, a change that undoes another) is not profiled
    twice, so device time goes to new variants and a lucky re-measurement of the same code
    cannot win the beam. Bounded LRU."""

    def __init__(self, max_entries: int = 4096) -> None:
        self.max_entries = max_entries
        self._entries: dict[str, Profile] = {}
        self.hits = 0

    @staticmethod
    def key(run_id: str, problem: str, device: str, language: str, source: str) -> str:
        h = hashlib.sha256()
        for part in (run_id, problem, device, language, source):
            h.update(part.encode())
            h.update(b"\x1f")
        return h.hexdigest()

    def get(self, key: str) -> Profile | None:
        prof = self._entries.pop(key, None)
        if prof is not None:
            self._entries[key] = prof
            self.hits += 1
        return prof

    def put(self, key: str, profile: Profile) -> None:
        self._entries[key] = profile
        while len(self._entries) > self.max_entries:
            self._entries.pop(next(iter(self._entries)))


class Profiler(Worker):
    role = "profiler"

    def __init__(
        self,
        nats_url: str,
        device: str,
        *,
        agent_options: dict | None = None,
        timeout_s: float = 120.0,
        worker_name: str = "",
        options: WorkerOptions | None = None,
    ) -> None:
        super().__init__(
            nats_url,
            options
            or WorkerOptions(
                durable=f"profiler-{device}",
                filter_subject=role_filter("ProfileRequested", device=device),
                concurrency=1,
                ack_wait_s=30.0,
                heartbeat_s=5.0,
                max_deliver=3,
            ),
        )
        self.device = device
        self.agent_options = agent_options or {}
        self.timeout_s = timeout_s
        self.worker_name = worker_name or f"{device}-{id(self):x}"
        self._agent: HardwareAgent | None = None
        self._contexts: RunContexts | None = None
        self.cache = ProfileCache()
        self._recordings: Recordings | None = None

    async def on_start(self, elog: EventLog) -> None:
        self._contexts = RunContexts(elog)
        self._recordings = Recordings(elog, self._contexts)
        self._agent = await asyncio.to_thread(get_agent, self.device, **self.agent_options)
        n = self.options.concurrency
        if n > 1 and not getattr(self._agent, "concurrent_profiles", False):
            self.log.warning("this device times one kernel at a time; profiler concurrency set to 1", asked=n)
            self.options.concurrency = n = 1
        if n > 1:  # profiles run in threads (asyncio.to_thread): one thread per concurrent profile
            asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=n + 2))

    async def handle(self, event: ev.Event) -> list[ev.Event]:
        assert isinstance(event, ev.ProfileRequested) and self._contexts and self._agent
        target = await self._contexts.target(event.run_id, event.problem)
        recording = await self._recordings.for_run(event.run_id) if self._recordings else None
        served = recording.profile_for(event) if recording and event.purpose != "remeasure" else None
        if served is not None:
            return [self._result(event, served.profile, served_from=served.event_id)]
        key = ProfileCache.key(event.run_id, event.problem, self.device, event.language, event.source)
        cached = self.cache.get(key)
        if cached is not None and event.purpose not in ("reverify", "remeasure"):
            return [
                self._result(
                    event, msgspec.structs.replace(cached, counters={**cached.counters, "cached": 1.0})
                )
            ]
        solution = solution_for(event, target.problem.baseline)
        allowed = (await self._contexts.settings(event.run_id)).sandbox.allow_unisolated
        agent = self._agent

        def run_profile() -> Profile:
            with allow_unisolated(allowed):  # the run's own setting, whatever this worker was started with
                return agent.profile(
                    target.problem, solution, seeds=seeds_for(event), timeout_s=self.timeout_s
                )

        profile = await asyncio.to_thread(run_profile)
        # the machine's limits (not the kernel's): a retry, elsewhere or later, may do better
        if profile.status not in ("timeout", "sandbox_error", "unchecked"):
            self.cache.put(key, profile)
        return [self._result(event, profile)]

    async def give_up(self, event: ev.Event, error: str) -> list[ev.Event]:
        if not isinstance(event, ev.ProfileRequested):
            return []
        prof = Profile(status="runtime_error", device=self.device, log=f"profiler failed: {error[-4000:]}")
        return [self._result(event, prof)]

    def _result(
        self, event: ev.ProfileRequested, profile: Profile, served_from: str | None = None
    ) -> ev.KernelProfiled:
        return ev.KernelProfiled(
            **ev.envelope(ev.KernelProfiled, event.run_id, event.event_id, ts=time.time(), cause=event),
            kernel_id=event.kernel_id,
            problem=event.problem,
            device=self.device,
            request_id=event.event_id,
            profile=profile,
            worker=self.worker_name,
            served_from=served_from,
        )
