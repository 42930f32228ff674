"""`accelopt worker`: join a running deployment from this host.

Starts profiler actors for one device kind (and optionally LLM roles) in this process;
they bind to the same durable consumers as every other instance of their role, so they
share the work of every run on that log. One kernel at a time per profiler (a device
lease); a heartbeat keeps the lease while it profiles, and if this host dies its kernel is
redelivered to another worker after `--ack-wait` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket

from cli.console import wide_console
from cli.errors import error
from cli.options import add_set_arg


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "worker", help="start profiler (and LLM role) actors on this host for a running deployment"
    )
    p.add_argument(
        "--nats", required=True, help="NATS URL(s) of the deployment, comma-separated for a cluster"
    )
    p.add_argument("--device", default="cpu", help="device kind to profile for (cpu, h100, trn1, ...)")
    p.add_argument(
        "--count",
        type=int,
        default=1,
        help="profiler actors; with more than one, profiler i takes device slot i of this host "
        "(GPU i, NeuronCore i: its device family's slots)",
    )
    p.add_argument(
        "--roles",
        default="profiler",
        help="comma-separated roles to run here: profiler, planner, executor, fixer, summarizer",
    )
    p.add_argument("--config", help="YAML config (LLM settings for agent roles)")
    add_set_arg(
        p,
        "a config key of this host's agents (repeatable), e.g. --set profiling.timeout_s=900: profiling.*, "
        "workers.*, devices.<kind>.* (docs/cluster.md)",
    )
    p.add_argument("--ack-wait", type=float, help="seconds before unacked work is redelivered")
    p.add_argument("--heartbeat", type=float, help="seconds between lease heartbeats")
    p.add_argument("--name", help="worker name recorded in KernelProfiled (default host-pid)")
    p.add_argument(
        "--idle-exit", type=float, help="exit after this many idle seconds (default: run until stopped)"
    )
    p.set_defaults(func=run)


def build_workers(args: argparse.Namespace) -> list:
    from accelopt import catalog as ev
    from accelopt.config import build_config
    from actors.runtime.deployment import llm_role_options, profiler_options
    from actors.runtime.hosting import build
    from hardware_agents.families import device_slot, profile_timeout_s

    overrides = list(args.overrides)
    if args.ack_wait is not None:
        overrides.append(f"workers.ack_wait_s={args.ack_wait}")
    if args.heartbeat is not None:
        overrides.append(f"workers.heartbeat_s={args.heartbeat}")
    cfg = build_config(file=args.config, overrides=overrides)
    name = args.name or f"{socket.gethostname()}-{os.getpid()}"
    workers = []
    for role in [r.strip() for r in args.roles.split(",") if r.strip()]:
        if role == "profiler":
            for i in range(args.count):
                workers.append(
                    build(
                        "profiler",
                        {
                            "nats_url": args.nats,
                            "device": args.device,
                            "timeout_s": profile_timeout_s(args.device, cfg.profiling),
                            "worker_name": f"{name}-{args.device}-{i}",
                            "options": profiler_options(args.device, cfg),
                            "agent_options": {
                                **(cfg.devices[args.device].options if args.device in cfg.devices else {}),
                                **device_slot(args.device, i, args.count),
                            },
                        },
                    )
                )
        elif ev.is_llm_role(role):
            workers.append(
                build(
                    role,
                    {"nats_url": args.nats, "llm_config": cfg.llm, "options": llm_role_options(role, cfg)},
                )
            )
        else:
            raise SystemExit(f"unknown role {role!r}; choose from profiler, {', '.join(ev.LLM_ROLES)}")
    return workers


async def serve(workers: list, idle_exit: float | None, console) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, lambda: [w.stop() for w in workers])
    for w in workers:
        await w.connect()
    console.print(
        f"worker ready: {len(workers)} actor(s): "
        + ", ".join(f"{w.role}[{w.options.durable}]" for w in workers),
        highlight=False,
    )
    try:
        await asyncio.gather(*(w.run(until_idle_s=idle_exit) for w in workers))
    finally:
        for w in workers:
            await w.close()


def run(args: argparse.Namespace) -> int:
    console = wide_console()
    try:
        workers = build_workers(args)
    except Exception as e:
        return error(str(e), label="cannot start worker:")
    asyncio.run(serve(workers, args.idle_exit, console))
    for w in workers:
        console.print(
            f"{w.role}[{w.options.durable}]: handled {w.stats.handled}, failed {w.stats.failed}",
            highlight=False,
        )
    return 0
