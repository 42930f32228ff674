"""The loop every work-consuming actor runs: fetch -> handle -> publish results -> ack.

A `Worker` binds to one durable pull consumer (shared by every instance of its role, so
instances compete for messages), handles up to `concurrency` deliveries at once, publishes
the events its handler returns, and only then acks. A crash before the ack leaves the
message to be redelivered after `ack_wait`; while a handler works, a heartbeat
(`in_progress`) keeps the message leased. Result event ids are derived from the request,
so a redelivered request that had already produced results yields de-duplicated publishes,
never a second result.

Subclasses implement `handle(event) -> list[Event]` and optionally `give_up(event, error)`
(the failure events to publish when a request failed on its last allowed delivery).
Ray actors wrap a Worker (see `actors.runtime.hosting`); the class itself is plain asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import traceback
from dataclasses import dataclass
from typing import ClassVar

from accelopt.catalog import Event
from accelopt.logging import get_logger
from events.log import Delivery, EventLog, StreamSettings, WorkQueue

# requests in progress per role across every host of a fleet (JetStream's max_ack_pending)
FLEET_MAX_ACK_PENDING = 4096


@dataclass
class WorkerOptions:
    durable: str
    filter_subject: str
    concurrency: int = 1
    ack_wait_s: float = 30.0
    heartbeat_s: float = 5.0
    max_deliver: int = 5
    retry_delay_s: float = 1.0
    fetch_timeout_s: float = 1.0


@dataclass
class WorkerStats:
    handled: int = 0
    failed: int = 0
    published: int = 0
    busy_s: float = 0.0


class Worker:
    """Base class of the role actors (planner, executor, fixer, summarizer, profiler, curator)."""

    role: ClassVar[str] = "worker"

    def __init__(
        self, nats_url: str, options: WorkerOptions, *, stream: StreamSettings | None = None
    ) -> None:
        self.nats_url = nats_url
        self.options = options
        self.stream = stream
        self.stats = WorkerStats()
        self.log = get_logger(role=self.role, consumer=options.durable)
        self._stop = asyncio.Event() if _has_loop() else None
        self._elog: EventLog | None = None
        self._queue: WorkQueue | None = None
        self.is_ready = False  # connected and started (models loaded): see Deployment.wait_ready

    # --- to implement -----------------------------------------------------------------------

    async def handle(self, event: Event) -> list[Event]:
        raise NotImplementedError

    async def give_up(self, event: Event, error: str) -> list[Event]:
        """Events recording that `event` could not be handled (after the last delivery)."""
        return []

    async def on_start(self, elog: EventLog) -> None:
        """Hook for subclasses: open resources once connected."""

    # --- loop -------------------------------------------------------------------------------

    async def connect(self) -> EventLog:
        if self._elog is None:
            self._elog = await EventLog.connect(
                self.nats_url, settings=self.stream, name=f"accelopt-{self.role}"
            )
            await self._bind()
            await self.on_start(self._elog)
            self.is_ready = True
        return self._elog

    async def _bind(self) -> None:
        assert self._elog is not None
        o = self.options
        # one spare delivery beyond max_deliver: if every allowed attempt died without an
        # answer (killed, out of memory, lease lost), the spare reports the request as failed
        # instead of JetStream dropping it in silence and the run waiting for it forever
        # max_ack_pending bounds the whole consumer, i.e. every host of the role together (each
        # host bounds its own share by fetching only what it can start): sized for a fleet
        self._queue = await self._elog.work_queue(
            o.durable,
            o.filter_subject,
            ack_wait=o.ack_wait_s,
            max_deliver=o.max_deliver + 1,
            max_ack_pending=max(FLEET_MAX_ACK_PENDING, o.concurrency * 4),
        )

    async def _rebind(self) -> None:
        with contextlib.suppress(Exception):
            if self._queue is not None:
                await self._queue.close()
        try:
            await self._bind()
        except Exception as e:
            self._queue = None  # the old subscription is closed: bind again before the next fetch
            self.log.warning("re-binding failed; will retry", error=repr(e))

    async def run(self, *, until_idle_s: float | None = None) -> WorkerStats:
        """Consume until `stop()` (or, if given, until idle for `until_idle_s` seconds)."""
        if self._stop is None:
            self._stop = asyncio.Event()
        await self.connect()
        slots = asyncio.Semaphore(max(1, self.options.concurrency))
        tasks: set[asyncio.Task] = set()

        def done(task: asyncio.Task) -> None:
            tasks.discard(task)
            slots.release()

        idle_since = time.monotonic()
        try:
            while not self._stop.is_set():
                free = slots._value  # free slots: fetch no more than we can start now
                if free == 0:
                    await asyncio.sleep(0.01)
                    continue
                try:
                    if self._queue is None:  # the last re-binding failed
                        await self._bind()
                    assert self._queue is not None
                    deliveries = await self._queue.fetch(free, timeout=self.options.fetch_timeout_s)
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # a lost server or consumer: re-bind and go on, never die
                    self.log.warning("fetch failed; re-binding the consumer", error=repr(e))
                    await asyncio.sleep(0.5)
                    await self._rebind()
                    continue
                if not deliveries:
                    if (
                        until_idle_s is not None
                        and not tasks
                        and time.monotonic() - idle_since > until_idle_s
                    ):
                        break
                    continue
                idle_since = time.monotonic()
                for d in deliveries:
                    await slots.acquire()
                    task = asyncio.create_task(self._process(d))
                    tasks.add(task)
                    task.add_done_callback(done)
        except asyncio.CancelledError:  # killed: abandon the work in hand unacked (redelivered)
            for t in tasks:
                t.cancel()
            raise
        finally:
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
        return self.stats

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    async def close(self) -> None:
        self.stop()
        if self._elog is not None:
            await self._elog.close()
            self._elog = None

    async def _process(self, d: Delivery) -> None:
        assert self._elog is not None
        start = time.monotonic()
        if d.num_delivered > self.options.max_deliver:  # the spare delivery (see _bind)
            await self._give_up_dead(d)
            return
        try:
            async with d.heartbeat(self.options.heartbeat_s):
                outputs = await self.handle(d.event)
            await self._publish(outputs)
            await d.ack()
            self.stats.handled += 1
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the handler failed unexpectedly: retry, then give up loudly
            self.stats.failed += 1
            error = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=8)}"
            last = d.num_delivered >= self.options.max_deliver
            self.log.error(
                "handler failed",
                run_id=d.event.run_id,
                event_type=d.event.type,
                event_id=d.event.event_id,
                delivery=d.num_delivered,
                giving_up=last,
                error=str(e),
            )
            with contextlib.suppress(Exception):
                if last:
                    await self._publish(await self.give_up(d.event, error))
                    await d.ack()
                else:
                    await d.nak(delay=self.options.retry_delay_s)
        finally:
            self.stats.busy_s += time.monotonic() - start

    async def _give_up_dead(self, d: Delivery) -> None:
        attempts = d.num_delivered - 1
        error = (
            f"no worker finished this request in {attempts} deliveries: each attempt ended without an "
            "answer (the worker process was killed, ran out of memory or lost its lease)"
        )
        self.stats.failed += 1
        self.log.error(
            "giving up on a request whose every attempt died",
            run_id=d.event.run_id,
            event_type=d.event.type,
            event_id=d.event.event_id,
            deliveries=attempts,
        )
        with contextlib.suppress(Exception):
            await self._publish(await self.give_up(d.event, error))
            await d.ack()

    async def _publish(self, events: list[Event]) -> None:
        assert self._elog is not None
        for ev in events:
            await self._elog.publish(ev)
        self.stats.published += len(events)


def _has_loop() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        return False
