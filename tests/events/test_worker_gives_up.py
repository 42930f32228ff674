"""A request whose every allowed attempt dies without an answer (the worker process killed,
out of memory, its lease lost) is reported as failed on one spare delivery, instead of
JetStream dropping it in silence and the run waiting for it forever."""

from __future__ import annotations

import asyncio

from accelopt import catalog as c
from actors.base.worker import Worker, WorkerOptions
from events.log import EventLog
from events.subjects import role_filter, run_filter

RUN = "giveup"
OPTIONS = WorkerOptions(
    durable="planner",
    filter_subject=role_filter("PlanRequested"),
    ack_wait_s=1.0,
    heartbeat_s=0.3,
    max_deliver=2,
    retry_delay_s=0.1,
    fetch_timeout_s=0.2,
)


class Dies(Worker):
    """Takes a request and never answers (its process is then 'killed': cancelled, closed)."""

    role = "planner"

    def __init__(self, url: str) -> None:
        super().__init__(url, OPTIONS)
        self.took = asyncio.Event()
        self.handled: list[str] = []

    async def handle(self, event: c.Event) -> list[c.Event]:
        self.handled.append(event.event_id)
        self.work = asyncio.current_task()  # the delivery's task: cancelled = died mid-request
        self.took.set()
        await asyncio.Event().wait()
        return []

    async def give_up(self, event: c.Event, error: str) -> list[c.Event]:
        return [
            c.ProposalFailed(
                event_id=c.derive_event_id(RUN, "ProposalFailed", event.event_id),
                run_id=RUN,
                ts=0.0,
                stage="plan",
                request_id=event.event_id,
                problem="p",
                iteration=1,
                reason="gave up",
                detail=error,
            )
        ]


def test_the_spare_delivery_reports_a_request_whose_attempts_all_died(nats_server):
    request = c.PlanRequested(
        event_id=c.derive_event_id(RUN, "PlanRequested", 0),
        run_id=RUN,
        ts=0.0,
        problem="p",
        iteration=1,
        candidate_id="k0",
        sample_index=0,
    )

    async def kill_while_handling(w: Dies) -> None:
        task = asyncio.create_task(w.run())
        await asyncio.wait_for(w.took.wait(), 30)
        # as a kill -9 would: the work in hand ends with no ack, no nak, no more heartbeats
        w.work.cancel()
        w.stop()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 30)
        await w.close()

    async def go():
        elog = await EventLog.connect(nats_server.url)
        dead = [Dies(nats_server.url), Dies(nats_server.url)]
        await dead[0].connect()
        await elog.publish(request)
        for w in dead:  # delivery 1 and 2 (max_deliver): each dies mid-request
            await kill_while_handling(w)
        last = Dies(nats_server.url)  # delivery 3: the spare
        task = asyncio.create_task(last.run())

        async def first_failure() -> c.ProposalFailed:
            async for _s, e, _p in elog.follow(run_filter(RUN), idle_timeout=1):
                if isinstance(e, c.ProposalFailed):
                    return e
            raise AssertionError("the log ended")

        try:
            failed = await asyncio.wait_for(first_failure(), 60)
        except TimeoutError:
            failed = None
        last.stop()
        await asyncio.wait_for(task, 10)
        info = await elog.js.consumer_info("ACCELOPT", "planner")
        await last.close()
        await elog.close()
        return dead, last, failed, info

    dead, last, failed, info = asyncio.run(go())
    assert [w.handled for w in dead] == [[request.event_id], [request.event_id]]
    assert last.handled == []  # the spare delivery is not one more attempt
    assert failed is not None and failed.request_id == request.event_id
    assert "2 deliveries" in failed.detail and "killed" in failed.detail
    assert info.num_ack_pending == 0 and info.num_pending == 0  # acked: nothing left to redeliver
