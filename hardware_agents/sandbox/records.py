"""What passes between the parent and the child launcher (`child.py`): the spec the parent
writes for it, the report it writes back. The report is data the parent validates, never a
verdict it trusts."""

from __future__ import annotations

import sys

import msgspec

CHILD_MODULE = "hardware_agents.sandbox.child"  # the launcher: `python -m CHILD_MODULE SPEC_FILE`


def in_sandbox_child() -> bool:
    """Whether this process is a sandboxed child (its main module is the launcher): for a
    module preloaded there that must prepare what the lockdown would forbid later."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", "") == CHILD_MODULE


class ChildSpec(msgspec.Struct, kw_only=True):
    target: str
    payload: bytes
    workdir: str
    result_path: str
    uid: int | None = None
    gid: int | None = None
    rlimits: dict[str, tuple[int, int]] = {}
    isolate_network: bool = True
    landlock: bool = True
    read_paths: list[str] | None = None  # Landlock's read list (None: reads not restricted)
    reach_paths: list[str] = []  # what the sandbox uid must be able to reach (`reach.py`)
    write_paths: list[str] = []
    preload: list[str] = []
    seccomp_sockets: bool = True
    seccomp_no_fork: bool = False
    seccomp_stoppable: bool = False
    seccomp_pdeathsig: bool = True
    cpus: list[int] = []  # the CPU affinity to run on (empty: the parent's)
    status_fd: int | None = None
    require: list[str] = []  # isolation the parent requires: "filesystem", "network", "no_fork", "stoppable"


class ChildReport(msgspec.Struct, kw_only=True):
    ok: bool
    payload: bytes = b""
    error: str = ""
    error_type: str = ""
    isolation: dict[str, str] = {}
