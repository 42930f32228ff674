"""Event-log throughput and hop latency on a real nats-server.

- publish: N acked events through `publish_many` (pipelined acks);
- consume: the same N through a durable pull consumer (fetch batches, ack each);
- hop latency at low load: one event at a time, publish -> delivery to a waiting consumer.

Usage: python benchmarks/events_bench.py [--n 20000] [--latency-samples 500]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import median, percentile, save

import accelopt  # noqa: F401
from accelopt import catalog as c
from events.log import EventLog
from events.server import NatsServer
from events.subjects import role_filter


def make_events(run_id: str, n: int) -> list[c.PlanRequested]:
    return [
        c.PlanRequested(
            event_id=c.derive_event_id(run_id, "PlanRequested", i),
            run_id=run_id,
            ts=0.0,
            problem="matmul",
            iteration=1,
            candidate_id="k0",
            sample_index=i,
        )
        for i in range(n)
    ]


async def throughput(url: str, n: int, trials: int) -> dict:
    elog = await EventLog.connect(url)
    pub_rates, con_rates = [], []
    for t in range(trials):
        durable = f"bench-{t}"
        q = await elog.work_queue(
            durable, role_filter("PlanRequested", run_id=f"tp{t}"), max_ack_pending=20000
        )
        events = make_events(f"tp{t}", n)
        t0 = time.perf_counter()
        res = await elog.publish_many(events)
        pub_s = time.perf_counter() - t0
        assert len(res) == n and not any(r.duplicate for r in res)
        got = 0
        t0 = time.perf_counter()
        while got < n:
            batch = await q.fetch(1000, timeout=2.0)
            for d in batch:
                await d.ack_nowait()
            got += len(batch)
        await elog.nc.flush()
        con_s = time.perf_counter() - t0
        pub_rates.append(n / pub_s)
        con_rates.append(n / con_s)
        print(f"trial {t}: publish {n / pub_s:,.0f} ev/s, consume+ack {n / con_s:,.0f} ev/s")
    await elog.close()
    return {
        "publish_events_per_s": median(pub_rates),
        "consume_events_per_s": median(con_rates),
        "publish_trials": pub_rates,
        "consume_trials": con_rates,
    }


async def hop_latency(url: str, samples: int) -> dict:
    pub = await EventLog.connect(url, name="bench-pub")
    sub = await EventLog.connect(url, name="bench-sub")
    q = await sub.work_queue("bench-lat", role_filter("PlanRequested", run_id="lat"))
    lat_ms: list[float] = []
    received: asyncio.Queue[float] = asyncio.Queue()

    async def consume() -> None:
        while True:
            for d in await q.fetch(1, timeout=5.0):
                received.put_nowait(time.perf_counter())
                await d.ack_nowait()

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.2)
    for ev in make_events("lat", samples):
        t0 = time.perf_counter()
        await pub.publish(ev)
        t1 = await asyncio.wait_for(received.get(), 5)
        lat_ms.append((t1 - t0) * 1000)
        await asyncio.sleep(0.002)  # low load: one event in flight
    task.cancel()
    await pub.close()
    await sub.close()
    return {
        "hop_latency_ms_p50": percentile(lat_ms, 50),
        "hop_latency_ms_p99": percentile(lat_ms, 99),
        "hop_latency_samples": samples,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--latency-samples", type=int, default=500)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        server = NatsServer(Path(d) / "nats")
        server.start()
        try:
            tp = asyncio.run(throughput(server.url, args.n, args.trials))
            lat = asyncio.run(hop_latency(server.url, args.latency_samples))
        finally:
            server.stop()
    figures = {
        "n_events": args.n,
        **tp,
        **lat,
        "targets": {"publish_events_per_s": ">= 10000", "hop_latency_ms_p99": "< 5"},
    }
    print(
        f"publish {tp['publish_events_per_s']:,.0f} ev/s | consume {tp['consume_events_per_s']:,.0f} ev/s | "
        f"hop p50 {lat['hop_latency_ms_p50']:.2f} ms p99 {lat['hop_latency_ms_p99']:.2f} ms"
    )
    save("events_bench", figures)


if __name__ == "__main__":
    main()
