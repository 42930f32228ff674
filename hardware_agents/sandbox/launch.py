"""One sandboxed child from its start to its outcome: `Launched` holds its process, its clock
start, its files and the status pipe on which it reports the isolation it applied, before any
untrusted code exists in it (the only report believed); `collect` reads its end into a
`SandboxOutcome`."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from pathlib import Path

import msgspec

from hardware_agents.sandbox.policy import SandboxOutcome, SandboxStatus, unisolated_message
from hardware_agents.sandbox.records import ChildReport
from hardware_agents.sandbox.resources import read_file_safely
from hardware_agents.sandbox.scrub import scrub_output
from hardware_agents.sandbox.uids import kill_uid


class Launched:
    """A started child: its process, clock start, files, and the status pipe's read end."""

    def __init__(
        self, *, proc: subprocess.Popen[bytes], t0: float, log_path: Path, result_path: Path, status_fd: int
    ) -> None:
        self.proc, self.t0, self.log_path, self.result_path = proc, t0, log_path, result_path
        self._status_fd: int | None = status_fd
        self._isolation: dict[str, str] | None = None

    def isolation(self, wait_s: float = 0.0) -> dict[str, str]:
        """The isolation the child reported before any untrusted code ran: a length-prefixed
        msgpack map written once, then the pipe closed. `_untrusted` marks a missing or
        malformed report (the child died first, or something else wrote)."""
        if self._isolation is not None:
            return self._isolation
        fd = self._status_fd
        data = b""
        if fd is not None:
            try:
                deadline = time.monotonic() + wait_s
                while True:
                    ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
                    if not ready:
                        break
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        break
                    data += chunk
                    if len(data) >= 4 and len(data) >= 4 + int.from_bytes(data[:4], "little"):
                        break
            finally:
                os.close(fd)
                self._status_fd = None
        try:
            n = int.from_bytes(data[:4], "little")
            iso = (
                msgspec.msgpack.decode(data[4 : 4 + n], type=dict[str, str])
                if len(data) == 4 + n and n
                else None
            )
        except (msgspec.DecodeError, msgspec.ValidationError):
            iso = None
        self._isolation = iso if iso is not None else {"_untrusted": "no isolation report"}
        return self._isolation

    def close(self) -> None:
        if self._status_fd is not None:
            os.close(self._status_fd)
            self._status_fd = None


def wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait for the child to exit (True) or the timeout (False), without polling: a pidfd
    becomes readable when the process exits (Linux >= 5.3); else Popen's polling wait."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        ready, _, _ = select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    if not ready:
        return False
    proc.wait()
    return True


def kill_all(proc: subprocess.Popen[bytes], uid: int | None) -> int:
    """SIGKILL the child's process group and, where it runs as a sandbox uid, every process of
    that uid (those that left the group with setsid() too); how many of the uid's were killed."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    return kill_uid(uid) if uid is not None else 0


def collect(
    child: Launched, timed_out: bool, timeout: float, *, uid: int | None, workdir_limit: str, log_bytes: int
) -> SandboxOutcome:
    """Collect a child that has exited (or was killed): status, log, isolation, the processes
    it left behind (killed now)."""
    proc = child.proc
    wall = time.perf_counter() - child.t0
    stray = kill_all(proc, uid)  # grandchildren left in the group, processes of the uid
    isolation = {**child.isolation(), "workdir": workdir_limit}
    log_text = _log_head(child.log_path, log_bytes)
    rc = proc.returncode
    sig = signal.Signals(-rc).name if rc is not None and rc < 0 else None

    def outcome(
        status: SandboxStatus, error: str = "", *, error_type: str = "", payload: bytes = b""
    ) -> SandboxOutcome:
        return SandboxOutcome(
            status=status,
            error=error,
            error_type=error_type,
            payload=payload,
            returncode=rc,
            signal=sig,
            wall_s=wall,
            log=log_text,
            stray_processes=stray,
            isolation=isolation,
        )

    if timed_out:
        return outcome("timeout", f"wall-clock timeout after {timeout:.1f} s")
    if sig == "SIGXCPU":
        return outcome("cpu_limit", "CPU time limit exceeded")
    report = _read_report(child.result_path)
    if report is None:
        what = f"killed by {sig}" if sig else f"exited with code {rc} without a result"
        if sig == "SIGXFSZ":
            what += " (file size limit)"
        return outcome("crashed", what)
    if report.error_type == "IsolationUnavailable" and not isolation.get("_untrusted"):
        return outcome("unisolated", unisolated_message(report.error))
    if sig is not None:
        return outcome("crashed", f"killed by {sig} after reporting")
    if not report.ok:
        return outcome("error", report.error, error_type=report.error_type)
    return outcome("ok", payload=report.payload)


def _read_report(path: Path) -> ChildReport | None:
    try:
        data = read_file_safely(path, 256 << 20)
        return msgspec.msgpack.decode(data, type=ChildReport)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def _log_head(path: Path, log_bytes: int) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(log_bytes)
    except OSError:
        return ""
    return scrub_output(data)
