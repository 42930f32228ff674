"""An agent's death, in the one line a user reads: what died, why, and what to change.

Ray restarts a dead actor (`hosting.ray_host_class`: `max_restarts`) and retries its `run()`,
so a death does not stop a run; before this module, nothing said it happened: the user saw
Ray's raw `(raylet) ...` lines (now kept off the screen: `ray_messages.py`) and, a minute
later, a coordinator that waited "(is a worker for that role/device running?)".

`DeathWatch.check(hosts)` asks Ray's actor table about each agent of a deployment (its
restarts, its state, the cause Ray recorded for a dead one) and says each new death once, as
an `AgentDeath`. A restarted actor keeps no cause in Ray's table, so the cause comes from what
Ray told the driver at the time (`ray_messages`: the memory monitor names the actor it killed;
a worker that died names its pid) and from the kernel's own count of OOM kills
(`/proc/vmstat` `oom_kill`). A death whose cause has not arrived yet waits for it up to
`CAUSE_WAIT_S`, then is said with what is known. The deaths seen in this process are kept
(`recent`) so that a run's coordinator that waits on a device can say why
(`stall_hint`).
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

import msgspec

from actors.runtime import ray_messages


class Hosted(Protocol):
    """What the watch reads of a deployment's agent (`deployment.Hosted`)."""

    name: str
    handle: Any
    spawn: Any  # (role, kwargs, placement, run kwargs) or None


Cause = Literal["memory_monitor", "oom_killer", "killed", "start_failed", "error", "unknown"]
CAUSE_WAIT_S = 3.0  # a restart whose cause has not arrived is said after this long anyway
RECENT_S = 600.0  # how long a death explains a stalled run (`stall_hint`)
_MONITOR = "killed due to the node running low on memory"
_THRESHOLD = re.compile(r"threshold of \d+B \(([\d.]+)% of")


class AgentDeath(msgspec.Struct, frozen=True):
    """One death of one agent's actor, as the driver saw it."""

    agent: str  # the deployment's name for it: profiler-trn1-0, llm, memory, coordinator-<run>
    device: str  # the device kind of a profiler ("" for the others)
    cause: Cause
    detail: str  # Ray's or the kernel's word for it, one line
    restarts: int  # Ray's restarts of the actor so far
    dead: bool  # no restart left: the driver starts it again (`Deployment.revive`)
    ts: float
    threshold_pct: float | None = None  # the memory monitor's kill threshold, where Ray said it

    def what(self) -> str:
        if self.device:
            return f"the {self.device} profiler ({self.agent})"
        if self.agent.startswith("coordinator-"):
            return f"the coordinator of run {self.agent.removeprefix('coordinator-')}"
        return {"llm": "the LLM roles' agent", "memory": "the memory's agent"}.get(
            self.agent, f"the {self.agent} agent"
        )

    def advice(self) -> str:
        if self.device:
            d = self.device
            return (
                f"lower devices.{d}.concurrency (profiles at once per profiler) or devices.{d}.workers "
                f"(profilers), run fewer runs at once (a campaign's devices.{d}.runs_at_once), or give "
                "the host more memory"
            )
        return "run fewer runs or profilers at once on this host, or give it more memory"

    def line(self) -> str:
        """The one line a user reads."""
        who = self.what()
        match self.cause:
            case "memory_monitor":
                above = f" (host memory above {self.threshold_pct:g}%)" if self.threshold_pct else ""
                why = f"{who} was killed by Ray's memory monitor{above}: {self.advice()}"
            case "oom_killer":
                why = f"{who} was killed by the kernel's OOM killer (the host ran out of memory): {self.advice()}"
            case "killed":
                why = f"{who} was killed: its process ended without a word (a SIGKILL such as `kill -9`, or a crash)"
            case "start_failed":
                why = f"{who} could not start: {self.detail}"
            case "error":
                why = f"{who} died: {self.detail}"
            case _:
                why = f"{who} died ({self.detail or 'Ray gave no cause'})"
        if self.dead:
            return f"{why}; Ray's restarts of it are spent (a campaign or `accelopt up` starts it again)"
        return f"{why}; Ray restarted it (restart {self.restarts}), and its work is redelivered"


def _vmstat_oom_kills() -> int:
    try:
        with open("/proc/vmstat") as f:
            for line in f:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _one_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def classify(text: str, oom_kills_rose: bool = False) -> tuple[Cause, str, float | None]:
    """(cause, detail, the memory monitor's threshold in %) of what Ray said of a death."""
    if _MONITOR in text:
        m = _THRESHOLD.search(text)
        return "memory_monitor", _one_line(text.split("\n", 1)[0]), float(m.group(1)) if m else None
    if oom_kills_rose:
        return "oom_killer", "/proc/vmstat oom_kill rose", None
    if "error raised in its creation task" in text:
        return "start_failed", _one_line(text), None
    if "worker process has died" in text or "died or was killed" in text or "exits with a connection" in text:
        return "killed", _one_line(text), None
    if text.strip():
        return "error", _one_line(text), None
    return "unknown", "", None


