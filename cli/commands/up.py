"""`accelopt up` / `accelopt down`: a warm pool of agents that the runs of a root attach to.

`accelopt up` starts the log, Ray and one set of agents (LLM roles, profilers, memory) for
the runs under `--root`, records them in `<root>/.pool.json` and stays in the foreground
until Ctrl-C or `accelopt down`. While it is up, `accelopt run` (and `ablate`, `resume`) on
that root attach to it: a run then starts in about a second instead of paying for Ray, the
actors' imports and the embedding model (`benchmarks/startup_bench.py`). See
`actors/runtime/pool.py` for which runs can attach.
"""

from __future__ import annotations

import argparse
import signal
import threading
import time

from rich.markup import escape

from cli.console import wide_console
from cli.errors import error
from cli.options import ROOT_HELP, add_config_args, config_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("up", help="start a warm pool of agents that runs under --root attach to (foreground)")
    p.add_argument(
        "--devices", default="cpu", help="comma-separated device kinds to profile for (default cpu)"
    )
    add_config_args(p)
    p.set_defaults(func=up)
    d = sub.add_parser("down", help="stop the warm pool of --root")
    d.add_argument("--root", default="runs", help=ROOT_HELP)
    d.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the pool to stop")
    d.set_defaults(func=down)


def up(args: argparse.Namespace) -> int:
    from accelopt.config import ConfigError
    from actors.runtime.pool import REVIVE_EVERY_S, AgentPool, forget_pool, read_pool, record_pool
    from actors.runtime.session import RunError, refuse_unisolated

    console = wide_console()
    try:
        cfg = config_from_args(args)
    except ConfigError as e:
        return error(str(e), label="config error:")
    running = read_pool(cfg.root)
    if running is not None:
        return error(
            f"a pool is already up for {cfg.root} (pid {running.pid}): accelopt down --root {cfg.root}"
        )
    devices = sorted({d.strip() for d in args.devices.split(",") if d.strip()})
    try:
        refuse_unisolated(cfg)
    except RunError as e:
        return error(str(e), label="cannot start profilers here:")
    stop = threading.Event()
    t0 = time.monotonic()
    pool = AgentPool(cfg, devices, nats_url=args.nats, ray_address=args.ray_address, log_level=args.log_level)
    with pool as nats_url:
        # after ray.init, which installs a SIGTERM handler of its own that aborts the process
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        record_pool(cfg, nats_url, devices)
        try:
            console.print(
                f"pool up in {time.monotonic() - t0:.1f} s: log {nats_url}, profilers for "
                f"{', '.join(devices)}, memory {'on' if cfg.memory.enabled else 'off'}; runs under "
                f"{cfg.root} attach to it (stop: Ctrl-C or accelopt down --root {cfg.root})",
                highlight=False,
            )
            while not stop.wait(REVIVE_EVERY_S):  # an agent whose actor died for good: started again
                for text in pool.revive():
                    console.print(
                        f"[yellow]agent started again after its actor died for good:[/yellow] {text}"
                    )
                for line in pool.deaths():
                    console.print(f"[yellow]warning:[/yellow] {escape(line)}", highlight=False)
        finally:
            forget_pool(cfg.root)
    console.print("pool stopped")
    return 0


def down(args: argparse.Namespace) -> int:
    import os

    from actors.runtime.pool import read_pool
    from events.runsource import process_alive

    console = wide_console()
    pool = read_pool(args.root)
    if pool is None:
        console.print(f"no pool is up for {args.root}")
        return 1
    os.kill(pool.pid, signal.SIGTERM)
    deadline = time.monotonic() + args.timeout
    while process_alive(pool.pid):  # gone once its agents, Ray and the log server have stopped
        if time.monotonic() > deadline:
            return error(f"the pool (pid {pool.pid}) did not stop within {args.timeout:g} s", 1)
        time.sleep(0.2)
    console.print(f"pool of {args.root} stopped (pid {pool.pid})")
    return 0
