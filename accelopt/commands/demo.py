"""`accelopt demo`: the main job on embedded defaults.

Starts an embedded NATS JetStream server, writes a run's events to the log, reads the run
back from sequence 1 and prints what happened.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from events import catalog as c
from events.log import EventLog
from events.server import NatsServer


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the main job on embedded defaults")
    p.set_defaults(func=run)


async def _demo(url: str, run_id: str) -> list[tuple[int, c.Event]]:
    def env(kind: str, *key: object) -> dict:
        return {"event_id": c.derive_event_id(run_id, kind, *key), "run_id": run_id, "ts": time.time()}

    events = [
        c.IterationStarted(**env("IterationStarted", 0), problem="matmul", iteration=0, beam=["baseline"]),
        c.PlanRequested(**env("PlanRequested", 0), problem="matmul", iteration=0, candidate_id="baseline",
                        sample_index=0),
        c.IterationCompleted(**env("IterationCompleted", 0), problem="matmul", iteration=0,
                             best_kernel_id="baseline", best_latency_ms=1.0),
        c.RunCompleted(**env("RunCompleted"), reason="demo"),
    ]
    elog = await EventLog.connect(url)
    try:
        await elog.publish_many(events)
        await elog.publish(events[0])  # a retried publish: de-duplicated by its event id
        return [item async for item in elog.iter_history(run_id)]
    finally:
        await elog.close()


def run(args: argparse.Namespace) -> int:
    console = Console()
    with tempfile.TemporaryDirectory(prefix="accelopt-demo-") as d:
        server = NatsServer(Path(d) / "nats")
        server.start()
        console.print(f"embedded NATS JetStream at {server.url}")
        try:
            history = asyncio.run(_demo(server.url, "demo"))
        finally:
            server.stop()
    table = Table(title="run demo, read back from the log")
    for col in ("seq", "type", "event_id"):
        table.add_column(col)
    for seq, ev in history:
        table.add_row(str(seq), ev.type, ev.event_id[:12])
    console.print(table)
    return 0
