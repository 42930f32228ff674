"""A real `accelopt mcp` server in a subprocess and the real `mcp` client talking to it over
stdio, for the tests of tests/cli/."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

REPO = Path(__file__).resolve().parents[2]
ACCELOPT = str(Path(sys.executable).with_name("accelopt"))


@asynccontextmanager
async def stdio_session(root: Path, *extra: str, name: str = "pytest-agent") -> AsyncIterator[Client]:
    from mcp_types import Implementation

    params = StdioServerParameters(
        command=ACCELOPT,
        args=["mcp", "--root", str(root), *extra],
        cwd=str(REPO),
        env={
            k: v for k, v in os.environ.items() if k.startswith(("ACCELOPT", "PYTHON", "PATH", "HOME", "XDG"))
        },
    )
    async with Client(params, client_info=Implementation(name=name, version="1.0")) as client:
        yield client


@contextmanager
def warm_pool(
    root: Path, memory: Path, timeout_s: float = 300
) -> Iterator[tuple[Any, subprocess.Popen[bytes]]]:
    """A warm pool of `accelopt up` on `root` (the memory off): its `PoolInfo` once it wrote its
    record, and its process; `accelopt down` when done."""
    import time

    from actors.runtime.pool import read_pool

    env = {k: v for k, v in os.environ.items() if k != "ACCELOPT_MEMORY"}
    env["ACCELOPT_LOG_LEVEL"] = "ERROR"
    pool = subprocess.Popen(
        [ACCELOPT, "up", "--root", str(root), "--memory", str(memory), "--set", "memory.enabled=false"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + timeout_s
        while (info := read_pool(root)) is None:
            if pool.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the pool did not come up")
            time.sleep(0.2)
        yield info, pool
    finally:
        subprocess.run([ACCELOPT, "down", "--root", str(root)], cwd=REPO, timeout=120)
        pool.wait(120)


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def worker_pids() -> set[int]:
    """The pids of the judge workers of the servers this test process started."""
    found = set()
    for pid in descendants(os.getpid()):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"cli.commands.mcp_server.worker" in cmd and alive(pid):
            found.add(pid)
    return found


def descendants(pid: int) -> set[int]:
    """Every process below `pid` (by parent links in /proc)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rpartition(")")[2].split()[1])
            children.setdefault(ppid, []).append(int(d.name))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def http_server(root: Path, listen: str, token: str | None) -> Iterator[subprocess.Popen[str]]:
    """`accelopt mcp --http LISTEN` with `token` in its environment, until it answers HTTP."""
    import time

    import httpx2

    env = {k: v for k, v in os.environ.items() if k != "ACCELOPT_MCP_TOKEN"}
    if token is not None:
        env["ACCELOPT_MCP_TOKEN"] = token
    proc = subprocess.Popen(
        [ACCELOPT, "mcp", "--root", str(root), "--http", listen], cwd=REPO, env=env, text=True
    )
    port = listen.rpartition(":")[2]
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx2.get(f"http://127.0.0.1:{port}/mcp", timeout=2)
                break
            except httpx2.TransportError:
                assert proc.poll() is None, "the server exited"
                assert time.monotonic() < deadline, "the server did not listen"
                time.sleep(0.2)
        yield proc
    finally:
        proc.terminate()
        proc.wait(30)


@asynccontextmanager
async def http_session(
    url: str, token: str | None, name: str = "pytest-http-agent", mode: str = "auto"
) -> AsyncIterator[Client]:
    """A client of `url`; `mode` "legacy": the initialize handshake, a session the server gives
    an `mcp-session-id` (the default: the stateless protocol, each request on its own)."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp_types import Implementation

    headers = {"Authorization": f"Bearer {token}"} if token else None
    transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
    async with Client(transport, client_info=Implementation(name=name, version="1.0"), mode=mode) as client:
        yield client
