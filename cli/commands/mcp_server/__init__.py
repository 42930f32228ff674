"""`accelopt mcp`: AccelOpt as a Model Context Protocol server for coding agents: the trusted
judge (`profile_kernel`, the sandboxed profiler path of a run) and the shared memory
(`search_memory`) as tools, over stdio (an agent's local config) or streamable HTTP (a team
server; see docs/agents.md). Each server process is one agent session with a log of its own
under --root, read like a run's (`accelopt runs`, `report`, `replay --verify`).

    accelopt mcp                         # stdio
    accelopt mcp --http 127.0.0.1:8765   # streamable HTTP at /mcp
"""

from __future__ import annotations

import argparse
import os
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "mcp",
        help="serve the judge and the memory to coding agents (Model Context Protocol)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--root", default="runs", help="runs directory: session logs go here (default ./runs)")
    p.add_argument(
        "--memory",
        default=None,
        help="memory URI (default: $ACCELOPT_MEMORY, else ROOT/memory, the one `accelopt run` uses)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import anyio

    from cli.errors import error

    try:
        app = build(args.root, args.memory)
    except OSError as e:
        return error(f"--root {args.root}: {e}")
    print(f"accelopt mcp: session {app.session.session_id}, log {app.session.path}", file=sys.stderr)
    with app.session.lock() as lock:
        anyio.run(_serve_stdio, app)
        lock.release(ended="completed", why="the agent session ended")
    return 0


def build(root: str, memory: str | None):  # -> AccelOptMCP (imported lazily: the mcp SDK)
    from actors.runtime.session import new_run_id
    from cli.commands.mcp_server.judge import Judge
    from cli.commands.mcp_server.server import AccelOptMCP, _version
    from cli.commands.mcp_server.session_log import SessionLog
    from memory_index import default_uri, normalize_uri

    uri = normalize_uri(memory or os.environ.get("ACCELOPT_MEMORY") or default_uri(root))
    session = SessionLog(root, new_run_id(), memory_uri=uri, toolchain={"accelopt mcp": _version()})
    return AccelOptMCP(root=root, memory_uri=uri, judge=Judge(), session=session)


async def _serve_stdio(app) -> None:
    from mcp.server.stdio import stdio_server

    server = app.server()
    try:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        await app.judge.close()
