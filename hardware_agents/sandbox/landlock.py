"""Landlock (Linux >= 5.13) through ctypes: confine a process's file access to path trees.

After `restrict(...)` the calling thread (and everything it execs or forks) may write only
beneath `write_paths`, read only beneath `read_paths` (when reads are restricted), cannot
connect or bind TCP sockets (ABI >= 4), and cannot signal or reach abstract unix sockets of
processes outside its domain (ABI >= 6). Landlock stacks and cannot be undone, and it needs
no privilege. The domain goes to every thread of the process: from ABI 8 by the kernel
(TSYNC); before it, threads that libraries started earlier (a BLAS pool, a CUDA driver's
helpers) are made to confine themselves one by one (`threads.py`), and where one cannot be,
`restrict` fails: a thread left unconfined would run the kernel's code outside the sandbox.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

from hardware_agents.sandbox import threads

# Syscall numbers are the generic ones on both x86_64 and aarch64.
_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1
RESTRICT_SELF_TSYNC = 1 << 3  # ABI 8: every thread of the process

READ_ACCESS = EXECUTE | READ_FILE | READ_DIR
FILE_ONLY_ACCESS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class LandlockError(OSError):
    pass


def abi_version() -> int:
    """The kernel's Landlock ABI version, 0 when unavailable (disabled, old kernel, non-Linux)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        return 0
    v = _libc.syscall(_SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return int(v) if v > 0 else 0


def _fs_access(abi: int) -> int:
    mask = (1 << 13) - 1
    if abi >= 2:
        mask |= REFER
    if abi >= 3:
        mask |= TRUNCATE
    if abi >= 5:
        mask |= IOCTL_DEV
    return mask


def _allow(ruleset: int, handled: int, path: str, access: int) -> None:
    """Add a rule to `ruleset`: `access` (of what it handles) beneath `path` (on a file, only
    the accesses a file has); a path that does not exist needs none."""
    try:
        pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            access &= FILE_ONLY_ACCESS
        rule = ctypes.create_string_buffer(struct.pack("=Qi", access & handled, pfd), 12)
        rc = _libc.syscall(
            _SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), rule, ctypes.c_uint32(0)
        )
        if rc < 0:
            err = ctypes.get_errno()
            raise LandlockError(err, f"landlock_add_rule({path}): {os.strerror(err)}")
    finally:
        os.close(pfd)


def restrict(
    *,
    write_paths: list[str],
    read_paths: list[str] | None,
    device_paths: list[str] = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"),  # type: ignore[assignment]
    block_tcp: bool = True,
) -> dict[str, str]:
    """Apply a Landlock domain to the calling process. Returns what was applied.

    write_paths: full access beneath them. read_paths: read/execute beneath them; None leaves
    reads unrestricted. device_paths: read/write to these character devices.
    """
    abi = abi_version()
    if abi < 1:
        raise LandlockError("Landlock is not available on this kernel")
    handled = _fs_access(abi)
    if read_paths is None:
        handled &= ~READ_ACCESS
    net = (NET_BIND_TCP | NET_CONNECT_TCP) if (block_tcp and abi >= 4) else 0
    scoped = (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0
    if scoped:
        attr = struct.pack("QQQ", handled, net, scoped)
    elif net:
        attr = struct.pack("QQ", handled, net)
    else:
        attr = struct.pack("Q", handled)
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd = _libc.syscall(_SYS_CREATE, buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if fd < 0:
        raise LandlockError(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        for p in write_paths:
            _allow(fd, handled, p, handled)
        for p in device_paths:
            _allow(fd, handled, p, READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV)
        for p in read_paths or []:
            _allow(fd, handled, p, READ_ACCESS)
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise LandlockError(err, f"prctl(NO_NEW_PRIVS): {os.strerror(err)}")
        tsync = abi >= 8
        flags = RESTRICT_SELF_TSYNC if tsync else 0
        confined: list[int] = []
        if not tsync:
            if not thread_ids():
                raise LandlockError("/proc/self/task is unreadable: the threads to confine are unknown")
            try:
                confined = threads.confine_other_threads(fd)
            except threads.ThreadConfinementError as e:
                raise LandlockError(f"not every thread could be confined: {e}") from e
        if _libc.syscall(_SYS_RESTRICT, ctypes.c_int(fd), ctypes.c_uint32(flags)) < 0:
            err = ctypes.get_errno()
            raise LandlockError(err, f"landlock_restrict_self: {os.strerror(err)}")
    finally:
        os.close(fd)
    return {
        "landlock_abi": str(abi),
        "landlock_reads": "restricted" if read_paths is not None else "open",
        "landlock_tcp": "blocked" if net else "open",
        "landlock_threads": "all"
        + (
            " (TSYNC)"
            if tsync
            else f" ({len(confined)} other thread(s) confined themselves, one by one)"
            if confined
            else " (one thread)"
        ),
    }


thread_ids = threads.thread_ids
