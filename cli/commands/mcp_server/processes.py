"""The `accelopt` processes the run and campaign tools start (`runs.py`, `campaigns.py`): each
in a session of its own, its output in a file of the server's session folder; found by the lock
it takes (`<folder>/run.lock` naming its pid), stopped by SIGTERM as Ctrl-C stops it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

START_LIMIT_S = 300.0  # Ray, the agents, the embedded event server: a loaded host is slow
STOP_GRACE_S = 60.0  # to unwind after SIGTERM (its lock, its log's export) before SIGKILL


class StartError(RuntimeError):
    """The process did not start; one line."""


def spawn(args: list[str], output: Path) -> subprocess.Popen[bytes]:
    """`accelopt ARGS` in a session of its own (one group to kill), its output in `output`."""
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output, "wb") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", "cli.main", *args],
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            cwd=Path(__file__).resolve().parents[3],
            start_new_session=True,
        )


async def wait_for_lock(
    proc: subprocess.Popen[bytes], output: Path, locks: Callable[[], list[Path]], what: str
) -> str:
    """The name of the folder whose lock `proc` took (the run's or campaign's id), once it
    holds it; StartError with its last line where it exits first or takes too long."""
    from replay.runstate import read_lock

    deadline = time.monotonic() + START_LIMIT_S
    while time.monotonic() < deadline:
        for lock in locks():
            if read_lock(lock).pid == proc.pid:
                return lock.parent.name
        if proc.poll() is not None:
            raise StartError(f"{what} exited ({proc.returncode}): {last_line(output)}")
        await asyncio.sleep(0.5)
    proc.terminate()
    raise StartError(f"the {what} did not start within {START_LIMIT_S:.0f} s: {last_line(output)}")


async def stop(proc: subprocess.Popen[bytes], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM (it unwinds: its lock says how it was left), then after `grace_s` SIGKILL to its
    whole group; returns once it has ended."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while proc.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        await asyncio.to_thread(proc.wait)


def stopped_state(code: int) -> str:
    """How a process that ended before its log began is said to have ended."""
    return "stopped" if code in (143, -signal.SIGTERM) else "failed"


def tail(path: Path, n: int = 8) -> str:
    try:
        lines = path.read_bytes()[-8192:].decode(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(ln for ln in lines[-n:] if ln.strip())


def last_line(path: Path) -> str:
    lines = tail(path, 20).splitlines()
    return lines[-1].strip() if lines else "(no output)"
