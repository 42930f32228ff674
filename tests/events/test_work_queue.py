"""Durable pull consumers: competing consumers share work once; unacked work is redelivered."""

from __future__ import annotations

import asyncio

import msgspec

from accelopt import catalog as c
from events.log import EventLog
from events.subjects import role_filter


def _plan_requests(run_id: str, n: int) -> list[c.PlanRequested]:
    return [
        c.PlanRequested(
            event_id=c.derive_event_id(run_id, "PlanRequested", i),
            run_id=run_id,
            ts=0.0,
            problem="p",
            iteration=1,
            candidate_id="k0",
            sample_index=i,
        )
        for i in range(n)
    ]


def test_two_consumers_share_work_without_double_handling(nats_server):
    n = 300

    took = {"a": asyncio.Event(), "b": asyncio.Event()}  # set once a consumer holds a batch

    async def consumer(name: str, other: str, done: asyncio.Event, seen: list[int]) -> None:
        elog = await EventLog.connect(nats_server.url, name=name)
        q = await elog.work_queue("planner", role_filter("PlanRequested"), ack_wait=30)
        while not done.is_set():
            batch = await q.fetch(10, timeout=0.2)
            if batch and not took[name].is_set():
                # hold the first batch, unacked, until the other consumer has one too: both
                # surely take part, however the two are scheduled
                took[name].set()
                await asyncio.wait_for(took[other].wait(), 30)
            for d in batch:
                seen.append(d.event.sample_index)
                await d.ack()
            if len(seen_a) + len(seen_b) >= n:
                done.set()
        await elog.close()

    seen_a: list[int] = []
    seen_b: list[int] = []

    async def go():
        elog = await EventLog.connect(nats_server.url)
        await elog.work_queue("planner", role_filter("PlanRequested"), ack_wait=30)
        done = asyncio.Event()
        tasks = [
            asyncio.create_task(consumer("a", "b", done, seen_a)),
            asyncio.create_task(consumer("b", "a", done, seen_b)),
        ]
        await elog.publish_many(_plan_requests("wq", n))
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        info = await elog.js.consumer_info("ACCELOPT", "planner")
        await elog.close()
        return info

    info = asyncio.run(go())
    assert sorted(seen_a + seen_b) == list(range(n))  # every message once, none twice
    assert seen_a and seen_b  # both consumers took part
    assert info.num_ack_pending == 0 and info.num_redelivered == 0


def test_unacked_message_is_redelivered_to_another_consumer(nats_server):
    async def go():
        elog = await EventLog.connect(nats_server.url)
        await elog.work_queue("executor", role_filter("PlanRequested"), ack_wait=1.0)
        await elog.publish_many(_plan_requests("rd", 1))
        # consumer A takes the message and dies without acking (connection closed hard)
        dying = await EventLog.connect(nats_server.url, name="dying")
        qa = await dying.work_queue("executor", role_filter("PlanRequested"), ack_wait=1.0)
        got_a = await qa.fetch(1, timeout=2)
        await dying.nc.close()
        # consumer B gets it after ack_wait
        survivor = await EventLog.connect(nats_server.url, name="survivor")
        qb = await survivor.work_queue("executor", role_filter("PlanRequested"), ack_wait=1.0)
        got_b = []
        for _ in range(10):
            got_b = await qb.fetch(1, timeout=1)
            if got_b:
                break
        await got_b[0].ack()
        again = await qb.fetch(1, timeout=2)
        await survivor.close()
        await elog.close()
        return got_a, got_b, again

    got_a, got_b, again = asyncio.run(go())
    assert len(got_a) == 1 and len(got_b) == 1
    assert got_b[0].event == got_a[0].event
    assert got_b[0].num_delivered == 2
    assert again == []  # acked: never delivered a third time


def test_bad_message_is_terminated_and_does_not_block(nats_server):
    async def go():
        elog = await EventLog.connect(nats_server.url)
        q = await elog.work_queue("summarizer", role_filter("SummaryRequested"), ack_wait=1.0)
        bad = msgspec.msgpack.encode({"type": "Bogus"})
        await elog.publish_raw("accelopt.bq.summary.requested", bad, "bad-1")
        good = c.SummaryRequested(
            event_id="good-1",
            run_id="bq",
            ts=0.0,
            problem="p",
            iteration=1,
            slow_kernel_id="a",
            fast_kernel_id="b",
            speedup=1.2,
            positive=True,
        )
        await elog.publish(good)
        got = []
        for _ in range(5):
            got += await q.fetch(5, timeout=0.5)
            if got:
                break
        for d in got:
            await d.ack()
        later = await q.fetch(5, timeout=1.5)  # the bad one must not come back
        await elog.close()
        return got, later, q.rejected

    got, later, rejected = asyncio.run(go())
    assert [d.event.event_id for d in got] == ["good-1"]
    assert later == []
    assert (
        len(rejected) == 1 and "accelopt.bq.summary.requested" in rejected[0] and "sequence 1" in rejected[0]
    )
