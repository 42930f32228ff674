"""A seccomp-BPF filter through ctypes: what a sandboxed child may no longer ask the kernel.

Landlock confines paths and TCP; it does not stop UDP, pathname unix sockets, or new
processes. This filter adds, for the calling thread and everything it later creates:

- `sockets`: socket() and socketpair() fail with EPERM (every family: UDP, unix, netlink,
  raw). The
  sandbox talks to its parent only over pipes it inherited, so nothing legitimate needs one.
- `no_fork`: clone() without CLONE_THREAD, fork() and vfork() fail with EPERM, clone3()
  with ENOSYS (its flags sit behind a pointer BPF cannot read; libc then falls back to
  clone(), whose flags it can). Threads still work. A kernel server needs this: the parent
  freezes the child between timed batches with SIGSTOP, which stops every thread of the
  process but would not stop a forked helper.
- always: ptrace, process_vm_readv/writev, perf_event_open, bpf, userfaultfd, keyctl,
  add_key, request_key, unshare, setns, mount, umount2, pivot_root, chroot, kexec_load,
  io_uring_* (io_uring makes sockets without socket(), and its workers are not frozen by
  SIGSTOP), pidfd_getfd and process_madvise fail with EPERM: nothing a kernel needs, and
  each could reach past the other walls. x32 system calls (x86_64) kill the process.

Needs no privilege once no_new_privs is set. Returns what was applied, for the record.
"""

from __future__ import annotations

import ctypes
import errno
import platform

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2

_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000

# BPF opcodes
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06

_CLONE_THREAD = 0x00010000

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

# syscall numbers; None where the architecture has no such call
_NR: dict[str, dict[str, int | None]] = {
    "x86_64": {
        "socket": 41, "clone": 56, "fork": 57, "vfork": 58, "clone3": 435, "ptrace": 101,
        "process_vm_readv": 310, "process_vm_writev": 311, "perf_event_open": 298, "bpf": 321,
        "userfaultfd": 323, "keyctl": 250, "add_key": 248, "request_key": 249, "unshare": 272,
        "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "kexec_load": 246,
        "socketpair": 53, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "pidfd_getfd": 438, "process_madvise": 440,
    },
    "aarch64": {
        "socket": 198, "clone": 220, "fork": None, "vfork": None, "clone3": 435, "ptrace": 117,
        "process_vm_readv": 270, "process_vm_writev": 271, "perf_event_open": 241, "bpf": 280,
        "userfaultfd": 282, "keyctl": 219, "add_key": 217, "request_key": 218, "unshare": 97,
        "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "kexec_load": 104,
        "socketpair": 199, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "pidfd_getfd": 438, "process_madvise": 440,
    },
}
_ALWAYS_DENIED = ("ptrace", "process_vm_readv", "process_vm_writev", "perf_event_open", "bpf", "userfaultfd",
                  "keyctl", "add_key", "request_key", "unshare", "setns", "mount", "umount2", "pivot_root",
                  "chroot", "kexec_load", "io_uring_setup", "io_uring_enter", "io_uring_register",
                  "pidfd_getfd", "process_madvise")
_X32_BIT = 0x40000000  # x86_64: syscall numbers of the x32 ABI (same arch value, other table)


class SeccompError(OSError):
    pass


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def available() -> bool:
    return platform.system() == "Linux" and platform.machine() in _NR


def _program(arch: str, *, sockets: bool, no_fork: bool) -> list[tuple[int, int, int, int]]:
    nr = _NR[arch]
    deny = [n for n in _ALWAYS_DENIED if nr[n] is not None]
    if sockets:
        deny += ["socket", "socketpair"]
    if no_fork:
        deny += [n for n in ("fork", "vfork") if nr[n] is not None]
    eperm = _RET_ERRNO | errno.EPERM
    prog: list[tuple[int, int, int, int]] = [
        (_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ_K, 1, 0, _AUDIT_ARCH[arch]),
        (_RET_K, 0, 0, _RET_KILL_PROCESS),  # a foreign ABI (e.g. x32/i386 calls) is never allowed
        (_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if arch == "x86_64":  # x32 calls would bypass every rule below
        prog += [(_JGE_K, 0, 1, _X32_BIT), (_RET_K, 0, 0, _RET_KILL_PROCESS)]
    for name in deny:
        prog += [(_JEQ_K, 0, 1, int(nr[name])), (_RET_K, 0, 0, eperm)]  # type: ignore[arg-type]
    if no_fork:
        prog += [
            (_JEQ_K, 0, 1, int(nr["clone3"])), (_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS),  # type: ignore[arg-type]
            (_JEQ_K, 0, 4, int(nr["clone"])),  # type: ignore[arg-type]
            (_LD_W_ABS, 0, 0, 16),  # args[0] low word: the clone flags
            (_JSET_K, 1, 0, _CLONE_THREAD),
            (_RET_K, 0, 0, eperm),
            (_RET_K, 0, 0, _RET_ALLOW),
        ]
    prog.append((_RET_K, 0, 0, _RET_ALLOW))
    return prog


def restrict(*, sockets: bool = True, no_fork: bool = False) -> dict[str, str]:
    """Install the filter on the calling thread (call it while the process has one thread)."""
    arch = platform.machine()
    if not available():
        raise SeccompError(errno.ENOSYS, f"seccomp filter not supported on {platform.system()}/{arch}")
    prog = _program(arch, sockets=sockets, no_fork=no_fork)
    arr = (_SockFilter * len(prog))(*[_SockFilter(c, jt, jf, k) for c, jt, jf, k in prog])
    fprog = _SockFprog(len(prog), ctypes.cast(arr, ctypes.POINTER(_SockFilter)))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise SeccompError(err, f"prctl(NO_NEW_PRIVS): {errno.errorcode.get(err, err)}")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise SeccompError(err, f"prctl(SECCOMP): {errno.errorcode.get(err, err)}")
    applied = ["sockets" if sockets else "", "no_fork" if no_fork else "", "ptrace,bpf,ns,mount"]
    return {"seccomp": ",".join(a for a in applied if a)}

