"""Two `accelopt worker` processes share a run's profiling over one embedded nats-server;
one is killed (-9) while it holds a kernel, which is redelivered to the other, and every
kernel ends up profiled exactly once in the run's results."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections import Counter

import suites
from actors.session import run_session
from events import catalog as c
from events.log import EventLog
from events.logfile import read_events


def test_killed_worker_kernel_goes_to_the_other(ray_session, nats_server, run_config, workers, tmp_path):
    url = nats_server.url
    a = workers(url, "wa", tmp_path / "a.log")
    workers(url, "wb", tmp_path / "b.log")
    killed = threading.Event()
    stop = threading.Event()

    def killer() -> None:
        async def watch() -> None:
            elog = await EventLog.connect(url)
            try:
                while not stop.is_set():
                    info = await elog.js.consumer_info("ACCELOPT", "profiler-cpu")
                    if info.num_ack_pending >= 2 and info.delivered.consumer_seq >= 3:  # both hold a kernel
                        os.killpg(a.pid, signal.SIGKILL)
                        killed.set()
                        return
                    await asyncio.sleep(0.05)
            finally:
                await elog.close()

        asyncio.run(watch())

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    cfg = run_config("problems=[matmul]", "search.iterations=2", "search.plans_per_candidate=3",
                     "devices.cpu.workers=0", "workers.ack_wait_s=4", "workers.heartbeat_s=1")
    try:
        outcome = run_session(cfg, [suites.get_problem("cpu/matmul")], nats_url=url, timeout_s=600)
    finally:
        stop.set()
        t.join(10)
    assert killed.is_set(), "never saw both workers busy"
    assert outcome.view.completed is not None
    events = read_events(outcome.run_dir / "log.aolog")
    requested = [e.kernel_id for e in events if isinstance(e, c.ProfileRequested)]
    profiled = Counter(e.kernel_id for e in events if isinstance(e, c.KernelProfiled))
    assert sorted(profiled) == sorted(requested) and set(profiled.values()) == {1}
    by_worker = Counter(e.worker.split("-cpu-")[0] for e in events if isinstance(e, c.KernelProfiled))
    assert by_worker["wb"] > 0 and by_worker["wa"] >= 0
    info = asyncio.run(_consumer(url))
    assert info.num_redelivered >= 1 or info.delivered.consumer_seq > len(requested), \
        "the killed worker's kernel was not redelivered"
    assert info.num_ack_pending == 0 and info.num_pending == 0


async def _consumer(url: str):
    elog = await EventLog.connect(url)
    try:
        await asyncio.sleep(0.1)
        return await elog.js.consumer_info("ACCELOPT", "profiler-cpu")
    finally:
        await elog.close()


def test_run_without_a_worker_for_its_device_says_so(ray_session, nats_server, run_config):
    cfg = run_config("problems=[matmul]", "search.iterations=1", "devices.cpu.workers=0")
    warnings: list[str] = []
    start = time.monotonic()
    outcome = run_session(cfg, [suites.get_problem("cpu/matmul")], nats_url=nats_server.url, timeout_s=35,
                          on_warning=warnings.append)
    assert outcome.timed_out and outcome.view.completed is None
    assert time.monotonic() - start < 120
    assert any("profiler-cpu" in w and "no worker" in w for w in warnings), warnings
