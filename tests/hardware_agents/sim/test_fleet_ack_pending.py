"""A role's durable consumer is shared by every host of a fleet, so its in-progress limit
(JetStream's max_ack_pending) must fit the fleet, and a later, larger worker must be able
to raise a limit an earlier one created (found by benchmarks/scale_bench.py: a consumer
made by a one-profile host held a 64-profile host to 4). Real nats-server."""

from __future__ import annotations

import asyncio
import time

from actors.base.worker import FLEET_MAX_ACK_PENDING, Worker, WorkerOptions
from events.log import EventLog


def test_binding_raises_an_existing_consumers_limit_never_lowers_it(shared_nats):
    durable = f"acktest-{time.time_ns()}"

    async def go():
        elog = await EventLog.connect(shared_nats.url)
        await elog.ensure_stream()
        await elog.work_queue(durable, "accelopt.acktest.>", max_ack_pending=4)  # an old, small consumer
        small = (await elog.js.consumer_info(elog.settings.name, durable)).config.max_ack_pending
        await elog.work_queue(durable, "accelopt.acktest.>", max_ack_pending=64)
        raised = (await elog.js.consumer_info(elog.settings.name, durable)).config.max_ack_pending
        await elog.work_queue(durable, "accelopt.acktest.>", max_ack_pending=8)
        kept = (await elog.js.consumer_info(elog.settings.name, durable)).config.max_ack_pending
        w = Worker(shared_nats.url, WorkerOptions(durable=durable, filter_subject="accelopt.acktest.>"))
        await w.connect()
        fleet = (await elog.js.consumer_info(elog.settings.name, durable)).config.max_ack_pending
        await w.close()
        await elog.close()
        return small, raised, kept, fleet

    assert asyncio.run(go()) == (4, 64, 64, FLEET_MAX_ACK_PENDING)
