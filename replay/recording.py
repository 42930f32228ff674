"""What a recorded run can serve to a new run that repeats its work (ablation, resume on a
recording): LLM replies by content hash, profiles by request (the recorded result of the same
request for the same source) and else by (problem, device, language, source), memory
retrievals by their event id (ids are run-independent, so the same decision or retrieval in
the new run has the same id). Pure: built from the recorded run's events.

A profile is served by its request first because two requests for one source may have been
answered with two profiles (a run that named kernels by request profiled a source proposed
twice twice, the second from the profiler's cache, marked `cached`): the new run's decisions
and prompts must see the profile the recorded ones saw, byte for byte, or an unchanged
ablation pays for LLM calls the recording holds."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from accelopt import catalog as ev


def profile_key(problem: str, device: str, language: str, source: str) -> str:
    h = hashlib.sha256()
    for part in (problem, device, language, source):
        h.update(part.encode())
        h.update(b"\x1f")
    return h.hexdigest()


@dataclass
class Recording:
    run_id: str
    llm: dict[str, ev.LLMCallCompleted] = field(default_factory=dict)
    profiles: dict[str, ev.KernelProfiled] = field(default_factory=dict)  # by profile_key: the first
    by_request: dict[str, tuple[str, ev.KernelProfiled]] = field(default_factory=dict)  # -> (key, result)
    retrievals: dict[str, ev.MemoryRetrieved] = field(default_factory=dict)
    config: dict | None = None

    @classmethod
    def from_events(cls, events: Iterable[ev.Event]) -> Recording:
        rec: Recording | None = None
        requests: dict[str, ev.ProfileRequested] = {}
        for e in events:
            if rec is None:
                rec = cls(e.run_id)
            if isinstance(e, ev.RunStarted):
                rec.config = e.config
            elif isinstance(e, ev.LLMCallCompleted):
                if e.error is None and e.response is not None:
                    rec.llm.setdefault(e.content_hash, e)
            elif isinstance(e, ev.ProfileRequested):
                requests[e.event_id] = e
            elif isinstance(e, ev.KernelProfiled):
                req = requests.get(e.request_id)
                if req is not None and e.profile.status != "timeout":
                    key = profile_key(req.problem, req.device, req.language, req.source)
                    rec.profiles.setdefault(key, e)
                    rec.by_request.setdefault(req.event_id, (key, e))
            elif isinstance(e, ev.MemoryRetrieved):
                rec.retrievals.setdefault(e.event_id, e)
        return rec or cls("")

    def profile_for(self, request: ev.ProfileRequested) -> ev.KernelProfiled | None:
        """The recorded result of this request (same id, same source), else the first recorded
        profile of its source."""
        key = profile_key(request.problem, request.device, request.language, request.source)
        same = self.by_request.get(request.event_id)
        if same is not None and same[0] == key:
            return same[1]
        return self.profiles.get(key)


@dataclass
class ServedCounts:
    llm_calls: int = 0
    llm_served: int = 0
    profiles: int = 0
    profiles_served: int = 0
    remeasures: int = 0  # end-of-problem re-measure profiles: made anew by design, never served


def served_counts(events: Iterable[ev.Event]) -> ServedCounts:
    """How much of a run was served from its parent's recording instead of produced anew.

    A re-measure times the best kernel again on this machine, so it is counted apart from the
    search's profiles (which an unchanged ablation serves in full)."""
    c = ServedCounts()
    remeasure_requests: set[str] = set()
    for e in events:
        if isinstance(e, ev.LLMCallCompleted):
            c.llm_calls += 1
            c.llm_served += e.served_from is not None
        elif isinstance(e, ev.ProfileRequested) and e.purpose == "remeasure":
            remeasure_requests.add(e.event_id)
        elif isinstance(e, ev.KernelProfiled) and e.request_id in remeasure_requests:
            c.remeasures += 1
        elif isinstance(e, ev.KernelProfiled):
            c.profiles += 1
            c.profiles_served += e.served_from is not None
    return c
