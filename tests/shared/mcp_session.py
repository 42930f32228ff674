"""A real `accelopt mcp` server in a subprocess and the real `mcp` client talking to it over
stdio, for the tests of tests/cli/."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

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
