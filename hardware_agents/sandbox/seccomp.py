"""A seccomp-BPF filter through ctypes: what a sandboxed child may no longer ask the kernel.

Landlock confines paths and TCP; it does not stop UDP, pathname unix sockets, or new
processes. This filter adds, for the calling thread and everything it later creates:

- `sockets`: socket() and socketpair() fail with EPERM (every family: UDP, unix, netlink,
  raw). The sandbox talks to its parent only over pipes it inherited, so nothing
  legitimate needs one.
- `no_fork`: clone() without CLONE_THREAD, fork() and vfork() fail with EPERM, clone3()
  with ENOSYS (its flags sit behind a pointer BPF cannot read; libc then falls back to
  clone(), whose flags it can). Threads still work. A kernel server needs this: the parent
  freezes the child between timed batches with SIGSTOP, which stops every thread of the
  process but would not stop a forked helper.
- `stoppable` (every child the parent stops and continues: `Sandbox.spawn`): nothing that
  could continue the process while it is stopped, or give it cores it was not given.
  timer_create and timer_settime fail (a POSIX timer may deliver SIGCONT, which ends a
  stop), so do fcntl F_SETSIG / F_SETOWN / F_SETOWN_EX and ioctl FIOSETOWN / SIOCSPGRP (I/O
  readiness signals, e.g. on the command pipe the parent writes while the child is
  stopped), mq_notify (a message-queue signal), sched_setaffinity (widening the CPU mask),
  and clone() with an exit signal other than SIGCHLD (a helper's exit would signal its
  parent); clone3() gets ENOSYS so that clone()'s flags are visible. EPERM everywhere.
  The parent still checks the freeze itself (`SandboxChild.check_frozen`).
- `pdeathsig` (on by default): prctl(PR_SET_PDEATHSIG) fails with EPERM: the launcher sets
  SIGKILL as the child's parent-death signal before the filter, and the kernel's code
  cannot clear it to outlive the agent.
- always: ptrace, process_vm_readv/writev, perf_event_open, bpf, userfaultfd, keyctl,
  add_key, request_key, unshare, setns, mount, umount2, pivot_root, chroot, kexec_load,
  io_uring_* (io_uring makes sockets without socket(), and its workers are not frozen by
  SIGSTOP), pidfd_getfd and process_madvise fail with EPERM: nothing a kernel needs, and
  each could reach past the other walls. x32 system calls (x86_64) kill the process.

The filter goes to every thread of the process (SECCOMP_FILTER_FLAG_TSYNC): threads that
libraries started before the lockdown (a CUDA driver's, a thread pool's) get it too; where
the kernel refuses to synchronise and other threads exist, `restrict` fails (a thread left
unfiltered would run the kernel's code outside the sandbox); a process of one thread gets
the filter without TSYNC. The record says which (`seccomp_threads`).

Needs no privilege once no_new_privs is set. Returns what was applied, for the record:
`{"seccomp": "sockets,no_fork,stoppable,pdeathsig,ptrace,bpf,ns,mount"}` (the applied parts).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import signal

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SECCOMP_SET_MODE_FILTER = 1  # seccomp(2)'s operation
_SECCOMP_FILTER_FLAG_TSYNC = 1
_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}

_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000

# BPF opcodes
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_AND_K = 0x54
_RET_K = 0x06

_CLONE_THREAD = 0x00010000
_CSIGNAL = 0xFF
_PR_SET_PDEATHSIG = 1
_F_SETOWN, _F_SETSIG, _F_SETOWN_EX = 8, 10, 15
_FIOSETOWN, _SIOCSPGRP = 0x8901, 0x8902

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# offsets in struct seccomp_data: nr, arch, instruction pointer, then six 64-bit arguments
# (the low word of each comes first on these little-endian architectures)
_OFF_NR, _OFF_ARCH = 0, 4


def _arg(i: int) -> int:
    return 16 + 8 * i


# syscall numbers; None where the architecture has no such call
_NR: dict[str, dict[str, int | None]] = {
    "x86_64": {
        "socket": 41,
        "clone": 56,
        "fork": 57,
        "vfork": 58,
        "clone3": 435,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "perf_event_open": 298,
        "bpf": 321,
        "userfaultfd": 323,
        "keyctl": 250,
        "add_key": 248,
        "request_key": 249,
        "unshare": 272,
        "setns": 308,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "chroot": 161,
        "kexec_load": 246,
        "socketpair": 53,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "pidfd_getfd": 438,
        "process_madvise": 440,
        "timer_create": 222,
        "timer_settime": 223,
        "mq_notify": 244,
        "sched_setaffinity": 203,
        "fcntl": 72,
        "ioctl": 16,
        "prctl": 157,
    },
    "aarch64": {
        "socket": 198,
        "clone": 220,
        "fork": None,
        "vfork": None,
        "clone3": 435,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "perf_event_open": 241,
        "bpf": 280,
        "userfaultfd": 282,
        "keyctl": 219,
        "add_key": 217,
        "request_key": 218,
        "unshare": 97,
        "setns": 268,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "chroot": 51,
        "kexec_load": 104,
        "socketpair": 199,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "pidfd_getfd": 438,
        "process_madvise": 440,
        "timer_create": 107,
        "timer_settime": 110,
        "mq_notify": 184,
        "sched_setaffinity": 122,
        "fcntl": 25,
        "ioctl": 29,
        "prctl": 167,
    },
}
_ALWAYS_DENIED = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "perf_event_open",
    "bpf",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "kexec_load",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "pidfd_getfd",
    "process_madvise",
)
_STOPPABLE_DENIED = ("timer_create", "timer_settime", "mq_notify", "sched_setaffinity")
_X32_BIT = 0x40000000  # x86_64: syscall numbers of the x32 ABI (same arch value, other table)

Insn = tuple[int, int, int, int]


class SeccompError(OSError):
    pass


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def available() -> bool:
    return platform.system() == "Linux" and platform.machine() in _NR


def _arg_rule(nr: int, arg: int, values: tuple[int, ...], ret: int) -> list[Insn]:
    """For system call `nr`: return `ret` when argument `arg` (its low word) is one of
    `values`, else allow. Other calls fall through (the accumulator holds nr again)."""
    body: list[Insn] = [(_LD_W_ABS, 0, 0, _arg(arg))]
    for v in values:
        body += [(_JEQ_K, 0, 1, v), (_RET_K, 0, 0, ret)]
    body.append((_RET_K, 0, 0, _RET_ALLOW))
    return [(_JEQ_K, 0, len(body), nr), *body]


def _clone_rule(nr: int, *, no_fork: bool, stoppable: bool) -> list[Insn]:
    """clone(flags, ...): without CLONE_THREAD refused under no_fork; with an exit signal other
    than none or SIGCHLD refused under stoppable."""
    eperm = _RET_ERRNO | errno.EPERM
    body: list[Insn] = [(_LD_W_ABS, 0, 0, _arg(0))]
    if no_fork:
        body += [(_JSET_K, 1, 0, _CLONE_THREAD), (_RET_K, 0, 0, eperm)]
    if stoppable:
        body += [
            (_AND_K, 0, 0, _CSIGNAL),
            (_JEQ_K, 2, 0, 0),
            (_JEQ_K, 1, 0, int(signal.SIGCHLD)),
            (_RET_K, 0, 0, eperm),
        ]
    body.append((_RET_K, 0, 0, _RET_ALLOW))
    return [(_JEQ_K, 0, len(body), nr), *body]


def _program(
    arch: str, *, sockets: bool, no_fork: bool, stoppable: bool = False, pdeathsig: bool = False
) -> list[Insn]:
    nr = _NR[arch]
    deny = [n for n in _ALWAYS_DENIED if nr[n] is not None]
    if sockets:
        deny += ["socket", "socketpair"]
    if no_fork:
        deny += [n for n in ("fork", "vfork") if nr[n] is not None]
    if stoppable:
        deny += list(_STOPPABLE_DENIED)
    eperm = _RET_ERRNO | errno.EPERM
    prog: list[Insn] = [
        (_LD_W_ABS, 0, 0, _OFF_ARCH),
        (_JEQ_K, 1, 0, _AUDIT_ARCH[arch]),
        (_RET_K, 0, 0, _RET_KILL_PROCESS),  # a foreign ABI (e.g. x32/i386 calls) is never allowed
        (_LD_W_ABS, 0, 0, _OFF_NR),
    ]
    if arch == "x86_64":  # x32 calls would bypass every rule below
        prog += [(_JGE_K, 0, 1, _X32_BIT), (_RET_K, 0, 0, _RET_KILL_PROCESS)]
    for name in deny:
        prog += [(_JEQ_K, 0, 1, int(nr[name])), (_RET_K, 0, 0, eperm)]  # type: ignore[arg-type]
    if no_fork or stoppable:
        prog += [(_JEQ_K, 0, 1, int(nr["clone3"])), (_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)]  # type: ignore[arg-type]
    # each block below ends in a return when its call matches, so none needs to reload nr
    if stoppable:
        prog += _arg_rule(int(nr["fcntl"]), 1, (_F_SETOWN, _F_SETSIG, _F_SETOWN_EX), eperm)  # type: ignore[arg-type]
        prog += _arg_rule(int(nr["ioctl"]), 1, (_FIOSETOWN, _SIOCSPGRP), eperm)  # type: ignore[arg-type]
    if pdeathsig:
        prog += _arg_rule(int(nr["prctl"]), 0, (_PR_SET_PDEATHSIG,), eperm)  # type: ignore[arg-type]
    if no_fork or stoppable:
        prog += _clone_rule(int(nr["clone"]), no_fork=no_fork, stoppable=stoppable)  # type: ignore[arg-type]
    prog.append((_RET_K, 0, 0, _RET_ALLOW))
    if len(prog) > 4096:
        raise SeccompError(errno.E2BIG, "seccomp program too long")
    return prog


def restrict(
    *, sockets: bool = True, no_fork: bool = False, stoppable: bool = False, pdeathsig: bool = True
) -> dict[str, str]:
    """Install the filter on every thread of the process (the calling thread alone where the
    kernel cannot synchronise the others: said in the record)."""
    arch = platform.machine()
    if not available():
        raise SeccompError(errno.ENOSYS, f"seccomp filter not supported on {platform.system()}/{arch}")
    prog = _program(arch, sockets=sockets, no_fork=no_fork, stoppable=stoppable, pdeathsig=pdeathsig)
    arr = (_SockFilter * len(prog))(*[_SockFilter(c, jt, jf, k) for c, jt, jf, k in prog])
    fprog = _SockFprog(len(prog), ctypes.cast(arr, ctypes.POINTER(_SockFilter)))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise SeccompError(err, f"prctl(NO_NEW_PRIVS): {errno.errorcode.get(err, err)}")
    synced = libc.syscall(
        ctypes.c_long(_SYS_SECCOMP[arch]),
        ctypes.c_uint(_SECCOMP_SET_MODE_FILTER),
        ctypes.c_uint(_SECCOMP_FILTER_FLAG_TSYNC),
        ctypes.byref(fprog),
    )
    if synced == 0:
        threads = "all (TSYNC)"
    else:  # a thread that cannot synchronise (its id returned), or no seccomp(2)
        why = f"thread {synced} could not synchronise" if synced > 0 else "seccomp(2) refused TSYNC"
        others = len(os.listdir("/proc/self/task")) - 1
        if others != 0:  # the filter would hold the calling thread only: refuse (fail closed)
            raise SeccompError(errno.EPERM, f"{why}, and {others} other thread(s) would run unfiltered")
        if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
            err = ctypes.get_errno()
            raise SeccompError(err, f"prctl(SECCOMP): {errno.errorcode.get(err, err)}")
        threads = "all (one thread)"
    applied = [
        "sockets" if sockets else "",
        "no_fork" if no_fork else "",
        "stoppable" if stoppable else "",
        "pdeathsig" if pdeathsig else "",
        "ptrace,bpf,ns,mount",
    ]
    return {"seccomp": ",".join(a for a in applied if a), "seccomp_threads": threads}
