"""`accelopt mcp`: AccelOpt as a Model Context Protocol server for coding agents: the trusted
judge (`profile_kernel`, the sandboxed profiler path of a run) and the shared memory
(`search_memory`) as tools, over stdio (an agent's local config) or streamable HTTP (a team
server; see docs/agents.md). Each server process is one agent session with a log of its own
under --root, read like a run's (`accelopt runs`, `report`, `replay --verify`).

    accelopt mcp                         # stdio
    accelopt mcp --http 127.0.0.1:8765   # streamable HTTP at /mcp
    ACCELOPT_MCP_TOKEN=... accelopt mcp --http 0.0.0.0:8765   # beyond loopback: a token, always
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
    p.add_argument(
        "--http",
        metavar="HOST:PORT",
        default=None,
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio; beyond loopback only "
        "with a bearer token (--token-env)",
    )
    p.add_argument(
        "--token-env",
        default="ACCELOPT_MCP_TOKEN",
        help="the environment variable holding the bearer token HTTP requests must carry "
        "(default ACCELOPT_MCP_TOKEN; required beyond loopback, enforced wherever it is set)",
    )
    p.add_argument(
        "--session-profiles",
        type=int,
        default=None,
        metavar="N",
        help="at most N profiles (or compares) of one client session running or waiting at once; "
        "more are refused (default: no limit)",
    )
    p.add_argument(
        "--session-device-s",
        type=float,
        default=None,
        metavar="S",
        help="device-seconds one client session may use in all; beyond, its profiles are refused "
        "(default: no limit)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import anyio

    from accelopt.device_queue import Limits
    from cli.commands.mcp_server.http_transport import (
        TokenRuleError,
        check_token_rule,
        parse_listen,
        serve_http,
    )
    from cli.errors import error

    listen = None
    token = os.environ.get(args.token_env) or None
    if args.session_profiles is not None and args.session_profiles < 1:
        return error(f"--session-profiles {args.session_profiles}: give at least 1")
    if args.session_device_s is not None and not args.session_device_s > 0:
        return error(f"--session-device-s {args.session_device_s:g}: give a positive number of seconds")
    limits = Limits(max_in_flight=args.session_profiles, device_s=args.session_device_s)
    if args.http is not None:
        try:
            listen = parse_listen(args.http)
            check_token_rule(listen[0], token, args.token_env)
        except TokenRuleError as e:
            return error(str(e))
    try:
        app = build(args.root, args.memory, limits=limits)
    except OSError as e:
        return error(f"--root {args.root}: {e}")
    where = f"http://{args.http}/mcp" + (" (bearer token required)" if token else "") if listen else "stdio"
    print(
        f"accelopt mcp: session {app.session.session_id} on {where}, log {app.session.path}", file=sys.stderr
    )
    from actors.runtime.signals import unwind_on_sigterm

    unwind_on_sigterm()  # SIGTERM ends the session as its client's leaving does: its log closed, its lock said
    app.memory.warm()  # the index and its embedding model, loaded before the first search
    why = "the agent session ended"
    with app.session.lock() as lock:
        try:
            if listen is None:
                anyio.run(_serve_stdio, app)
            else:
                anyio.run(serve_http, app, listen[0], listen[1], token)
        except KeyboardInterrupt:
            why = "the server was stopped (SIGTERM or Ctrl-C)"
        lock.release(ended="completed", why=why)
    return 0


def build(root: str, memory: str | None, *, limits=None):  # -> AccelOptMCP (imported lazily: the mcp SDK)
    from accelopt.folders import private_folder
    from actors.runtime.session import new_run_id
    from cli.commands.mcp_server.judge import Judge
    from cli.commands.mcp_server.pool_profiles import PoolProfiles
    from cli.commands.mcp_server.queue import SharedQueue
    from cli.commands.mcp_server.server import AccelOptMCP, _version
    from cli.commands.mcp_server.session_log import SessionLog
    from memory_index import default_uri, normalize_uri

    private_folder(root)  # the sessions' logs hold agents' kernels: 0700, as a run's root
    uri = normalize_uri(memory or os.environ.get("ACCELOPT_MEMORY") or default_uri(root))
    tools = {"accelopt mcp": _version()}
    session = SessionLog(root, new_run_id(), memory_uri=uri, toolchain=tools)
    judge = Judge()
    # the device queue: each client's limits and turn, then the pool of `accelopt up` on this root, else the judge
    pool = PoolProfiles(root, str(uri), session.session_id, tools)
    queue = SharedQueue(judge, root=root, server=session.session_id, limits=limits, pool=pool)
    return AccelOptMCP(root=root, memory_uri=uri, judge=judge, session=session, queue=queue)


async def _serve_stdio(app) -> None:
    from mcp.server.stdio import stdio_server

    server = app.server()
    try:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        await app.queue.close()