def cause_phrase(text: str) -> str:
    """What Ray said of a death, as a short phrase (a `revive` names it beside the agent)."""
    cause, detail, pct = classify(text)
    if cause == "memory_monitor":
        return "killed by Ray's memory monitor" + (f" (host memory above {pct:g}%)" if pct else "")
    if cause == "killed":
        return "its process was killed (a SIGKILL such as `kill -9`, or a crash)"
    return detail or "Ray gave no cause"


def _actor_info(actor_id: str) -> dict[str, Any] | None:
    """Ray's actor table row of one actor (None where Ray cannot say)."""
    try:
        from ray._private.state import state

        row = state.actor_table(actor_id)
        return row if isinstance(row, dict) and row else None
    except Exception:
        return None


def _death_cause_text(row: dict[str, Any]) -> str:
    cause = row.get("DeathCause")
    if cause is None:
        return ""
    try:
        which = cause.WhichOneof("context")
        ctx = getattr(cause, which) if which else None
        text = str(getattr(ctx, "error_message", "") or "")
        if which == "oom_context" and _MONITOR not in text:
            text = f"{_MONITOR}: {text}"
        return text or str(cause)
    except Exception:
        return str(cause)


class _Tracked(msgspec.Struct):
    restarts: int = 0
    pid: int = 0
    dead: bool = False
    pending_since: float | None = None  # a death seen, its cause not yet


class DeathWatch:
    """Says each new death of a deployment's agents once (see the module doc)."""

    def __init__(self) -> None:
        self._tracked: dict[str, _Tracked] = {}  # actor id -> what was known of it
        self._since = time.time()  # Ray's messages are read from here on
        self._oom_kills = _vmstat_oom_kills()

    def check(self, hosts: Sequence[Hosted]) -> list[AgentDeath]:
        now = time.time()
        messages = ray_messages.since(self._since - 30.0)
        oom_kills = _vmstat_oom_kills()
        oom_rose = oom_kills > self._oom_kills
        out: list[AgentDeath] = []
        for h in hosts:
            actor_id = _actor_id(h)
            row = _actor_info(actor_id) if actor_id else None
            if row is None:
                continue
            t = self._tracked.setdefault(actor_id, _Tracked())
            restarts = int(row.get("NumRestarts") or 0)
            dead = row.get("State") == "DEAD"
            new = restarts > t.restarts or (dead and not t.dead)
            if new and t.pending_since is None:
                t.pending_since = now
            if t.pending_since is not None:
                text = _death_cause_text(row) if dead else ""
                text = text or _message_about(messages, actor_id, t.pid)
                if text or oom_rose or now - t.pending_since >= CAUSE_WAIT_S:
                    cause, detail, pct = classify(text, oom_rose and not text)
                    out.append(
                        AgentDeath(
                            agent=h.name,
                            device=_device_of(h),
                            cause=cause,
                            detail=detail,
                            restarts=restarts,
                            dead=dead,
                            ts=now,
                            threshold_pct=pct,
                        )
                    )
                    t.pending_since = None
            t.restarts, t.dead = restarts, dead
            if row.get("Pid"):
                t.pid = int(row["Pid"])
        if out:
            self._oom_kills = oom_kills
            _remember(out)
        return out


def _actor_id(h: Hosted) -> str:
    try:
        return str(h.handle._actor_id.hex())
    except Exception:
        return ""


def _device_of(h: Hosted) -> str:
    if h.spawn is None or h.spawn[0] != "profiler":
        return ""
    return str(h.spawn[1].get("device", ""))


def _message_about(messages: list[ray_messages.RayMessage], actor_id: str, pid: int) -> str:
    """The latest of Ray's messages that names the actor (the memory monitor does) or its
    last process (a worker's death does)."""
    for m in reversed(messages):
        if actor_id and actor_id in m.text:
            return m.text
        if pid and re.search(rf"(?:Worker PID: |pid=){pid}\b", m.text):
            return m.text
    return ""


# --- what this process has seen ------------------------------------------------------------------

_recent: deque[AgentDeath] = deque(maxlen=64)
_lock = threading.Lock()


def _remember(deaths: list[AgentDeath]) -> None:
    with _lock:
        _recent.extend(deaths)


def recent(within_s: float = RECENT_S) -> list[AgentDeath]:
    cutoff = time.time() - within_s
    with _lock:
        return [d for d in _recent if d.ts >= cutoff]


def stall_hint(device: str | None) -> str | None:
    """Why work for `device` (None: an LLM role or the memory) may wait: the last death of
    such an agent this process saw lately, as its one line (None: none seen)."""
    for d in reversed(recent()):
        if (device is not None and d.device == device) or (device is None and not d.device):
            return f"{d.line()} (at {time.strftime('%H:%M:%S', time.localtime(d.ts))})"
    return None


def report_deaths(check: Callable[[], list[AgentDeath]], say: Callable[[str], None]) -> None:
    """Say each new death `check` finds; a Ray that cannot be asked (going down) says nothing."""
    try:
        deaths = check()
    except Exception:
        return
    for d in deaths:
        say(d.line())


__all__ = ["AgentDeath", "DeathWatch", "cause_phrase", "classify", "recent", "report_deaths", "stall_hint"]
