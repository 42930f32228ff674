"""Confinement is a property of the process: apply a Landlock domain to every thread.

Landlock's `landlock_restrict_self` confines the calling thread only, unless the kernel has
TSYNC (ABI 8). A library imported before the lockdown may already have started threads (a
BLAS pool, a CUDA driver's helpers), and untrusted code can run on them later (OpenBLAS runs
a queued routine on its worker; CUDA runs a host function on its own thread): an unconfined
thread is a way out of the sandbox for the whole process.

Without TSYNC, every other thread is made to confine itself: a signal handler, a few bytes
of machine code that call no library (async-signal-safe by construction), runs on the thread
`prctl(PR_SET_NO_NEW_PRIVS)` then `landlock_restrict_self(ruleset_fd, 0)` and counts its
result in a page the caller reads. The caller signals one thread at a time (`tgkill`) and
waits for its answer, so each answer belongs to the thread it was sent to; a thread that
does not answer (stuck in the kernel, or the signal blocked) or whose call failed makes the
whole confinement fail, and the child refuses to run (fail closed). Threads started while
this runs are seen by a second census and confined in turn; a thread started by a confined
thread inherits its domain (and gets a second, identical layer: harmless).

The signal is glibc's own thread-cancellation signal (32), borrowed for the moment through
the raw `rt_sigaction` (glibc's `sigaction` refuses it) and given back after: glibc removes
it from every mask a thread sets through `pthread_sigmask`/`sigprocmask`, so a library thread
that blocks "all signals" (as driver threads do) still answers. Only a thread that blocked it
with the raw system call cannot, and then the child refuses.

The handler is written for x86_64; elsewhere a process with more than one thread at the
lockdown cannot be confined without TSYNC and fails closed.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import threading
import time

from hardware_agents.sandbox.libc import memory_libc

_libc = memory_libc()
_libc.syscall.restype = ctypes.c_long

_SYS_TGKILL = {"x86_64": 234, "aarch64": 131}
_PROT_READ, _PROT_WRITE, _PROT_EXEC = 1, 2, 4
_MAP_PRIVATE, _MAP_ANONYMOUS = 0x02, 0x20
_SA_RESTART = 0x10000000
_PAGE = os.sysconf("SC_PAGESIZE")
# glibc's SIGCANCEL: no pthread_sigmask can block it (see the module doc)
CONFINE_SIGNAL = 32
ANSWER_TIMEOUT_S = 2.0
_SYS_RT_SIGACTION = 13  # x86_64
_SA_RESTORER = 0x04000000
_RESTORER_OFFSET = 128  # of the code page: `mov eax, SYS_rt_sigreturn; syscall`


class ThreadConfinementError(OSError):
    """Some thread of the process could not be confined: no untrusted code may run."""


def thread_ids() -> list[int]:
    """The ids of this process's threads (empty when /proc cannot say)."""
    try:
        return sorted(int(t) for t in os.listdir("/proc/self/task"))
    except OSError:
        return []


def _handler_code(ruleset_fd: int, slots: int) -> bytes:
    """x86_64: prctl(NO_NEW_PRIVS, 1, 0, 0, 0); rax = landlock_restrict_self(fd, 0);
    lock inc [slots] if rax == 0 else lock inc [slots + 8]; ret. Touches only caller-saved
    registers and no memory but the two counters (errno included: no libc call)."""
    return b"".join(
        (
            b"\xb8" + struct.pack("<I", 157),  # mov eax, SYS_prctl
            b"\xbf" + struct.pack("<I", 38),  # mov edi, PR_SET_NO_NEW_PRIVS
            b"\xbe" + struct.pack("<I", 1),  # mov esi, 1
            b"\x31\xd2",  # xor edx, edx
            b"\x45\x31\xd2",  # xor r10d, r10d
            b"\x45\x31\xc0",  # xor r8d, r8d
            b"\x0f\x05",  # syscall
            b"\xb8" + struct.pack("<I", 446),  # mov eax, SYS_landlock_restrict_self
            b"\xbf" + struct.pack("<I", ruleset_fd),  # mov edi, ruleset_fd
            b"\x31\xf6",  # xor esi, esi (flags)
            b"\x0f\x05",  # syscall
            b"\x48\xb9" + struct.pack("<Q", slots),  # movabs rcx, slots
            b"\x48\x85\xc0",  # test rax, rax
            b"\x75\x05",  # jne failed
            b"\xf0\x48\xff\x01",  # lock inc qword [rcx]      (confined)
            b"\xc3",  # ret
            b"\xf0\x48\xff\x41\x08",  # failed: lock inc qword [rcx+8]
            b"\xc3",  # ret
        )
    )


