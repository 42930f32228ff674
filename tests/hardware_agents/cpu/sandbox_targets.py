"""Sandbox targets for the sandbox tests (test_sandbox_freeze.py, test_cpu_sandbox.py): children the test
drives with SIGSTOP/SIGCONT, and probes of what the seccomp profile `stoppable` refuses.
They run inside the sandbox (this folder is on the policy's `python_path`)."""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import threading
import time
from pathlib import Path

import msgspec

_libc = ctypes.CDLL(None, use_errno=True)


def stop_loop(payload: bytes, workdir: Path) -> bytes:
    """Stop itself, then do a little work, forever (the parent continues it). Payload "fork":
    first fork a helper that spins; "thread": start a thread that spins; "slow": the work of
    each interval spins for a second; "spawn": each interval starts a thread that spins (and
    stops with the rest at the next stop)."""
    if payload == b"forever":  # one stop, then spins without end
        os.kill(os.getpid(), signal.SIGSTOP)
        while True:
            pass
    if payload == b"spawn":
        while True:
            os.kill(os.getpid(), signal.SIGSTOP)
            threading.Thread(target=_spin, daemon=True).start()
    if payload == b"slow":
        while True:
            os.kill(os.getpid(), signal.SIGSTOP)
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                pass
    if payload == b"fork":
        if os.fork() == 0:
            while True:
                pass
    elif payload == b"thread":
        threading.Thread(target=_spin, daemon=True).start()
    while True:
        os.kill(os.getpid(), signal.SIGSTOP)
        sum(range(20000))


def _spin() -> None:
    while True:
        time.sleep(0)


class Probe(msgspec.Struct):
    results: dict[str, int]  # call -> 0 (allowed) or the errno it failed with


def _err(rc: int) -> int:
    return 0 if rc == 0 else ctypes.get_errno() or errno.EPERM


class _Sigevent(ctypes.Structure):
    _fields_ = [
        ("value", ctypes.c_void_p),
        ("signo", ctypes.c_int),
        ("notify", ctypes.c_int),
        ("pad", ctypes.c_byte * 48),
    ]


def probe_calls(payload: bytes, workdir: Path) -> Probe:
    """What the seccomp filter allows of the calls the profile `stoppable` is about."""
    out: dict[str, int] = {}
    sev = _Sigevent(signo=signal.SIGCONT, notify=0)  # SIGEV_SIGNAL
    timer = ctypes.c_void_p()
    out["timer_create"] = _err(
        _libc.timer_create(1, ctypes.byref(sev), ctypes.byref(timer))
    )  # CLOCK_MONOTONIC
    r, _w = os.pipe()
    out["fcntl_setsig"] = _err(_libc.fcntl(r, 10, signal.SIGCONT))  # F_SETSIG
    out["fcntl_setown"] = _err(_libc.fcntl(r, 8, os.getpid()))  # F_SETOWN
    out["fcntl_getfl"] = 0 if _libc.fcntl(r, 3) >= 0 else ctypes.get_errno()  # F_GETFL: allowed
    mask = (ctypes.c_ulong * 16)()
    mask[0] = (1 << (os.cpu_count() or 1)) - 1
    out["sched_setaffinity"] = _err(_libc.sched_setaffinity(0, ctypes.sizeof(mask), mask))
    out["prctl_pdeathsig"] = _err(_libc.prctl(1, 0, 0, 0, 0))  # PR_SET_PDEATHSIG
    out["prctl_name"] = _err(_libc.prctl(15, b"probe", 0, 0, 0))  # PR_SET_NAME: allowed
    # clone with SIGCONT as the child's exit signal (raw syscall: flags = SIGCONT)
    nr_clone = 56 if os.uname().machine == "x86_64" else 220
    _libc.syscall.restype = ctypes.c_long
    pid = _libc.syscall(nr_clone, signal.SIGCONT, 0, 0, 0, 0)
    if pid == 0:
        os._exit(0)
    out["clone_exit_sigcont"] = 0 if pid > 0 else ctypes.get_errno()
    if pid > 0:
        os.waitpid(pid, 0x40000000)  # __WALL: a child with an exit signal other than SIGCHLD
    child = os.fork()  # plain fork (exit signal SIGCHLD): allowed where no_fork is not set
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
    out["fork"] = 0
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()
    out["thread"] = 0
    return Probe(results=out)


