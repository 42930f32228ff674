"""Preloaded into a sandbox child before the lockdown: starts a thread that blocks every
signal, so it can never be asked to confine itself (the sandbox must refuse to run)."""

from __future__ import annotations

import signal
import threading

started = threading.Event()


def _deaf() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP})
    started.set()
    threading.Event().wait()


threading.Thread(target=_deaf, daemon=True, name="deaf").start()
started.wait(10)
