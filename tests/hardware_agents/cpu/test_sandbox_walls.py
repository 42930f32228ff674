"""Each wall of the sandbox on its own: the child tries what the wall forbids, where nothing
but that wall stands in its way (the other walls that would also stop it are taken down),
and must get that wall's own refusal; a control run with the wall down too shows the same
attempt succeeding, seen from here (a datagram or a connection that arrives, a file read or
written). So each test fails if its wall is gone, and cannot pass because something else
happened to be in the way (nothing listening, a path the sandbox uid cannot reach anyway).

    wall                       alone when                          refusal
    Landlock TCP rule          no netns, sockets allowed           connect(): EACCES
    seccomp `sockets`          no netns                            socket(): EPERM
    network namespace          sockets allowed (Landlock governs   sendto() 127.0.0.1: ENETUNREACH
                               TCP only: UDP tests it)             (the host's loopback is not there)
    Landlock reads             (DAC lets the sandbox uid read)     open(): EACCES
    Landlock writes            (a directory anyone may write)      open(): EACCES

A run whose walls fall short of what untrusted code requires runs under `allow_unisolated`.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from wall_targets import Attempts, Tried

from hardware_agents.sandbox import Sandbox, SandboxPolicy, allow_unisolated, landlock

HERE = str(Path(__file__).resolve().parent)

pytestmark = pytest.mark.skipif(landlock.abi_version() < 1, reason="Landlock not available on this kernel")


def _attempt(req: Attempts, *, unisolated: bool = False, **policy: object) -> Tried:
    """`req` tried in a sandboxed child with the default policy changed by `policy`."""
    pol = SandboxPolicy(wall_timeout_s=30, python_path=(HERE,), **policy)
    with allow_unisolated(unisolated), Sandbox(pol) as box:
        out = box.run("wall_targets:attempt", req)
    assert out.status == "ok", f"{out.status}: {out.error}\n{out.log}"
    return out.decode(Tried)


@pytest.fixture
def udp() -> Iterator[socket.socket]:
    """A UDP socket of the test on the loopback, for the child's datagrams."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        s.setblocking(False)
        yield s


@pytest.fixture
def tcp() -> Iterator[socket.socket]:
    """A TCP listener of the test on the loopback, for the child's connections."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        s.setblocking(False)
        yield s


def _datagrams(s: socket.socket) -> list[bytes]:
    """What arrived at `s` (the child has ended: a loopback datagram is queued by then)."""
    got: list[bytes] = []
    while True:
        try:
            got.append(s.recv(4096))
        except BlockingIOError:
            return got


def _connections(s: socket.socket) -> list[bytes]:
    """What each connection made to the listener `s` sent (the child has ended)."""
    got: list[bytes] = []
    while True:
        try:
            conn, _ = s.accept()
        except BlockingIOError:
            return got
        with conn:
            conn.settimeout(5.0)
            got.append(conn.recv(4096))


def _port(s: socket.socket) -> int:
    return int(s.getsockname()[1])


@pytest.mark.skipif(landlock.abi_version() < 4, reason="Landlock governs TCP from ABI 4")
def test_landlock_refuses_a_tcp_connection_to_a_listener_in_reach(tcp: socket.socket) -> None:
    # no network namespace and sockets allowed: only Landlock's TCP rule stands between the
    # child and the test's listener
    walls_down = {"isolate_network": False, "block_sockets": False}
    tried = _attempt(Attempts(tcp_port=_port(tcp)), unisolated=True, **walls_down)
    assert tried.errnos == {"tcp_connect": errno.EACCES}
    assert _connections(tcp) == []
    control = _attempt(Attempts(tcp_port=_port(tcp)), unisolated=True, landlock=False, **walls_down)
    assert control.errnos == {"tcp_connect": 0}
    assert _connections(tcp) == [b"from the sandbox over TCP"]


def test_seccomp_refuses_sockets(udp: socket.socket, tcp: socket.socket) -> None:
    # no network namespace: the test's UDP socket is in reach, and Landlock does not govern UDP
    req = Attempts(udp_port=_port(udp), tcp_port=_port(tcp))
    tried = _attempt(req, isolate_network=False)  # isolated: socket() is refused
    assert tried.errnos == {"udp_socket": errno.EPERM, "tcp_connect": errno.EPERM}
    assert _datagrams(udp) == []
    control = _attempt(
        Attempts(udp_port=_port(udp)), unisolated=True, isolate_network=False, block_sockets=False
    )
    assert control.errnos == {"udp_socket": 0, "udp_send": 0}
    assert _datagrams(udp) == [b"from the sandbox over UDP"]


@pytest.mark.skipif(os.geteuid() != 0, reason="a network namespace needs root")
def test_the_network_namespace_leaves_the_hosts_loopback_out_of_reach(udp: socket.socket) -> None:
    # sockets allowed and UDP (which Landlock does not govern): only the namespace stands
    # between the child and the test's socket
    req = Attempts(udp_port=_port(udp))
    tried = _attempt(req, block_sockets=False)  # isolated: the child's own network namespace
    assert tried.errnos == {"udp_socket": 0, "udp_send": errno.ENETUNREACH}
    assert _datagrams(udp) == []
    control = _attempt(req, unisolated=True, block_sockets=False, isolate_network=False)
    assert control.errnos == {"udp_socket": 0, "udp_send": 0}
    assert _datagrams(udp) == [b"from the sandbox over UDP"]


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory outside every tree the sandbox may read or write, that its uid may enter
    and write (mode 0777): only Landlock keeps the child out of it."""
    path = Path(tempfile.mkdtemp(prefix="accelopt-walls-", dir="/tmp"))
    try:
        path.chmod(0o777)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_landlock_refuses_reads_outside_the_allowed_trees(open_dir: Path) -> None:
    secret = open_dir / "answers.txt"
    secret.write_bytes(b"the answers " + uuid.uuid4().hex.encode())
    secret.chmod(0o644)
    allowed = os.__file__  # the standard library: a tree the child may read
    req = Attempts(read=[str(secret), allowed])
    tried = _attempt(req)
    assert tried.errnos == {f"read {secret}": errno.EACCES, f"read {allowed}": 0}
    assert tried.read == {allowed: Path(allowed).read_bytes()[:4096]}
    control = _attempt(req, unisolated=True, restrict_reads=False)
    assert control.errnos == {f"read {secret}": 0, f"read {allowed}": 0}
    assert control.read[str(secret)] == secret.read_bytes()


def test_landlock_refuses_writes_outside_the_work_dir(open_dir: Path) -> None:
    tag = uuid.uuid4().hex
    outside = [str(open_dir / "x"), f"/dev/shm/accelopt-escape-{tag}", f"/tmp/accelopt-escape-{tag}"]
    req = Attempts(write=["inside.txt", *outside])  # relative: in the work dir, the child's cwd
    try:
        with Sandbox(SandboxPolicy(wall_timeout_s=30, python_path=(HERE,))) as box:
            out = box.run("wall_targets:attempt", req)
            assert out.status == "ok", out.error
            assert (box.workdir / "inside.txt").read_text() == "from the sandbox"
        assert out.decode(Tried).errnos == {
            "write inside.txt": 0,
            **{f"write {p}": errno.EACCES for p in outside},
        }
        assert not any(Path(p).exists() for p in outside)
        control = _attempt(Attempts(write=outside), unisolated=True, landlock=False)
        assert control.errnos == {f"write {p}": 0 for p in outside}
        assert all(Path(p).read_text() == "from the sandbox" for p in outside)
    finally:
        for p in outside:
            Path(p).unlink(missing_ok=True)
