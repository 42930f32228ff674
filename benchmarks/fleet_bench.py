"""Profiling throughput of 1 vs 2 `accelopt worker` processes on the CPU suite, and the
fleet's own overhead per profile: (KernelProfiled.ts - ProfileRequested.ts) minus the
profile's wall time inside the hardware agent, measured one request at a time.

Every problem of the CPU suite is profiled `--reps` times as distinct kernels (a comment
makes each source unique, so the profilers' cache serves nothing). A real nats-server and
real worker processes; no coordinator (requests are published directly).

Usage: python benchmarks/fleet_bench.py [--reps 2] [--latency-samples 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import msgspec
from _common import median, percentile, save

import accelopt  # noqa: F401
import suites
from accelopt import catalog as c
from accelopt.config import build_config
from events.log import EventLog
from events.server import NatsServer
from events.subjects import run_filter


def start_workers(url: str, n: int, logdir: Path) -> list[subprocess.Popen]:
    procs = []
    env = {**os.environ, "ACCELOPT_LOG_LEVEL": "ERROR"}
    for i in range(n):
        log = open(logdir / f"w{i}.log", "w")  # noqa: SIM115
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "cli.main",
                    "worker",
                    "--nats",
                    url,
                    "--device",
                    "cpu",
                    "--name",
                    f"w{i}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        )
    for i, _ in enumerate(procs):
        while "worker ready" not in (logdir / f"w{i}.log").read_text():
            time.sleep(0.2)
    return procs


def run_started(run_id: str, problems) -> c.RunStarted:
    cfg = build_config()
    targets = [
        c.ProblemTarget(problem=p, device="cpu", language="c", content_hash=p.content_hash())
        for p in problems
    ]
    return c.RunStarted(
        event_id=c.derive_event_id(run_id, "RunStarted"),
        run_id=run_id,
        ts=time.time(),
        config=cfg.to_dict(),
        seed=0,
        targets=targets,
    )


def requests(run_id: str, problems, reps: int) -> list[c.ProfileRequested]:
    out = []
    for r in range(reps):
        for p in problems:
            src = p.baseline.entry_file().content + f"\n/* variant {run_id} {r} */\n"
            kid = c.derive_event_id(run_id, "Kernel", p.name, r)
            out.append(
                c.ProfileRequested(
                    event_id=c.derive_event_id(run_id, "ProfileRequested", kid),
                    run_id=run_id,
                    ts=time.time(),
                    kernel_id=kid,
                    problem=p.name,
                    device="cpu",
                    language="c",
                    source=src,
                )
            )
    return out


async def wait_results(elog: EventLog, run_id: str, n: int, timeout: float = 1800) -> list[c.KernelProfiled]:
    got: list[c.KernelProfiled] = []
    deadline = time.monotonic() + timeout
    async for _s, e, _p in elog.follow(run_filter(run_id), idle_timeout=0.5):
        if isinstance(e, c.KernelProfiled):
            got.append(e)
            if len(got) >= n:
                return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(got)} of {n} profiles after {timeout}s")
    return got


async def throughput(url: str, problems, reps: int, tag: str) -> dict:
    elog = await EventLog.connect(url)
    run_id = f"tp-{tag}"
    await elog.publish(run_started(run_id, problems))
    reqs = requests(run_id, problems, reps)
    t0 = time.monotonic()
    await elog.publish_many(reqs)
    results = await wait_results(elog, run_id, len(reqs))
    wall = time.monotonic() - t0
    await elog.close()
    statuses: dict[str, int] = {}
    for r in results:
        statuses[r.profile.status] = statuses.get(r.profile.status, 0) + 1
    return {
        "profiles": len(results),
        "wall_s": wall,
        "profiles_per_min": 60 * len(results) / wall,
        "statuses": statuses,
        "workers_used": sorted({r.worker for r in results}),
    }


async def hop_latency(url: str, problems, samples: int) -> dict:
    elog = await EventLog.connect(url)
    run_id = "lat"
    await elog.publish(run_started(run_id, problems))
    over: list[float] = []
    for i, req in enumerate(requests(run_id, problems[:1], samples)):
        t0 = time.time()
        req = msgspec.structs.replace(req, ts=t0)
        await elog.publish(req)
        results = await wait_results(elog, run_id, i + 1)
        res = next(r for r in results if r.request_id == req.event_id)
        over.append((res.ts - t0 - res.profile.wall_s) * 1000)
    await elog.close()
    return {"overhead_ms_p50": median(over), "overhead_ms_p99": percentile(over, 99), "samples": samples}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--latency-samples", type=int, default=10)
    args = ap.parse_args()
    problems = suites.load_suite("cpu")
    figures: dict = {"problems": len(problems), "reps": args.reps}
    with tempfile.TemporaryDirectory() as d:
        server = NatsServer(Path(d) / "nats")
        server.start()
        try:
            for n in (1, 2):
                procs = start_workers(server.url, n, Path(d))
                try:
                    if n == 1:
                        figures["hop"] = asyncio.run(hop_latency(server.url, problems, args.latency_samples))
                        print(
                            f"fleet overhead per profile: p50 {figures['hop']['overhead_ms_p50']:.1f} ms, "
                            f"p99 {figures['hop']['overhead_ms_p99']:.1f} ms"
                        )
                    tp = asyncio.run(throughput(server.url, problems, args.reps, f"w{n}"))
                    figures[f"workers_{n}"] = tp
                    print(
                        f"{n} worker(s): {tp['profiles']} profiles in {tp['wall_s']:.1f} s = "
                        f"{tp['profiles_per_min']:.1f}/min {tp['statuses']}"
                    )
                finally:
                    for p in procs:
                        p.terminate()
                    for p in procs:
                        p.wait(30)
        finally:
            server.stop()
    figures["scaling_ratio_2_over_1"] = (
        figures["workers_2"]["profiles_per_min"] / figures["workers_1"]["profiles_per_min"]
    )
    print(f"scaling 2 workers / 1 worker: {figures['scaling_ratio_2_over_1']:.2f}x (2 cores, one machine)")
    save("fleet_bench", figures)


if __name__ == "__main__":
    main()
