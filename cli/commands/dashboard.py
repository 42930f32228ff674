"""`accelopt dashboard`: a local, read-only web page that follows runs live (the event
stream) and shows finished ones (exported logs under --root). See docs/dashboard.md."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dashboard", help="a live web dashboard of runs (read-only, local)")
    p.add_argument(
        "--port", type=int, default=8765, help="port to listen on (default 8765; 0: any free port)"
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1; any other address needs --token)",
    )
    p.add_argument(
        "--nats",
        help="NATS URL of the event log to follow (default: the root's embedded server, whenever one is up)",
    )
    p.add_argument("--root", default="runs", help="runs directory with exported logs (default ./runs)")
    p.add_argument(
        "--token",
        default="",
        help="a secret every request must carry (?token=, X-AccelOpt-Token header or the cookie the page "
        "sets); required with a non-loopback --host",
    )
    p.set_defaults(func=run)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_args(args: argparse.Namespace) -> str | None:
    """Why these arguments are refused, or None."""
    if not 0 <= args.port <= 65535:
        return f"--port {args.port}: not a port number"
    if not is_loopback(args.host) and not args.token:
        return (
            f"--host {args.host} exposes the dashboard beyond this machine: give --token SECRET too "
            "(every request must then carry it)"
        )
    if args.token and len(args.token) < 8:
        return "--token: use at least 8 characters"
    return None


async def serve(args: argparse.Namespace) -> None:
    from replay.dashboard.server import DashboardServer

    server = DashboardServer(args.root, nats_url=args.nats, host=args.host, port=args.port, token=args.token)
    await server.start()
    where = server.url + (f"/?token={args.token}" if args.token else "/")
    source = args.nats or f"the embedded server of {args.root} when one is up"
    print(
        f"AccelOpt dashboard on {where} (runs under {args.root}, live runs from {source}); Ctrl-C stops it",
        flush=True,
    )
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()


def run(args: argparse.Namespace) -> int:
    why = check_args(args)
    if why:
        print(f"accelopt dashboard: {why}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(args))
    except OSError as e:  # the port is taken, the address is not ours
        print(f"accelopt dashboard: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
        return 1
    return 0
