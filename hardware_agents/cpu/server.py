"""The child side of a CPU profile: a kernel server that only executes calls on command.

Runs inside the sandbox (`Sandbox.spawn("hardware_agents.cpu.server:serve", ...)`), after
the lock-down, so the kernel's library (and its constructors) is loaded into a process that
already has no network, no new processes, no reads outside the system trees, and holds
nothing worth forging: no references, no clock the parent reads, no verdict.

    map the input region read-only and the output region read-write (fds inherited)
    load the library, find the entry symbol
    loop: stop itself (SIGSTOP)  <- the parent's clock stops here
          read a command: the buffer sets to call, in order (empty: exit)
          call the kernel once per set

The parent writes each command and the inputs while the child is stopped, starts its
clock, continues the child (SIGCONT) and stops the clock when the child has stopped again:
every thread of the process is frozen outside the timed interval, so no work can be done
before the clock starts or after it ends, and the outputs cannot change while the parent
reads them.
"""

from __future__ import annotations

import ctypes
import os
import signal
from pathlib import Path
from typing import Any, Literal

import msgspec

_PROT_READ, _PROT_WRITE, _MAP_SHARED, _MAP_POPULATE = 1, 2, 1, 0x8000
_CTYPES = {"float32": ctypes.c_float, "float64": ctypes.c_double, "int32": ctypes.c_int32,
           "int64": ctypes.c_int64, "int16": ctypes.c_int16, "int8": ctypes.c_int8, "bool": ctypes.c_bool}


class ServerArg(msgspec.Struct, kw_only=True):
    name: str
    role: Literal["in", "out"]
    dtype: str
    scalar: float | int | bool | None = None  # set: passed by value, not by pointer


class ServerRequest(msgspec.Struct, kw_only=True):
    library: str
    symbol: str
    args: list[ServerArg]
    offsets: list[list[int]]  # per buffer set, per arg: byte offset in its region (-1 for scalars)
    cmd_fd: int
    in_fd: int
    out_fd: int
    in_size: int
    out_size: int


class ServerExit(msgspec.Struct, kw_only=True):
    calls: int


class EntrySymbolMissing(Exception):
    """The library does not export the entry point (reported as a compile error)."""


def _map(libc: Any, fd: int, size: int, prot: int) -> int:
    """Map a buffer region with its page tables filled now (MAP_POPULATE), before the first
    stop: otherwise the first timed calls pay a minor fault per 4 KiB page of the buffers they
    touch first, a cost of this harness (the parent wrote the pages through its own mapping),
    not of the kernel."""
    addr = libc.mmap(None, ctypes.c_size_t(size), prot, _MAP_SHARED | _MAP_POPULATE, fd, ctypes.c_long(0))
    if addr in (None, ctypes.c_void_p(-1).value):
        err = ctypes.get_errno()
        raise OSError(err, f"mmap of a kernel buffer region failed: {os.strerror(err)}")
    os.close(fd)
    return int(addr)


def _read_exact(fd: int, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            raise EOFError("command pipe closed")
        data += chunk
    return data


def serve(payload: bytes, workdir: Path) -> ServerExit:
    """Sandbox target."""
    req = msgspec.msgpack.decode(payload, type=ServerRequest)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    in_base = _map(libc, req.in_fd, req.in_size, _PROT_READ)
    out_base = _map(libc, req.out_fd, req.out_size, _PROT_READ | _PROT_WRITE)
    lib = ctypes.CDLL(req.library)
    try:
        fn = getattr(lib, req.symbol)
    except AttributeError:
        raise EntrySymbolMissing(f"the library does not export `{req.symbol}`") from None
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p if a.scalar is None else _CTYPES[a.dtype] for a in req.args]
    calls: list[list[Any]] = []
    for offs in req.offsets:
        calls.append([a.scalar if a.scalar is not None else (in_base if a.role == "in" else out_base) + off
                      for a, off in zip(req.args, offs, strict=True)])
    decoder = msgspec.msgpack.Decoder(list[int])
    pid = os.getpid()
    n = 0
    while True:
        os.kill(pid, signal.SIGSTOP)
        size = int.from_bytes(_read_exact(req.cmd_fd, 4), "little")
        sets = decoder.decode(_read_exact(req.cmd_fd, size))
        if not sets:
            return ServerExit(calls=n)
        for b in sets:
            fn(*calls[b])
        n += len(sets)
