"""The profiler actor: consumes one device kind's `ProfileRequested` and publishes
`KernelProfiled`. It wraps a hardware agent (compile -> correctness -> timing -> % of peak,
in the agent's sandbox); one kernel at a time per instance, because timing needs the device
to itself (an agent with no device to hold, `concurrent_profiles`, may take
`devices.<kind>.concurrency` at once).

A request whose requester gives up on it (`ProfileCancelled`, an `accelopt mcp` session's
call cancelled or out of time) is stopped: the profiler follows the stream's cancellations,
and the profile running that request has its sandboxed children killed through its own cancel
scope (`hardware_agents/sandbox/cancel.py`: never another request's) and ends at its next
stage at the latest; the request is answered at once with a `timeout` profile of reason
`cancelled` (not cached), and the profiler takes the next. A cancellation that comes before
its request is taken is remembered, and the request answered so without running. Those
published before this profiler started are not seen (a request redelivered after a crash
runs)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections import OrderedDict
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
from hardware_agents.sandbox import CancelScope, WorkCancelled, allow_unisolated


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


CANCELLED_KEPT = 4096  # cancellations remembered for requests not taken yet


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
        self._running: dict[str, CancelScope] = {}  # request id -> the cancel scope of its profile here
        self._cancelled: OrderedDict[str, str] = OrderedDict()  # request id -> reason (bounded)
        self._watcher: asyncio.Task[None] | None = None

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
        last = (await elog.stream_info()).state.last_seq
        self._watcher = asyncio.create_task(self._follow_cancellations(elog, last + 1))

    async def _follow_cancellations(self, elog: EventLog, from_seq: int) -> None:
        try:
            async for _, event, _ in elog.follow(role_filter("ProfileCancelled"), from_seq=from_seq):
                if isinstance(event, ev.ProfileCancelled):
                    self.cancel(event.request_id, event.reason or "its requester gave up on it")
        except Exception as e:  # the profiles go on; given-up ones then finish at their own limit
            self.log.error("following the profile cancellations failed", error=repr(e))

    def cancel(self, request_id: str, reason: str) -> None:
        """Stop the profile of `request_id` if it runs here; else remember it (answered
        without running if it comes)."""
        self._cancelled[request_id] = reason
        while len(self._cancelled) > CANCELLED_KEPT:
            self._cancelled.popitem(last=False)
        scope = self._running.get(request_id)
        if scope is not None:
            killed = scope.cancel(reason)
            self.log.info("profile cancelled", request_id=request_id, children=killed)

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(BaseException):
                await self._watcher
            self._watcher = None
        await super().close()

    async def handle(self, event: ev.Event) -> list[ev.Event]:
        assert isinstance(event, ev.ProfileRequested) and self._contexts and self._agent
        if event.event_id in self._cancelled:
            return [self._result(event, self._cancelled_profile(self._cancelled[event.event_id]))]
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
        scope = self._running[event.event_id] = CancelScope()
        if event.event_id in self._cancelled:  # cancelled while its problem and settings were read
            scope.cancel(self._cancelled[event.event_id])

        def run_profile() -> Profile:
            # the run's own setting, whatever this worker was started with; the profile's
            # children are its scope's, which `cancel` stops
            with allow_unisolated(allowed), scope.entered():
                return agent.profile(
                    target.problem, solution, seeds=seeds_for(event), timeout_s=self.timeout_s
                )

        try:
            profile = await asyncio.to_thread(run_profile)
        except WorkCancelled:
            profile = None
        except Exception:
            if not scope.cancelled:
                raise
            profile = None  # a stage that failed on its killed child: the cancel is the answer
        finally:
            self._running.pop(event.event_id, None)
        if scope.cancelled or profile is None:
            return [self._result(event, self._cancelled_profile(scope.reason or "cancelled"))]
        # the machine's limits (not the kernel's): a retry, elsewhere or later, may do better
        if profile.status not in ("timeout", "sandbox_error", "unchecked"):
            self.cache.put(key, profile)
        return [self._result(event, profile)]

    def _cancelled_profile(self, reason: str) -> Profile:
        return Profile(
            status="timeout",
            device=self.device,
            reason="cancelled",
            log=f"stopped: its requester gave up on it ({reason[:500]}); its sandboxed processes were killed",
        )

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