class _KernelSigaction(ctypes.Structure):  # the kernel's struct sigaction on x86_64
    _fields_ = [
        ("handler", ctypes.c_void_p),
        ("flags", ctypes.c_ulong),
        ("restorer", ctypes.c_void_p),
        ("mask", ctypes.c_ulong),
    ]


_RESTORER_CODE = b"\xb8" + struct.pack("<I", 15) + b"\x0f\x05"  # mov eax, SYS_rt_sigreturn; syscall


def _map(size: int) -> int:
    addr = _libc.mmap(None, size, _PROT_READ | _PROT_WRITE, _MAP_PRIVATE | _MAP_ANONYMOUS, -1, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        raise ThreadConfinementError(ctypes.get_errno(), "mmap failed")
    return int(addr)


def _set_action(act: _KernelSigaction) -> _KernelSigaction:
    """rt_sigaction(CONFINE_SIGNAL, act) through the raw system call; the action it replaced."""
    old = _KernelSigaction()
    rc = _libc.syscall(
        _SYS_RT_SIGACTION, CONFINE_SIGNAL, ctypes.byref(act), ctypes.byref(old), ctypes.c_size_t(8)
    )
    if rc != 0:
        raise ThreadConfinementError(ctypes.get_errno(), "rt_sigaction failed")
    return old


def confine_other_threads(ruleset_fd: int) -> list[int]:
    """Have every thread but the caller apply the Landlock ruleset `ruleset_fd` to itself
    (see the module doc). Returns the ids of the threads confined; raises
    ThreadConfinementError when one could not be. Call after no_new_privs is set on the
    caller and before the caller restricts itself (the handler needs the open ruleset)."""
    me = threading.get_native_id()
    others = [t for t in thread_ids() if t != me]
    if not others:
        return []
    arch = platform.machine()
    if arch != "x86_64":
        raise ThreadConfinementError(
            f"{len(others)} other thread(s) started before the lockdown and this kernel's Landlock "
            f"has no TSYNC; confining them is implemented on x86_64 only (this is {arch})"
        )
    slots = _map(_PAGE)
    code_page = _map(_PAGE)
    code = _handler_code(ruleset_fd, slots)
    ctypes.memmove(code_page, code, len(code))
    ctypes.memmove(code_page + _RESTORER_OFFSET, _RESTORER_CODE, len(_RESTORER_CODE))
    if _libc.mprotect(code_page, _PAGE, _PROT_READ | _PROT_EXEC) != 0:
        raise ThreadConfinementError(ctypes.get_errno(), "mprotect failed")
    # the pages stay mapped: a thread may still be between its count and its `ret`
    ok = ctypes.c_uint64.from_address(slots)
    failed = ctypes.c_uint64.from_address(slots + 8)
    previous = _set_action(
        _KernelSigaction(
            handler=code_page,
            flags=_SA_RESTORER | _SA_RESTART,
            restorer=code_page + _RESTORER_OFFSET,
            mask=(1 << 64) - 1,  # nothing interrupts the handler
        )
    )
    confined: list[int] = []
    try:
        for _ in range(4):  # threads started meanwhile are seen by the next census
            pending = [t for t in thread_ids() if t != me and t not in confined]
            if not pending:
                return confined
            for tid in pending:
                before_ok, before_failed = ok.value, failed.value
                if _libc.syscall(_SYS_TGKILL[arch], os.getpid(), tid, CONFINE_SIGNAL) != 0:
                    if not os.path.exists(f"/proc/self/task/{tid}"):
                        continue  # it ended: nothing left to confine
                    raise ThreadConfinementError(ctypes.get_errno(), f"cannot signal thread {tid}")
                deadline = time.monotonic() + ANSWER_TIMEOUT_S
                while ok.value == before_ok and failed.value == before_failed:
                    if time.monotonic() > deadline:
                        if not os.path.exists(f"/proc/self/task/{tid}"):
                            break  # it ended before it could answer
                        raise ThreadConfinementError(
                            f"thread {tid} ({_thread_name(tid)}) did not confine itself within "
                            f"{ANSWER_TIMEOUT_S:.0f} s (signal {CONFINE_SIGNAL} blocked by a raw "
                            "rt_sigprocmask, or the thread is stuck in the kernel)"
                        )
                    time.sleep(0.0005)
                if failed.value != before_failed:
                    raise ThreadConfinementError(
                        f"thread {tid} ({_thread_name(tid)}): landlock_restrict_self failed"
                    )
                if ok.value != before_ok:
                    confined.append(tid)
        raise ThreadConfinementError("threads kept starting while the process was being confined")
    finally:
        _set_action(previous)  # glibc's own action again


def _thread_name(tid: int) -> str:
    try:
        with open(f"/proc/self/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"
