"""SIGTERM ends a driver as Ctrl-C does: it unwinds, quietly.

`ray.init` leaves SIGTERM to the failure handler of Ray's C++ core (abseil's), which prints
`*** SIGTERM received at time=... ***` with a stack dump, twice (once to stderr, once through
Ray's log), and kills the process without running any `finally`: a campaign's lock and
export, a run's directory were left as a crash leaves them. `unwind_on_sigterm()`, called
after `ray.init` on the main thread, puts a Python handler back that raises `Terminated` (a
KeyboardInterrupt, so every place that handles Ctrl-C handles it the same way: the campaign
driver records itself interrupted, `accelopt` exits 143 saying `terminated`); Ray's own
processes are stopped by its atexit hook as the process ends.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType


class Terminated(KeyboardInterrupt):
    """The process got SIGTERM."""


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Terminated()


def unwind_on_sigterm() -> bool:
    """SIGTERM raises `Terminated` from now on (only the main thread can set a handler);
    False where it could not be set."""
    if threading.current_thread() is not threading.main_thread():
        return False
    signal.signal(signal.SIGTERM, _raise)
    return True


__all__ = ["Terminated", "unwind_on_sigterm"]
