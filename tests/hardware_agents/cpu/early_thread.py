"""Preloaded into a sandbox child (before the privilege drop and the lockdown, as a CUDA
driver's threads are by the Triton warm-up): starts a thread that waits, then runs what a
target asks of it (test_cpu_sandbox.py's test of threads started before the lockdown)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

requests: queue.Queue[Callable[[], Any]] = queue.Queue()
answers: queue.Queue[Any] = queue.Queue()
native_id: list[int] = []


def _serve() -> None:
    native_id.append(threading.get_native_id())
    while True:
        answers.put(requests.get()())


threading.Thread(target=_serve, daemon=True, name="early").start()
while not native_id:
    pass


def ask(fn: Callable[[], Any]) -> Any:
    """`fn()` run on the early thread."""
    requests.put(fn)
    return answers.get(timeout=30)
