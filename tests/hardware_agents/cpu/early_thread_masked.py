"""Preloaded into a sandbox child before the lockdown: a thread that blocks every signal
pthread_sigmask lets it block (as a driver's helper threads do), then runs what it is asked."""

from __future__ import annotations

import queue
import signal
import threading
from collections.abc import Callable
from typing import Any

requests: queue.Queue[Callable[[], Any]] = queue.Queue()
answers: queue.Queue[Any] = queue.Queue()
started = threading.Event()


def _serve() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    started.set()
    while True:
        answers.put(requests.get()())


threading.Thread(target=_serve, daemon=True, name="masked").start()
started.wait(10)


def ask(fn: Callable[[], Any]) -> Any:
    requests.put(fn)
    return answers.get(timeout=30)
