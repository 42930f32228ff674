"""Ray's messages to its driver: off the user's screen, kept for the death watch.

`ray.init(log_to_driver=False)` keeps the workers' output away, but a driver still runs Ray's
error listener (`ray._private.worker.listen_error_messages`), which prints every error the
cluster publishes to the job, with colour codes, on **stdout**: `(raylet) Task _Host.run
failed ...`, `(raylet) A worker died or was killed while executing a task ...`, the memory
monitor's page-long report of the workers it killed. A redirected `accelopt campaign run >
out.txt` got them as raw escape sequences between its own lines, and nothing said what they
meant for the run.

`capture()` hands those messages to this module instead of stdout: each is kept (its text
without colour codes, its time) for `actors/runtime/deaths.py`, which turns an agent's death
into the one line a user reads, and logged at DEBUG (`--log-level DEBUG` shows them). Ray
has no option for it: the listener looks its printer up by name in its module on every
message, and that name is what is replaced (checked by a test with real Ray).
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from typing import Any

import msgspec

from accelopt.logging import get_logger

log = get_logger(component="ray")

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
KEEP = 256  # messages kept (the watch reads them within seconds)


class RayMessage(msgspec.Struct, frozen=True):
    ts: float  # time.time() when it arrived
    text: str  # without colour codes


_messages: deque[RayMessage] = deque(maxlen=KEEP)
_lock = threading.Lock()
_captured = False


def plain(text: str) -> str:
    """`text` without terminal colour codes."""
    return _ANSI.sub("", text)


def _sink(data: dict[str, Any], ignore_prefix: bool = False) -> None:
    """Ray's `print_to_stdstream(data, ignore_prefix)`, kept instead of printed."""
    lines = data.get("lines") or []
    text = plain("\n".join(str(line) for line in lines)).strip()
    if not text:
        return
    with _lock:
        _messages.append(RayMessage(time.time(), text))
    log.debug("ray", source=str(data.get("pid", "")), message=text[:2000])


def capture() -> bool:
    """Ray's driver messages kept here from now on (idempotent); False where this Ray has no
    such printer (another version: its messages then print as Ray prints them)."""
    global _captured
    import ray._private.worker as ray_worker

    if _captured:
        return True
    if not callable(getattr(ray_worker, "print_to_stdstream", None)):
        return False
    ray_worker.print_to_stdstream = _sink
    _captured = True
    return True


def since(ts: float) -> list[RayMessage]:
    """The messages that arrived at or after `ts` (time.time())."""
    with _lock:
        return [m for m in _messages if m.ts >= ts]


__all__ = ["RayMessage", "capture", "plain", "since"]
