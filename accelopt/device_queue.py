"""Who profiles next on a device: the admission decider of the device queue that agent
sessions share (`accelopt mcp`, docs/agents.md "One queue for the device").

Pure: no clock, no I/O. The caller tells it what happened (`submit`, `finish`, `cancel`) and
gets back what to do (`Start` a request, `Refuse` one with a one-line reason); `snapshot`
is the state others read (`campaign status`, the dashboard). Its rules:

- one profile at a time per device slot (timing needs the device to itself);
- fair between sessions: a freed slot goes to the waiting session that started a profile on
  that device least recently (one that never did first, then by arrival): round robin, not
  the oldest request, so a session that queued ten profiles does not hold the next session
  back for ten;
- per-session limits: at most `max_in_flight` profiles running or waiting at once, and a
  budget of `device_s` device-seconds; a request beyond either is refused, and a session
  whose budget ran out while its requests waited has them refused when their turn comes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import msgspec


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """Per-session limits (None: no limit)."""

    max_in_flight: int | None = None  # profiles of one session running or waiting at once
    device_s: float | None = None  # device-seconds one session may use in all


@dataclass(frozen=True)
class Start:
    """Run `request_id` now: its device slot is its."""

    request_id: str
    session: str
    device: str


@dataclass(frozen=True)
class Refuse:
    """`request_id` will not run: `reason`, one line."""

    request_id: str
    session: str
    reason: str


Decision = Start | Refuse


class SessionUse(msgspec.Struct, frozen=True, kw_only=True):
    session: str
    running: int
    waiting: int
    device_s: float  # device-seconds used so far
    refused: int  # requests refused so far (either limit)


class DeviceUse(msgspec.Struct, frozen=True, kw_only=True):
    device: str
    slots: int
    running: list[str]  # the sessions profiling on it now
    waiting: int


class QueueState(msgspec.Struct, frozen=True, kw_only=True):
    """The queue as others read it."""

    limits: Limits
    devices: list[DeviceUse]
    sessions: list[SessionUse]


@dataclass
class _Session:
    device_s: float = 0.0
    refused: int = 0
    running: set[str] = field(default_factory=set)
    waiting: set[str] = field(default_factory=set)


@dataclass
class _Device:
    slots: int
    running: dict[str, str] = field(default_factory=dict)  # request -> session
    waiting: dict[str, deque[str]] = field(default_factory=dict)  # session -> its requests, oldest first
    last_start: dict[str, int] = field(default_factory=dict)  # session -> when it last started one
    starts: int = 0


def _next_session(waiting: dict[str, deque[str]], last_start: dict[str, int]) -> str:
    """Whose turn it is: the waiting session that started one least recently (never: first;
    `waiting` keeps arrival order, which breaks ties)."""
    return min(waiting, key=lambda s: last_start.get(s, -1))


class DeviceQueue:
    def __init__(self, limits: Limits | None = None, *, slots: dict[str, int] | None = None) -> None:
        self.limits = limits or Limits()
        self._slots = dict(slots or {})
        self._devices: dict[str, _Device] = {}
        self._sessions: dict[str, _Session] = {}
        self._where: dict[str, tuple[str, str]] = {}  # request -> (session, device)

    def _device(self, device: str) -> _Device:
        d = self._devices.get(device)
        if d is None:
            d = self._devices[device] = _Device(slots=max(1, self._slots.get(device, 1)))
        return d

    def _over_budget(self, s: _Session) -> bool:
        return self.limits.device_s is not None and s.device_s >= self.limits.device_s

    def _budget_line(self, session: str, s: _Session) -> str:
        return (
            f"session {session} used {s.device_s:.1f} of its {self.limits.device_s:g} device-seconds: "
            "no more profiles for it on this server"
        )

    def submit(self, request_id: str, session: str, device: str) -> list[Decision]:
        """A new request: started at once, queued (no decision), or refused."""
        if request_id in self._where:
            raise ValueError(f"request {request_id!r} is in the queue already")
        s = self._sessions.setdefault(session, _Session())
        if self._over_budget(s):
            s.refused += 1
            return [Refuse(request_id, session, self._budget_line(session, s))]
        cap = self.limits.max_in_flight
        if cap is not None and len(s.running) + len(s.waiting) >= cap:
            s.refused += 1
            return [
                Refuse(
                    request_id,
                    session,
                    f"session {session} is at its limit of {cap} profiles running or waiting: "
                    "wait for one to finish",
                )
            ]
        d = self._device(device)
        self._where[request_id] = (session, device)
        if len(d.running) < d.slots and not d.waiting:
            s.running.add(request_id)
            self._start(d, request_id, session)
            return [Start(request_id, session, device)]
        d.waiting.setdefault(session, deque()).append(request_id)
        s.waiting.add(request_id)
        return []

    def finish(self, request_id: str, device_s: float) -> list[Decision]:
        """A started request is over, having held its slot `device_s` seconds: its session is
        charged, the slot goes to the next in turn."""
        session, device = self._where.pop(request_id)
        s = self._sessions[session]
        s.running.discard(request_id)
        s.device_s += max(0.0, device_s)
        self._device(device).running.pop(request_id, None)
        return self._dispatch(device)

    def cancel(self, request_id: str, device_s: float = 0.0) -> list[Decision]:
        """A request the caller gave up on: taken out of its queue, or (started) finished."""
        where = self._where.get(request_id)
        if where is None:
            return []
        session, device = where
        d = self._device(device)
        if request_id in d.running:
            return self.finish(request_id, device_s)
        del self._where[request_id]
        self._sessions[session].waiting.discard(request_id)
        mine = d.waiting[session]
        mine.remove(request_id)
        if not mine:
            del d.waiting[session]
        return self._dispatch(device)

    @staticmethod
    def _start(d: _Device, request_id: str, session: str) -> None:
        d.running[request_id] = session
        d.last_start[session] = d.starts
        d.starts += 1

    def _dispatch(self, device: str) -> list[Decision]:
        """Fill the device's free slots, one session's turn after another."""
        d = self._device(device)
        out: list[Decision] = []
        while d.waiting and len(d.running) < d.slots:
            session = _next_session(d.waiting, d.last_start)
            s = self._sessions[session]
            mine = d.waiting[session]
            if self._over_budget(s):  # its budget ran out while it waited: all of it refused
                del d.waiting[session]
                for rid in mine:
                    del self._where[rid]
                    s.waiting.discard(rid)
                    s.refused += 1
                    out.append(Refuse(rid, session, self._budget_line(session, s)))
                continue
            rid = mine.popleft()
            if not mine:
                del d.waiting[session]
            s.waiting.discard(rid)
            s.running.add(rid)
            self._start(d, rid, session)
            out.append(Start(rid, session, device))
        return out

    def ahead(self, request_id: str) -> int:
        """How many waiting requests start before this one, turns as they stand (0: it is
        next, or started)."""
        device = self._where[request_id][1]
        d = self._device(device)
        if request_id in d.running:
            return 0
        queues = {k: deque(v) for k, v in d.waiting.items()}
        last = dict(d.last_start)
        n = 0
        while queues:  # the turns of `_dispatch`, played out without the budgets
            who = _next_session(queues, last)
            rid = queues[who].popleft()
            if rid == request_id:
                return n
            if not queues[who]:
                del queues[who]
            last[who] = d.starts + n
            n += 1
        raise AssertionError(f"request {request_id!r} is neither running nor waiting")

    def snapshot(self) -> QueueState:
        return QueueState(
            limits=self.limits,
            devices=[
                DeviceUse(
                    device=name,
                    slots=d.slots,
                    running=sorted(d.running.values()),
                    waiting=sum(len(q) for q in d.waiting.values()),
                )
                for name, d in sorted(self._devices.items())
            ],
            sessions=[
                SessionUse(
                    session=name,
                    running=len(s.running),
                    waiting=len(s.waiting),
                    device_s=round(s.device_s, 3),
                    refused=s.refused,
                )
                for name, s in sorted(self._sessions.items())
            ],
        )


# --- the record its owner writes for others (`campaign status`, the dashboard) ---------------

# in the runs root, one record per server that holds a queue: a file beside the runs' folders
# (as `.pool.json`), not a folder that readers of the root would take for one
QUEUE_GLOB = ".device_queue.*.json"


class QueueRecord(msgspec.Struct, frozen=True, kw_only=True):
    """`<root>/.device_queue.<server>.json`, rewritten on every change of its queue."""

    server: str  # the MCP server's session id
    pid: int  # its process: a record whose process is gone is stale
    updated_at: float
    backends: dict[str, str]  # device -> who profiles for it: the pool of `accelopt up`, or the server
    state: QueueState


def queue_record_path(root: str | Path, server: str) -> Path:
    return Path(root) / QUEUE_GLOB.replace("*", server)
