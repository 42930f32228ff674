"""The JetStream log client: the one way AccelOpt components read and write events.

- one stream (`ACCELOPT`, subjects `accelopt.>`, limits retention, file storage);
- publish with `Nats-Msg-Id` = run id + event id, so a retried publish is de-duplicated,
  and `Accelopt-Sum` = a BLAKE2b-128 of the event bytes, checked by every reader (a damaged
  message is a `StreamIntegrityError` naming its stream sequence; an export never copies
  one into a file, whose own hash chain would otherwise seal it);
- durable pull consumers per role (competing consumers, explicit ack, redelivery after
  `ack_wait`), wrapped as `WorkQueue`;
- a run's history in order from any sequence, and live following of a run;
- export of a run to one file and import back (see `events.logfile`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec
import nats
import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js import api

from accelopt.catalog import Event, msg_id
from accelopt.logging import get_logger
from events import logfile
from events.codec import SUM_HEADER, EventDecodeError, StreamIntegrityError, checksum, decode, encode
from events.subjects import ALL_EVENTS, PREFIX, STREAM, check_run_id, run_filter, subject_for

log = get_logger(component="eventlog")
T = TypeVar("T")

_TRANSIENT = (
    nats.errors.TimeoutError,
    nats.errors.NoRespondersError,
    nats.js.errors.NoStreamResponseError,
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.OutboundBufferLimitError,
    nats.js.errors.ServiceUnavailableError,
    asyncio.TimeoutError,
)
PUB_ACK_TIMEOUT_S = 5.0  # how long a publish waits for JetStream's ack before it publishes again
CONSUMER_RETRY_S = 60.0  # how long a reader retries creating its consumer on transient errors


async def _retrying(call: Callable[[], Awaitable[T]], retry_for: float) -> T:
    """`call()`, made again after a back-off (doubling from 50 ms, at most 1 s) while it fails
    on a transient error (a reconnect; a cluster electing a stream leader after it lost a
    node), for up to `retry_for` seconds; then its last error propagates."""
    deadline = time.monotonic() + retry_for
    delay = 0.05
    while True:
        try:
            return await call()
        except _TRANSIENT:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)


def verify_message(msg: Msg) -> None:
    """Raise StreamIntegrityError when a message carries a checksum its bytes do not match
    (messages published before checksums carry none and pass)."""
    want = (msg.headers or {}).get(SUM_HEADER)
    if want is not None and want != checksum(msg.data or b""):
        seq = msg.metadata.sequence.stream if msg.reply else None
        raise StreamIntegrityError(msg.subject, seq)


CONSUMER_CHECK_S = 3.0  # how long a follower waits without news before it checks its consumer still exists


class PublishResult(msgspec.Struct, frozen=True):
    seq: int
    duplicate: bool


@dataclass
class StreamSettings:
    name: str = STREAM
    replicas: int = 1
    duplicate_window_s: float = 3600.0
    max_age_s: float = 0.0
    max_bytes: int = -1


class Delivery:
    """One work message handed to a consumer: the decoded event plus its ack handles."""

    def __init__(self, msg: Msg, event: Event) -> None:
        self.msg = msg
        self.event = event

    @property
    def seq(self) -> int:
        return self.msg.metadata.sequence.stream

    @property
    def num_delivered(self) -> int:
        return self.msg.metadata.num_delivered

    async def ack(self) -> None:
        """Ack and wait for the server to confirm it (no second delivery after this returns)."""
        await self.msg.ack_sync(timeout=5.0)

    async def ack_nowait(self) -> None:
        await self.msg.ack()

    async def nak(self, delay: float | None = None) -> None:
        await self.msg.nak(delay=delay)

    async def term(self) -> None:
        await self.msg.term()

    async def in_progress(self) -> None:
        await self.msg.in_progress()

    @contextlib.asynccontextmanager
    async def heartbeat(self, interval: float) -> AsyncIterator[None]:
        """Tell the server the work goes on every `interval` s, so ack_wait can stay short.

        A host that dies stops the heartbeat and its message is redelivered after ack_wait.
        """

        async def beat() -> None:
            while True:
                await asyncio.sleep(interval)
                with contextlib.suppress(Exception):
                    await self.msg.in_progress()

        task = asyncio.create_task(beat())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


@dataclass
class WorkQueue:
    """A durable pull consumer shared by all instances of one role (competing consumers)."""

    log: EventLog
    durable: str
    filter_subject: str
    sub: Any
    rejected: list[str] = field(default_factory=list)

    async def fetch(self, batch: int = 1, timeout: float = 1.0) -> list[Delivery]:
        """Up to `batch` deliveries; [] when none arrived within `timeout` seconds.

        A message that is not a valid event is terminated (never redelivered) and logged
        with its subject and sequence, so one bad message cannot block a role.
        """
        try:
            msgs = await self.sub.fetch(batch, timeout=timeout)
        except (TimeoutError, nats.errors.TimeoutError):
            return []
        out: list[Delivery] = []
        for msg in msgs:
            try:
                verify_message(msg)
                event = decode(msg.data, msg.subject, msg.metadata.sequence.stream)
            except (EventDecodeError, StreamIntegrityError) as e:
                self.rejected.append(str(e))
                log.error("bad event terminated", consumer=self.durable, error=str(e))
                with contextlib.suppress(Exception):
                    await msg.term()
                continue
            out.append(Delivery(msg, event))
        return out

    async def info(self) -> api.ConsumerInfo:
        return await self.log.js.consumer_info(self.log.settings.name, self.durable)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.sub.unsubscribe()


class EventLog:
    """Connection to the event log. Create with `await EventLog.connect(url)`."""

    def __init__(self, nc: nats.NATS, settings: StreamSettings) -> None:
        self.nc = nc
        self.js = nc.jetstream(timeout=10.0)
        self.settings = settings

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        settings: StreamSettings | None = None,
        create: bool = True,
        name: str = "accelopt",
        connect_timeout: float = 5.0,
    ) -> EventLog:
        async def quiet(_: Exception) -> None:
            return None

        servers = [u.strip() for u in url.split(",") if u.strip()]
        try:
            # nats-py retries the *first* connection forever when reconnects are unlimited:
            # bound it, so a dead server is an error rather than a hang
            nc = await asyncio.wait_for(
                nats.connect(
                    servers=servers,
                    name=name,
                    connect_timeout=connect_timeout,
                    allow_reconnect=True,
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=0.25,
                    error_cb=quiet,
                    pending_size=64 * 1024 * 1024,
                ),
                timeout=connect_timeout + 1.0,
            )
        except TimeoutError as e:
            raise ConnectionError(
                f"cannot connect to NATS at {url}: no answer within {connect_timeout + 1:.0f}s"
            ) from e
        except Exception as e:
            raise ConnectionError(f"cannot connect to NATS at {url}: {type(e).__name__}: {e}") from e
        elog = cls(nc, settings or StreamSettings())
        if create:
            await elog.ensure_stream()
        return elog

    async def close(self) -> None:
        # flush + close rather than drain: drain can wait out its 30 s timeout on idle pull
        # subscriptions, and nothing here needs draining (acks and publishes are awaited)
        with contextlib.suppress(Exception):
            await self.nc.flush(timeout=2)
        with contextlib.suppress(Exception):
            await self.nc.close()

    async def __aenter__(self) -> EventLog:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- stream ---------------------------------------------------------------------------

    async def ensure_stream(self, timeout: float = 30.0) -> api.StreamInfo:
        """Create the stream, or verify that the existing one can hold the log."""
        s = self.settings
        deadline = time.monotonic() + timeout
        while True:
            try:
                try:
                    info = await self.js.stream_info(s.name)
                except nats.js.errors.NotFoundError:
                    config = api.StreamConfig(
                        name=s.name,
                        subjects=[ALL_EVENTS],
                        retention=api.RetentionPolicy.LIMITS,
                        storage=api.StorageType.FILE,
                        num_replicas=s.replicas,
                        duplicate_window=s.duplicate_window_s,
                        max_age=s.max_age_s,
                        max_bytes=s.max_bytes,
                        discard=api.DiscardPolicy.OLD,
                    )
                    return await self.js.add_stream(config)
                break
            except (*_TRANSIENT, nats.js.errors.APIError) as e:
                if time.monotonic() > deadline:
                    raise ConnectionError(f"JetStream not available for stream {s.name}: {e}") from e
                await asyncio.sleep(0.25)
        cfg = info.config
        problems = []
        if ALL_EVENTS not in (cfg.subjects or []):
            problems.append(f"subjects {cfg.subjects} do not include {ALL_EVENTS!r}")
        if cfg.storage != api.StorageType.FILE:
            problems.append("storage is not file")
        if cfg.retention != api.RetentionPolicy.LIMITS:
            problems.append(f"retention is {cfg.retention}, need limits")
        if problems:
            raise RuntimeError(
                f"stream {s.name} exists but cannot hold the event log: " + "; ".join(problems)
            )
        return info

    async def stream_info(self) -> api.StreamInfo:
        return await self.js.stream_info(self.settings.name)

    # --- publishing -----------------------------------------------------------------------

    async def publish(self, event: Event, *, retry_for: float = 60.0) -> PublishResult:
        """Publish one event and wait for the stream's ack; retried on transient errors.

        Retrying is safe: the message id is the event id, so the stream keeps one copy.
        """
        return await self.publish_raw(
            subject_for(event), encode(event), msg_id(event.run_id, event.event_id), retry_for=retry_for
        )

    async def publish_raw(
        self, subject: str, data: bytes, msg_id: str, *, retry_for: float = 60.0
    ) -> PublishResult:
        try:
            ack = await _retrying(
                lambda: self.js.publish(
                    subject,
                    data,
                    headers={"Nats-Msg-Id": msg_id, SUM_HEADER: checksum(data)},
                    stream=self.settings.name,
                    timeout=PUB_ACK_TIMEOUT_S,
                ),
                retry_for,
            )
        except _TRANSIENT as e:
            raise ConnectionError(f"publish to {subject} failed for {retry_for:.0f}s: {e!r}") from e
        return PublishResult(seq=ack.seq, duplicate=bool(ack.duplicate))

    async def publish_many(self, events: Iterable[Event], *, window: int = 1000) -> list[PublishResult]:
        """Publish a batch with pipelined acks (much faster than one round trip each)."""
        return await self._publish_pipelined(
            ((subject_for(ev), encode(ev), msg_id(ev.run_id, ev.event_id)) for ev in events), window=window
        )

    async def _publish_pipelined(
        self, items: Iterable[tuple[str, bytes, str]], *, window: int = 1000
    ) -> list[PublishResult]:
        results: list[PublishResult] = []
        pending: list[tuple[tuple[str, bytes, str], asyncio.Future]] = []

        async def settle() -> None:
            for item, fut in pending:
                try:
                    # nats-py never fails the future of an ack that does not come (a message lost
                    # with the server it went to): bound the wait like a single publish's
                    ack = await asyncio.wait_for(fut, PUB_ACK_TIMEOUT_S)
                    results.append(PublishResult(seq=ack.seq, duplicate=bool(ack.duplicate)))
                except Exception:  # lost in a reconnect: publish again, the id de-duplicates
                    results.append(await self.publish_raw(*item))
            pending.clear()

        for item in items:
            subject, data, msg_id = item
            fut = await self.js.publish_async(
                subject,
                data,
                headers={"Nats-Msg-Id": msg_id, SUM_HEADER: checksum(data)},
                stream=self.settings.name,
            )
            pending.append((item, fut))
            if len(pending) >= window:
                await settle()
        await settle()
        return results

    # --- work queues ----------------------------------------------------------------------

    async def work_queue(
        self,
        durable: str,
        filter_subject: str,
        *,
        ack_wait: float = 60.0,
        max_deliver: int = 20,
        max_ack_pending: int = 1000,
    ) -> WorkQueue:
        """Bind to (or create) the durable pull consumer `durable` on `filter_subject`."""
        config = api.ConsumerConfig(
            durable_name=durable,
            ack_policy=api.AckPolicy.EXPLICIT,
            deliver_policy=api.DeliverPolicy.ALL,
            ack_wait=ack_wait,
            max_deliver=max_deliver,
            max_ack_pending=max_ack_pending,
            filter_subject=filter_subject,
        )
        await self._raise_ack_pending(durable, max_ack_pending)
        sub = await self.js.pull_subscribe(
            filter_subject, durable=durable, stream=self.settings.name, config=config
        )
        return WorkQueue(self, durable, filter_subject, sub)

    async def _raise_ack_pending(self, durable: str, max_ack_pending: int) -> None:
        """Binding to an existing durable keeps its config, so a limit set by the first
        worker of a role would cap the whole fleet: raise it (never lower it) to what this
        worker asks for."""
        try:
            info = await self.js.consumer_info(self.settings.name, durable)
        except nats.js.errors.NotFoundError:
            return
        if (info.config.max_ack_pending or 0) < max_ack_pending:
            config = dataclasses.replace(info.config, max_ack_pending=max_ack_pending)
            await self.js.add_consumer(self.settings.name, config)

    # --- reading --------------------------------------------------------------------------

    async def _ephemeral(self, filter_subject: str, from_seq: int) -> Any:
        config = api.ConsumerConfig(
            ack_policy=api.AckPolicy.NONE,
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=max(1, from_seq),
            filter_subject=filter_subject,
            inactive_threshold=60.0,
            mem_storage=True,
        )
        # creating a consumer is a request to the stream's leader: after a node of a cluster is
        # lost it times out until a new leader is elected (seconds), as a publish does
        return await _retrying(
            lambda: self.js.pull_subscribe(
                filter_subject, durable=None, stream=self.settings.name, config=config
            ),
            CONSUMER_RETRY_S,
        )

    async def iter_raw(
        self, filter_subject: str, *, from_seq: int = 1, batch: int = 1000
    ) -> AsyncIterator[Msg]:
        """Every stored message matching `filter_subject` from `from_seq`, in stream order."""
        info = await self.js.stream_info(self.settings.name)
        if info.state.last_seq < from_seq:
            return
        sub = await self._ephemeral(filter_subject, from_seq)
        try:
            cinfo = await sub.consumer_info()
            if cinfo.num_pending == 0:
                return
            while True:
                try:
                    msgs = await sub.fetch(batch, timeout=2.0)
                except (TimeoutError, nats.errors.TimeoutError):
                    if (await sub.consumer_info()).num_pending == 0:
                        return
                    continue
                for msg in msgs:
                    yield msg
                if msgs and msgs[-1].metadata.num_pending == 0:
                    return
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def iter_history(self, run_id: str, *, from_seq: int = 1) -> AsyncIterator[tuple[int, Event]]:
        """A run's events in log order; a damaged message raises StreamIntegrityError."""
        async for msg in self.iter_raw(run_filter(run_id), from_seq=from_seq):
            seq = msg.metadata.sequence.stream
            verify_message(msg)
            yield seq, decode(msg.data, msg.subject, seq)

    async def history(self, run_id: str, *, from_seq: int = 1) -> list[Event]:
        """A run's events in log order (decoding errors name subject and sequence)."""
        return [ev async for _, ev in self.iter_history(run_id, from_seq=from_seq)]

    async def follow(
        self, filter_subject: str, *, from_seq: int = 1, idle_timeout: float = 1.0
    ) -> AsyncIterator[tuple[int, Event | None, int]]:
        """Follow matching events live, forever: yields (seq, event, num_pending).

        Yields (last_seq, None, 0) after `idle_timeout` without news, so a caller can act on
        being caught up. Survives server restarts, and the loss of the cluster node that held
        its consumer (an ephemeral consumer lives on one node: fetches from a lost one only
        time out), by re-creating its consumer after the last sequence it saw: every
        `CONSUMER_CHECK_S` without news it asks whether its consumer still exists.
        """
        next_seq = from_seq
        while True:
            try:
                sub = await self._ephemeral(filter_subject, next_seq)
            except (*_TRANSIENT, nats.js.errors.APIError):
                await asyncio.sleep(0.25)
                continue
            try:
                quiet_since = time.monotonic()
                while True:
                    try:
                        msgs = await sub.fetch(256, timeout=idle_timeout)
                    except (TimeoutError, nats.errors.TimeoutError):
                        if time.monotonic() - quiet_since >= CONSUMER_CHECK_S:
                            quiet_since = time.monotonic()
                            await sub.consumer_info()  # raises when the consumer is gone: made anew below
                        yield next_seq - 1, None, 0
                        continue
                    quiet_since = time.monotonic()
                    for msg in msgs:
                        seq = msg.metadata.sequence.stream
                        if seq < next_seq:
                            continue
                        next_seq = seq + 1
                        verify_message(msg)
                        yield seq, decode(msg.data, msg.subject, seq), msg.metadata.num_pending
            except (EventDecodeError, StreamIntegrityError):
                raise
            except (nats.js.errors.NotFoundError, *_TRANSIENT, nats.js.errors.APIError):
                await asyncio.sleep(0.25)
            finally:
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()

    async def last_event(self, run_id: str, subject_token: str) -> Event | None:
        """The last event on `accelopt.<run_id>.<subject_token>`, or None."""
        subject = f"{PREFIX}.{check_run_id(run_id)}.{subject_token}"
        try:
            raw = await self.js.get_last_msg(self.settings.name, subject)
        except nats.js.errors.NotFoundError:
            return None
        want = (raw.headers or {}).get(SUM_HEADER)
        if want is not None and want != checksum(raw.data or b""):
            raise StreamIntegrityError(subject, raw.seq)
        return decode(raw.data or b"", subject, raw.seq)

    async def run_ids(self) -> list[str]:
        """Every run that has a RunStarted on the log, in start order."""
        ids = []
        async for msg in self.iter_raw(f"{PREFIX}.*.run.started"):
            ids.append(msg.subject.split(".")[1])
        return ids

    # --- export / import ------------------------------------------------------------------

    async def export_run(self, run_id: str, path: str, *, from_seq: int = 1) -> int:
        """Write a run's events (subject + exact bytes) to one file; returns the count. A damaged
        message is never sealed into the file: StreamIntegrityError, and no file."""
        with logfile.LogWriter(path, run_id) as w:
            async for msg in self.iter_raw(run_filter(run_id), from_seq=from_seq):
                verify_message(msg)
                w.write(msg.subject, msg.data)
            return w.count

    async def import_file(self, path: str, *, allow_existing: bool = False) -> int:
        """Publish an exported run into this log; returns the number of events written.

        Refuses (ValueError) when the run already has events here, unless `allow_existing`,
        in which case events already present are de-duplicated by id within the window.
        """
        header, records = logfile.read_records(path)
        if not allow_existing:
            existing = await self.last_event(header.run_id, "run.started")
            if existing is not None:
                raise ValueError(f"run {header.run_id} already exists in this log; not importing {path}")
        items = ((subject, data, _msg_id_of(decode(data, subject))) for subject, data in records)
        return len(await self._publish_pipelined(items))


def _msg_id_of(event: Event) -> str:
    return msg_id(event.run_id, event.event_id)
