"""A sandbox target for the tests of the sandbox's walls (test_sandbox_walls.py): the child
tries what one wall forbids and reports each attempt's errno (0: it worked), so a test can
tell the wall's own refusal (EACCES from Landlock, EPERM from seccomp, ENETUNREACH in a
network namespace of its own) from anything else that fails. Runs inside the sandbox (this
folder is on the policy's `python_path`); imported before the lockdown, as every target is.
"""

from __future__ import annotations

import encodings.idna  # noqa: F401  (socket may need it; an import after the drop may be refused)
import socket
from collections.abc import Callable
from pathlib import Path

import msgspec


class Attempts(msgspec.Struct, kw_only=True):
    tcp_port: int = 0  # connect to 127.0.0.1:tcp_port
    udp_port: int = 0  # a UDP socket, then a datagram to 127.0.0.1:udp_port
    read: list[str] = []  # open and read these files
    write: list[str] = []  # create these files


class Tried(msgspec.Struct, kw_only=True):
    errnos: dict[str, int]  # what was tried -> 0 (done) or the errno it failed with
    read: dict[str, bytes] = {}  # what it read of each file it could open


def _errno(fn: Callable[[], object]) -> int:
    try:
        fn()
        return 0
    except OSError as e:
        return e.errno or -1


def attempt(payload: bytes, workdir: Path) -> Tried:
    """Try each thing the payload (`Attempts`) names."""
    req = msgspec.msgpack.decode(payload, type=Attempts)
    out: dict[str, int] = {}
    got: dict[str, bytes] = {}
    if req.tcp_port:

        def connect() -> None:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.settimeout(5.0)
                s.connect(("127.0.0.1", req.tcp_port))
                s.sendall(b"from the sandbox over TCP")

        out["tcp_connect"] = _errno(connect)
    if req.udp_port:
        try:
            udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        except OSError as e:
            out["udp_socket"] = e.errno or -1
        else:
            out["udp_socket"] = 0
            with udp:
                out["udp_send"] = _errno(
                    lambda: udp.sendto(b"from the sandbox over UDP", ("127.0.0.1", req.udp_port))
                )
    for path in req.read:

        def read(path: str = path) -> None:
            with open(path, "rb") as f:
                got[path] = f.read(4096)

        out[f"read {path}"] = _errno(read)
    for path in req.write:

        def write(path: str = path) -> None:
            with open(path, "x") as f:
                f.write("from the sandbox")

        out[f"write {path}"] = _errno(write)
    return Tried(errnos=out, read=got)


__all__ = ["Attempts", "Tried", "attempt"]
