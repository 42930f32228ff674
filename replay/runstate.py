"""Is a run still driven by a live process? The lock a run's driver holds, and what it says.

The log says whether a run ended (its terminal event); it cannot say whether the process
driving an unfinished run is still alive. So the driver of a run (`accelopt run`, `resume`,
`ablate`, the demo: everything that goes through `actors.runtime.session.run_session`) holds an
exclusive `flock` on `<root>/<run_id>/run.lock` for as long as it drives the run, with its
pid, host, start time and the command that resumes the run written in it. The kernel
releases the lock when that process dies, however it dies (`kill -9` included), and the
file stays. So, for a run whose log has no terminal event:

- the lock is held: `running`;
- the lock file is there and nobody holds it: `interrupted` (its driver died or gave up:
  `accelopt resume RUN`);
- no lock file (a run of another machine, or of an older version): the log alone decides.

A run can have only one driver at a time: a second `resume` of a run being driven is refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from accelopt.folders import private_folder

LOCK_NAME = "run.lock"
DriverState = Literal["running", "interrupted", "unknown"]


class RunBusy(RuntimeError):
    """Another live process drives this run."""


@dataclass
class LockInfo:
    pid: int = 0
    host: str = ""
    started_ts: float | None = None
    resume: str = ""


class RunLock:
    """`with RunLock(root, run_id):` for as long as this process drives the run."""

    def __init__(self, root: str | Path, run_id: str) -> None:
        self.path = Path(root) / run_id / LOCK_NAME
        self.run_id, self.root = run_id, str(root)
        self._fd: int | None = None

    def __enter__(self) -> RunLock:
        private_folder(self.root)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            other = read_lock(self.path)
            raise RunBusy(
                f"run {self.run_id} is being driven by pid {other.pid} on {other.host or '?'}; stop that "
                "first"
            ) from None
        mine = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started_ts": time.time(),
            "resume": resume_command(self.run_id, self.root),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(mine) + "\n").encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the lock; the file says who drove the run last
            self._fd = None


def resume_command(run_id: str, root: str) -> str:
    return f"accelopt resume {run_id}" + ("" if root == "runs" else f" --root {root}")


def read_lock(path: str | Path) -> LockInfo:
    with contextlib.suppress(OSError, ValueError, TypeError):
        data = json.loads(Path(path).read_text())
        return LockInfo(
            pid=int(data.get("pid", 0)),
            host=str(data.get("host", "")),
            started_ts=data.get("started_ts"),
            resume=str(data.get("resume", "")),
        )
    return LockInfo()


def driver_state(root: str | Path, run_id: str) -> DriverState:
    """Whether a live process drives the run (see the module docstring)."""
    path = Path(root) / run_id / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return "unknown"
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return "running"
    finally:
        os.close(fd)  # a shared lock we got goes with the fd
    return "interrupted"


def locked_run_dirs(root: str | Path) -> list[Path]:
    """Run directories under `root` with a driver's lock file."""
    root = Path(root)
    return sorted(p.parent for p in root.glob(f"*/{LOCK_NAME}")) if root.is_dir() else []
