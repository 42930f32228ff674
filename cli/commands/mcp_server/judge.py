"""The trusted judge of the MCP server: one warm worker process per device kind
(`worker.py`), one profile at a time on each (timing needs the device to itself; callers
queue in arrival order). The server owns the seeds, the clock and the verdict; the worker
only runs the hardware agent.

A profile that is cancelled, or that gives no verdict within its limit, is stopped by killing
the worker's process group (the sandboxed kernel dies with it); the next request starts a
fresh worker. `progress` is called about once a second while a profile runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import struct
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import msgspec

from cli.commands.mcp_server.worker import frame

Progress = Callable[[float, float, str], Awaitable[None]]
_LEN = struct.Struct(">I")
START_LIMIT_S = 300.0  # a worker's start: imports, and the CPU's roofline calibration on a first run


def _die_with_parent() -> None:
    """In the worker, before exec: SIGKILL when the server goes (PR_SET_PDEATHSIG)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


class JudgeError(RuntimeError):
    """The judge could not give a verdict (the device, the worker); one line."""


class _Worker:
    def __init__(self, device: str, proc: asyncio.subprocess.Process) -> None:
        self.device = device
        self.proc = proc

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    async def read(self) -> Any:
        assert self.proc.stdout is not None
        head = await self.proc.stdout.readexactly(_LEN.size)
        (n,) = _LEN.unpack(head)
        return msgspec.msgpack.decode(await self.proc.stdout.readexactly(n))


class Judge:
    def __init__(self, *, python: str = sys.executable) -> None:
        self.python = python
        self._workers: dict[str, _Worker] = {}
        self._slots: dict[str, asyncio.Lock] = {}
        self.profiles = 0
        self.stopped = 0  # profiles stopped (cancelled or out of time)

    def slot(self, device: str) -> asyncio.Lock:
        return self._slots.setdefault(device, asyncio.Lock())

    def busy(self, device: str) -> bool:
        lock = self._slots.get(device)
        return bool(lock and lock.locked())

    def worker_pid(self, device: str) -> int | None:
        w = self._workers.get(device)
        return w.proc.pid if w is not None and w.proc.returncode is None else None

    async def _start(self, device: str) -> _Worker:
        proc = await asyncio.create_subprocess_exec(
            self.python,
            "-m",
            "cli.commands.mcp_server.worker",
            device,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=None,  # the server's stderr: the agent's own log lines
            start_new_session=True,  # its own process group: one kill stops it and its helpers
            preexec_fn=_die_with_parent,  # a server killed -9 leaves no profile running
            limit=1 << 26,
        )
        w = _Worker(device, proc)
        try:
            with anyio.fail_after(START_LIMIT_S):
                hello = await w.read()
        except BaseException as e:
            w.kill()
            with anyio.CancelScope(shield=True):
                await proc.wait()
            if isinstance(e, (TimeoutError, asyncio.IncompleteReadError)):
                raise JudgeError(f"the profiler of {device!r} did not start") from None
            raise
        if "error" in hello:
            with anyio.CancelScope(shield=True):
                await proc.wait()
            raise JudgeError(str(hello["error"]))
        return w

    async def _stop(self, device: str) -> None:
        w = self._workers.pop(device, None)
        if w is not None:
            w.kill()
            self.stopped += 1
            with anyio.CancelScope(shield=True):
                await w.proc.wait()

    async def request(
        self, device: str, req: dict[str, Any], *, limit_s: float, progress: Progress | None = None
    ) -> dict[str, Any]:
        """Send `req` to `device`'s worker when its slot is free; its reply. The worker is
        killed where the caller is cancelled or no reply came within `limit_s`."""
        async with self.slot(device):
            w = self._workers.get(device)
            if w is None or w.proc.returncode is not None:
                w = self._workers[device] = await self._start(device)
            assert w.proc.stdin is not None
            w.proc.stdin.write(frame(req))
            t0 = time.monotonic()
            reply_task = asyncio.ensure_future(w.read())
            what = f"{req['op']} of {req['problem']} on {device}"
            try:
                while True:
                    done, _ = await asyncio.wait({reply_task}, timeout=1.0)
                    elapsed = time.monotonic() - t0
                    if done:
                        reply: dict[str, Any] = reply_task.result()
                        if "progress" not in reply:
                            break
                        what = str(reply["progress"])  # the worker says which step it is on
                        reply_task = asyncio.ensure_future(w.read())
                    if elapsed > limit_s:
                        raise TimeoutError
                    if progress is not None:
                        await progress(elapsed, limit_s, what)
            except TimeoutError:
                await self._stop(device)
                raise JudgeError(
                    f"no verdict within {limit_s:.0f} s: the profile was stopped (its process killed)"
                ) from None
            except asyncio.IncompleteReadError:
                await self._stop(device)
                raise JudgeError(
                    "the profiler process died during the profile; it restarts on the next call"
                ) from None
            except BaseException:  # cancelled: the profile stops with its process, the slot frees
                reply_task.cancel()
                await self._stop(device)
                raise
            if req["op"] in ("profile", "compare"):
                self.profiles += 1
            return reply

    async def close(self) -> None:
        for device in list(self._workers):
            w = self._workers.pop(device)
            w.kill()
            with anyio.CancelScope(shield=True):
                await w.proc.wait()