def fill_workdir(payload: bytes, workdir: Path) -> int:
    """Write 1 MiB files into the work dir until a write fails; the bytes written. The last full
    file goes again, so that the sandbox's own report (in the work dir too) fits."""
    block = b"\x5a" * (1 << 20)
    written = 0
    for i in range(int(payload or b"64")):
        try:
            with open(workdir / f"fill-{i}", "wb") as f:
                f.write(block)
        except OSError:
            (workdir / f"fill-{i}").unlink(missing_ok=True)
            (workdir / f"fill-{i - 1}").unlink(missing_ok=True)
            break
        written += len(block)
    return written


class EarlyThread(msgspec.Struct):
    socket_errno: int  # socket() on the thread started before the lockdown: 0 if allowed
    cpus: list[int]  # that thread's CPU affinity
    read_errno: int = -1  # reading the payload's file from that thread: 0 if it read it
    write_errno: int = -1  # creating a file beside it from that thread: 0 if it could


def _errno_of(fn) -> int:  # type: ignore[no-untyped-def]
    try:
        fn()
        return 0
    except OSError as e:
        return e.errno or -1


def probe_early_thread(payload: bytes, workdir: Path) -> EarlyThread:
    """What the thread `early_thread` started before the lockdown may still do."""
    import early_thread

    def try_socket() -> int:  # socket(AF_INET, SOCK_DGRAM, 0) through libc (the module is barred)
        fd = _libc.socket(2, 2, 0)
        if fd < 0:
            return ctypes.get_errno()
        os.close(fd)
        return 0

    def read() -> None:
        with open(payload.decode(), "rb") as f:
            f.read(16)

    def write() -> None:
        with open(os.path.join(os.path.dirname(payload.decode()), f"written-{os.getpid()}"), "wb") as f:
            f.write(b"from the early thread")

    return EarlyThread(
        socket_errno=early_thread.ask(try_socket),
        cpus=sorted(os.sched_getaffinity(early_thread.native_id[0])),
        read_errno=early_thread.ask(lambda: _errno_of(read)) if payload else -1,
        write_errno=early_thread.ask(lambda: _errno_of(write)) if payload else -1,
    )


def list_then_open(payload: bytes, workdir: Path) -> list[int]:
    """[errno of listing the folder (0: listed), errno of opening the named file (0: opened)];
    payload: the folder and a file in it, NUL-separated."""
    folder, name = payload.decode().split("\0")
    out = []
    for attempt in (lambda: os.listdir(folder), lambda: open(os.path.join(folder, name), "rb").close()):
        try:
            attempt()
            out.append(0)
        except OSError as e:
            out.append(e.errno or -1)
    return out


class Attempts(msgspec.Struct):
    main: dict[str, int]  # what -> 0 (done) or the errno
    early: dict[str, int]


def attempt_all(payload: bytes, workdir: Path) -> Attempts:
    """Sandbox target: each attempt of the payload on the main thread and on `early_thread`."""
    import early_thread

    tries = msgspec.json.decode(payload, type=dict[str, list[str]])

    def run() -> dict[str, int]:
        out = {}
        for what, (op, path) in tries.items():
            try:
                if op == "read":
                    with open(path, "rb") as f:
                        f.read(8)
                elif op == "write":
                    with open(path, "wb") as f:
                        f.write(b"x")
                else:
                    os.unlink(path)
                out[what] = 0
            except OSError as e:
                out[what] = e.errno or -1
        return out

    return Attempts(main=run(), early=early_thread.ask(run))


def read_on_masked_thread(payload: bytes, workdir: Path) -> int:
    """Read the payload's file on `early_thread_masked`'s thread: 0, or the errno."""
    import early_thread_masked

    def read() -> None:
        with open(payload.decode(), "rb") as f:
            f.read(16)

    return early_thread_masked.ask(lambda: _errno_of(read))
