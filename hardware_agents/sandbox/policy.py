"""What a caller asks of a sandbox (`SandboxPolicy`), what it gets back (`SandboxOutcome`),
and the isolation a run requires before untrusted code may run (`allow_unisolated`)."""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator
from typing import Literal, TypeVar

import msgspec

from hardware_agents.sandbox.freeze import FreezeBreach

T = TypeVar("T")

SandboxStatus = Literal["ok", "error", "crashed", "timeout", "cpu_limit", "unisolated"]

REQUIRED_ISOLATION: tuple[str, ...] = ("filesystem", "network")
_allow_unisolated: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "accelopt_allow_unisolated",
    default=os.environ.get("ACCELOPT_ALLOW_UNISOLATED", "") in ("1", "true", "yes"),
)


@contextlib.contextmanager
def allow_unisolated(allowed: bool) -> Iterator[None]:
    """Within this context (and threads started by asyncio.to_thread from it), sandboxes run
    untrusted code even where filesystem or network isolation cannot be applied."""
    token = _allow_unisolated.set(allowed)
    try:
        yield
    finally:
        _allow_unisolated.reset(token)


def required_isolation(extra: tuple[str, ...] = ()) -> list[str]:
    """What a sandbox must apply before untrusted code runs, given the current setting."""
    return [] if _allow_unisolated.get() else [*REQUIRED_ISOLATION, *extra]


def unisolated_allowed() -> bool:
    return _allow_unisolated.get()


def unisolated_message(detail: str) -> str:
    return (
        f"refusing to run LLM-written code: {detail}. Run where Landlock and seccomp are available "
        "(Linux >= 5.13 with Landlock enabled), or accept the risk with `--set sandbox.allow_unisolated=true` "
        "(recorded in every profile and the report)"
    )


class SandboxPolicy(msgspec.Struct, frozen=True, kw_only=True):
    wall_timeout_s: float = 60.0
    cpu_seconds: int | None = None  # default: wall timeout x cores + 5
    address_space_bytes: int = 4 << 30
    max_processes: int = 64  # processes + threads of the sandbox uid
    max_file_bytes: int = 1 << 30
    isolate_network: bool = True
    drop_privileges: bool = True  # as root: run as a fresh unprivileged uid
    landlock: bool = True
    restrict_reads: bool = True  # Landlock reads only beneath default + read_paths
    read_paths: tuple[str, ...] = ()
    write_paths: tuple[str, ...] = ()  # beyond the work dir (e.g. device nodes such as /dev/neuron0)
    python_path: tuple[str, ...] = ()  # appended to the child's PYTHONPATH (and readable)
    env: dict[str, str] = {}
    preload: tuple[str, ...] = ()  # modules imported before the privilege drop
    log_bytes: int = 64 * 1024  # how much of the child's stderr the parent keeps (the head)
    block_sockets: bool = True  # seccomp: socket() of any family fails
    no_fork: bool = False  # seccomp: threads only, no new processes (kernel servers)
    stoppable: bool = True  # seccomp profile `stoppable` for spawned (stopped) children; required
    lock_pdeathsig: bool = True  # seccomp: prctl(PR_SET_PDEATHSIG) fails (the child dies with its parent)
    cpus: tuple[int, ...] = ()  # CPU affinity of the child (empty: the parent's)
    workdir_bytes: int = 512 << 20  # size cap of the work dir (its own tmpfs, as root); 0: none
    keep_stdout: bool = False  # the child's stdout joins the log (else it is discarded)


class SandboxOutcome(msgspec.Struct, kw_only=True):
    """What happened to one child run. `payload` is the harness's msgpack result (status ok)."""

    status: SandboxStatus
    payload: bytes = b""
    error: str = ""
    error_type: str = ""
    returncode: int | None = None
    signal: str | None = None
    wall_s: float = 0.0
    log: str = ""
    stray_processes: int = 0
    isolation: dict[str, str] = {}
    freeze_breach: FreezeBreach | None = None  # a driven child ran while it was held stopped

    def decode(self, kind: type[T]) -> T:
        return msgspec.msgpack.decode(self.payload, type=kind)
