"""A sandbox self-check target: reports what a child process can see and do.

`run_sandboxed("hardware_agents.sandbox.probe:describe")` returns a `ProbeReport`; tests and the
other agents' authors use it to confirm the isolation on a given machine.
"""

from __future__ import annotations

import encodings.idna  # noqa: F401  (socket needs it; lazy imports fail after the privilege drop)
import os
import resource
import socket
import subprocess
import time
from pathlib import Path

import msgspec


class ProbeRequest(msgspec.Struct, kw_only=True):
    try_write: list[str] = []
    try_read: list[str] = []
    try_connect: list[tuple[str, int]] = []


class ProbeReport(msgspec.Struct, kw_only=True):
    uid: int
    gid: int
    cwd: str
    env: dict[str, str]
    rlimits: dict[str, tuple[int, int]]
    writable: dict[str, str]
    readable: dict[str, str]
    connect: dict[str, str]


def _attempt(fn) -> str:  # -> "ok" or the error
    try:
        fn()
        return "ok"
    except OSError as e:
        return f"{type(e).__name__}: {e.strerror}"


def describe(payload: bytes, workdir: Path) -> ProbeReport:
    req = msgspec.msgpack.decode(payload, type=ProbeRequest) if payload else ProbeRequest()

    def write(p: str) -> None:
        with open(p, "w") as f:
            f.write("probe")

    def read(p: str) -> None:
        with open(p, "rb") as f:
            f.read(16)

    def connect(host: str, port: int) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(1.0)
            s.connect((host, port))

    names = ["RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_NPROC", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_NICE"]
    return ProbeReport(
        uid=os.getuid(),
        gid=os.getgid(),
        cwd=os.getcwd(),
        env=dict(os.environ),
        rlimits={n: resource.getrlimit(getattr(resource, n)) for n in names},
        writable={p: _attempt(lambda p=p: write(p)) for p in req.try_write},
        readable={p: _attempt(lambda p=p: read(p)) for p in req.try_read},
        connect={
            f"{h}:{port}": _attempt(lambda h=h, port=port: connect(h, port)) for h, port in req.try_connect
        },
    )


def sleep(payload: bytes, workdir: Path) -> ProbeReport:
    """Sleep for float(payload) seconds, in a grandchild too (tests the group kill)."""
    seconds = float(payload.decode() or "3600")
    subprocess.Popen(["sleep", str(seconds)], start_new_session=True)
    time.sleep(seconds)
    return describe(b"", workdir)


def fail(payload: bytes, workdir: Path) -> ProbeReport:
    raise RuntimeError(f"probe failure: {payload.decode()}")


def exit_silently(payload: bytes, workdir: Path) -> ProbeReport:
    """Exit without reporting, as a kernel calling exit() would."""
    os._exit(0)


def nothing(payload: bytes, workdir: Path) -> bytes:
    """A target that does nothing: the sandbox's own isolation report is the point."""
    return b""
