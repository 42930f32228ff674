"""Two `accelopt worker` processes share a run's profiling over one embedded nats-server;
one is killed (-9) while it holds a kernel, which is redelivered to the other, and every
kernel ends up profiled exactly once in the run's results."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections import Counter

from nats.aio.msg import Msg

import suites
from accelopt import catalog as c
from actors.runtime.session import SessionOptions, run_session
from events.log import EventLog
from events.logfile import read_events

STREAM, CONSUMER = "ACCELOPT", "profiler-cpu"


def test_killed_worker_kernel_goes_to_the_other(ray_session, nats_server, run_config, workers, tmp_path):
    url = nats_server.url
    a = workers(url, "wa", tmp_path / "a.log")
    workers(url, "wb", tmp_path / "b.log")
    killed = threading.Event()
    watching = threading.Event()
    stop = threading.Event()
    # every ack of the profiler consumer, seen on its ack subject: (stream seq, delivery number, after the kill)
    acks: list[tuple[int, int, bool]] = []

    def killer() -> None:
        async def watch() -> None:
            elog = await EventLog.connect(url)

            async def on_ack(msg) -> None:  # type: ignore[no-untyped-def]
                md = Msg.Metadata._from_reply(msg.subject)
                if md.stream == STREAM and md.consumer == CONSUMER and msg.data in (Msg.Ack.Ack, b""):
                    acks.append((md.sequence.stream, md.num_delivered, killed.is_set()))

            sub = await elog.nc.subscribe("$JS.ACK.>", cb=on_ack)
            await elog.nc.flush()
            watching.set()
            try:
                while not stop.is_set():
                    if not killed.is_set():
                        info = await elog.js.consumer_info(STREAM, CONSUMER)
                        if (
                            info.num_ack_pending >= 2 and info.delivered.consumer_seq >= 3
                        ):  # both hold a kernel
                            os.killpg(a.pid, signal.SIGSTOP)  # freeze wa, then make sure it still holds one
                            await asyncio.sleep(0.2)
                            info = await elog.js.consumer_info(STREAM, CONSUMER)
                            if info.num_ack_pending >= 2:
                                os.killpg(a.pid, signal.SIGKILL)
                                killed.set()
                            else:
                                os.killpg(a.pid, signal.SIGCONT)
                    await asyncio.sleep(0.05)
                await elog.nc.flush()  # acks the server has already routed to us are read
            finally:
                await sub.unsubscribe()
                await elog.close()

        asyncio.run(watch())

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    assert watching.wait(30), "the ack watcher did not start"
    cfg = run_config(
        "problems=[matmul]",
        "search.iterations=2",
        "search.plans_per_candidate=3",
        "devices.cpu.workers=0",
        "workers.ack_wait_s=4",
        "workers.heartbeat_s=1",
        "memory.enabled=false",
    )  # (the memory is not what this test looks at)
    try:
        outcome = run_session(
            cfg, [suites.get_problem("cpu/matmul")], SessionOptions(nats_url=url, timeout_s=600)
        )
        info = asyncio.run(_settled_consumer(url))
    finally:
        stop.set()
        t.join(30)
    assert killed.is_set(), "never saw both workers busy"
    assert outcome.view.completed is not None
    assert info.num_ack_pending == 0 and info.num_pending == 0

    # every kernel requested was profiled exactly once in the run's results
    events = read_events(outcome.run_dir / "log.aolog")
    requested = [e.event_id for e in events if isinstance(e, c.ProfileRequested)]
    results = [e for e in events if isinstance(e, c.KernelProfiled)]
    profiled = Counter(e.request_id for e in results)
    assert sorted(profiled) == sorted(requested) and set(profiled.values()) == {1}
    assert {e.worker.split("-cpu-")[0] for e in results} <= {"wa", "wb"}

    # the kernel wa held when it was killed: delivered, never acked on its first delivery,
    # redelivered after the kill, acked then; its result is wb's
    by_seq = dict(asyncio.run(_history(url, outcome.run_id)))
    acks = [
        x for x in acks if isinstance(by_seq.get(x[0]), c.ProfileRequested)
    ]  # this run's profile requests
    assert {seq for seq, _, _ in acks} == {
        seq for seq, e in by_seq.items() if isinstance(e, c.ProfileRequested)
    }
    first_delivery_acked = {seq for seq, n, _ in acks if n == 1}
    abandoned = {seq for seq, _, _ in acks} - first_delivery_acked
    assert len(abandoned) == 1, acks
    seq = abandoned.pop()
    assert all(n >= 2 and after for s, n, after in acks if s == seq), acks
    request = by_seq[seq]
    assert isinstance(request, c.ProfileRequested)
    result = [e for e in results if e.request_id == request.event_id]
    assert len(result) == 1 and result[0].worker.split("-cpu-")[0] == "wb", result
    assert result[0].served_from is None  # profiled by wb, not served from a recording


async def _settled_consumer(url: str, timeout_s: float = 60.0):
    """The profiler consumer's info once every delivered message is acked (the last ack may
    follow the result that ended the run)."""
    elog = await EventLog.connect(url)
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                info = await elog.js.consumer_info(STREAM, CONSUMER)
                if info.num_ack_pending == 0:
                    return info
                await asyncio.sleep(0.1)
    finally:
        await elog.close()


async def _history(url: str, run_id: str) -> list[tuple[int, c.Event]]:
    elog = await EventLog.connect(url)
    try:
        return [x async for x in elog.iter_history(run_id)]
    finally:
        await elog.close()


def test_run_without_a_worker_for_its_device_says_so(ray_session, nats_server, run_config):
    cfg = run_config(
        "problems=[matmul]",
        "search.iterations=1",
        "devices.cpu.workers=0",
        "memory.enabled=false",
        "workers.unserved_warn_after_s=2",
    )
    warnings: list[str] = []
    outcome = run_session(
        cfg,
        [suites.get_problem("cpu/matmul")],
        SessionOptions(nats_url=nats_server.url, timeout_s=15, on_warning=warnings.append),
    )
    assert outcome.timed_out and outcome.view.completed is None  # ended by the session's timeout
    assert any("profiler-cpu" in w and "no worker" in w for w in warnings), warnings
