"""Backpressure: how many requests of each lane (an LLM role, a device's profilers) are out at
once. A request over its lane's limit waits in the lane's queue, first in first out, and goes
out when an earlier one of its lane is answered; once the run stops spending (its budget is
spent) the queued LLM requests are dropped instead. Pure: the coordinator asks `admit` for
each request it decides and `release` for each answered one, and publishes what they return."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from accelopt import catalog as ev


def lane_of(request: ev.Event) -> str | None:
    """`llm:<role>` for an LLM role's request, `profile:<device>` for a profile; None: no lane."""
    role = ev.ROLE_OF_REQUEST.get(type(request))
    if role:
        return f"llm:{role}"
    if isinstance(request, ev.ProfileRequested):
        return f"profile:{request.device}"
    return None


@dataclass
class Lanes:
    llm_limit: int  # requests in flight per LLM role
    profile_limit: int  # profiles in flight per device kind
    inflight: dict[str, int] = field(default_factory=dict)
    queued: dict[str, deque[ev.Event]] = field(default_factory=dict)

    def limit(self, lane: str) -> int:
        return self.llm_limit if lane.startswith("llm:") else self.profile_limit

    def admit(self, request: ev.Event) -> bool:
        """True: publish `request` now (it takes a slot); False: it waits in its lane's queue."""
        lane = lane_of(request)
        if lane is None:
            return True
        if self.inflight.get(lane, 0) < self.limit(lane):
            self.inflight[lane] = self.inflight.get(lane, 0) + 1
            return True
        self.queued.setdefault(lane, deque()).append(request)
        return False

    def release(self, answered: ev.Event, *, stopping: bool) -> tuple[list[ev.Event], list[ev.Event]]:
        """`answered` got its result: its slot frees. Returns the queued requests to publish
        now (each takes a slot) and, once the run is `stopping`, the LLM ones dropped instead."""
        lane = lane_of(answered)
        released: list[ev.Event] = []
        dropped: list[ev.Event] = []
        if lane is None:
            return released, dropped
        self.inflight[lane] = max(0, self.inflight.get(lane, 0) - 1)
        q = self.queued.get(lane)
        while q and self.inflight[lane] < self.limit(lane):
            nxt = q.popleft()
            if stopping and lane.startswith("llm:"):
                dropped.append(nxt)
                continue
            self.inflight[lane] += 1
            released.append(nxt)
        return released, dropped

    def drop_llm(self) -> list[ev.Event]:
        """Every queued LLM request, taken out of its queue: the run stops spending."""
        dropped: list[ev.Event] = []
        for lane, q in self.queued.items():
            if lane.startswith("llm:"):
                dropped.extend(q)
                q.clear()
        return dropped
