"""The child side of a CPU profile: a kernel server that only executes calls on command.

Runs inside the sandbox (`Sandbox.spawn("hardware_agents.cpu.server:serve", ...)`), after
the lock-down, so the kernel's library (and its constructors) is loaded into a process that
already has no network, no new processes, no reads outside the system trees, and holds
nothing worth forging: no references, no clock the parent reads, no verdict.

    map the input region read-only and the output region read-write (fds inherited)
    load the library, find the entry symbol
    loop: stop itself (SIGSTOP)  <- the parent's clock stops here
          read a command: call the kernel once per listed buffer set, in order; or
          populate the page tables of the listed sets (before the parent times them);
          or do nothing (the parent measures the handshake alone); or exit

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

from hardware_agents.sandbox import memory_libc

_PROT_READ, _PROT_WRITE, _MAP_SHARED = 1, 2, 1
_MADV_POPULATE_READ, _MADV_POPULATE_WRITE = 22, 23
_PAGE = os.sysconf("SC_PAGE_SIZE")
_CTYPES = {
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
    "int32": ctypes.c_int32,
    "int64": ctypes.c_int64,
    "int16": ctypes.c_int16,
    "int8": ctypes.c_int8,
    "bool": ctypes.c_bool,
}


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
    in_stride: int  # bytes of one buffer set in the input region (set b starts at b * in_stride)
    out_stride: int
    cmd_fd: int
    in_fd: int
    out_fd: int
    in_size: int
    out_size: int


class ServerCommand(msgspec.Struct, array_like=True):
    kind: Literal["call", "populate", "noop", "exit"]
    sets: list[int] = []


class ServerExit(msgspec.Struct, kw_only=True):
    calls: int


class EntrySymbolMissing(Exception):
    """The library does not export the entry point (reported as a compile error)."""


def _map(libc: Any, fd: int, size: int, prot: int) -> int:
    """Map a buffer region. Its pages are not touched here: the region has room for more
    buffer sets than a profile may use, and the parent asks for the sets it will time to be
    populated (`_populate`) once it knows how many."""
    addr = libc.mmap(None, ctypes.c_size_t(size), prot, _MAP_SHARED, fd, ctypes.c_long(0))
    if addr in (None, ctypes.c_void_p(-1).value):
        err = ctypes.get_errno()
        raise OSError(err, f"mmap of a kernel buffer region failed: {os.strerror(err)}")
    os.close(fd)
    return int(addr)


def _populate(libc: Any, base: int, start: int, length: int, advice: int) -> None:
    """Fill the page tables of a range now (MADV_POPULATE_*, Linux >= 5.14): otherwise the
    first timed call on a buffer pays a minor fault per 4 KiB page it touches first, a cost
    of this harness (the parent wrote the pages through its own mapping), not of the kernel.
    Older kernels: touch one byte per page."""
    lo = (base + start) // _PAGE * _PAGE
    hi = -(-(base + start + length) // _PAGE) * _PAGE
    if libc.madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), advice) == 0:
        return
    view = (ctypes.c_ubyte * (hi - lo)).from_address(lo)
    for off in range(0, hi - lo, _PAGE):
        _ = view[off]


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
    libc = memory_libc()
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
        calls.append(
            [
                a.scalar if a.scalar is not None else (in_base if a.role == "in" else out_base) + off
                for a, off in zip(req.args, offs, strict=True)
            ]
        )
    decoder = msgspec.msgpack.Decoder(ServerCommand)
    pid = os.getpid()
    n = 0
    while True:
        os.kill(pid, signal.SIGSTOP)
        size = int.from_bytes(_read_exact(req.cmd_fd, 4), "little")
        cmd = decoder.decode(_read_exact(req.cmd_fd, size))
        if cmd.kind == "exit":
            return ServerExit(calls=n)
        if cmd.kind == "populate":
            for b in cmd.sets:
                _populate(libc, in_base, b * req.in_stride, req.in_stride, _MADV_POPULATE_READ)
                _populate(libc, out_base, b * req.out_stride, req.out_stride, _MADV_POPULATE_WRITE)
        elif cmd.kind == "call":
            for b in cmd.sets:
                fn(*calls[b])
            n += len(cmd.sets)
