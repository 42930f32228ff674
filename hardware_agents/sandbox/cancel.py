"""Stopping one piece of work's sandboxed children from outside it: a profile that whoever
asked for it gave up on (the MCP server's `ProfileCancelled` on a warm pool) ends now rather
than at its own time limit, so a hung kernel does not keep the device from the next request.

    scope = CancelScope()
    with scope.entered():          # in the work's own thread (the profile's)
        agent.profile(...)         # every child a Sandbox launches here is the scope's
    scope.cancel("why")            # from any thread: the scope's children SIGKILLed

`Sandbox` hands each child it launches to the scope of its context (`adopt`); a child started
after the cancel is killed as soon as it starts, and `run_stages` ends a cancelled profile at
its next stage boundary (`raise_if_cancelled`), so the work returns (or raises `WorkCancelled`)
within moments. What it left (its group, its uid's processes) is swept as always by the
work's own cleanup (`launch.collect`), in the work's thread, while the sandbox uid is still its.

Never another request's child: a scope is one piece of work's, and each child is signalled
through a pidfd opened as it was started (before anything could reap it), so a pid reused by
another child after this one was reaped is never hit (without pidfds, Linux < 5.3: `Popen.
send_signal`, which skips a child already reaped). A child started in another thread, which
does not carry the context, is not the scope's; a child started here for later work (a
Triton spare) is started `detached()` and joins the scope of the work that claims it.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import signal
import subprocess
import threading
from collections.abc import Iterator

_current: contextvars.ContextVar[CancelScope | None] = contextvars.ContextVar(
    "accelopt_cancel_scope", default=None
)


class WorkCancelled(Exception):
    """The work's scope was cancelled: raised at a stage boundary of a cancelled profile."""


class _Child:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        try:
            self.pidfd: int | None = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            self.pidfd = None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            else:
                self.proc.send_signal(signal.SIGKILL)  # skips a child already reaped

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


class CancelScope:
    """The sandboxed children of one piece of work, and whether it was cancelled."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._children: list[_Child] = []
        self.reason: str | None = None  # set by `cancel`

    @property
    def cancelled(self) -> bool:
        return self.reason is not None

    @contextlib.contextmanager
    def entered(self) -> Iterator[CancelScope]:
        """The work of this context (and of threads that copy it) is this scope's; its
        children's pidfds are closed when it ends."""
        token = _current.set(self)
        try:
            yield self
        finally:
            _current.reset(token)
            with self._lock:
                children, self._children = self._children, []
            for child in children:
                child.close()

    def adopt(self, proc: subprocess.Popen[bytes]) -> None:
        child = _Child(proc)
        with self._lock:
            self._children.append(child)
            late = self.cancelled
        if late:
            child.kill()

    def cancel(self, reason: str) -> int:
        """SIGKILL every child of the scope (and those it starts from now on); how many were
        signalled (children already gone included)."""
        with self._lock:
            if self.reason is None:
                self.reason = reason or "cancelled"
            children = list(self._children)
            for child in children:  # under the lock: `entered` does not close a pidfd meanwhile
                child.kill()
        return len(children)


def adopt(proc: subprocess.Popen[bytes]) -> None:
    """`proc` (just started, by `Sandbox`) is the child of the current scope's work, if any."""
    scope = _current.get()
    if scope is not None:
        scope.adopt(proc)


def raise_if_cancelled() -> None:
    """Raise `WorkCancelled` where the current scope was cancelled (a stage boundary)."""
    scope = _current.get()
    if scope is not None and scope.cancelled:
        raise WorkCancelled(scope.reason or "cancelled")


@contextlib.contextmanager
def detached() -> Iterator[None]:
    """Children started here belong to no scope (started ahead of need for later work)."""
    token = _current.set(None)
    try:
        yield
    finally:
        _current.reset(token)
