"""The JetStream log against a real nats-server: round trip, dedup, order, export/import."""

from __future__ import annotations

import asyncio

import pytest

from events import decode
from events.log import EventLog
from events.logfile import LogFileError, read_events, read_records
from events.server import NatsServer


async def _publish_all(url: str, events) -> EventLog:
    elog = await EventLog.connect(url)
    for ev in events:
        await elog.publish(ev)
    return elog


def test_round_trip_every_type_through_the_stream(nats_server, sample_events):
    async def go():
        evs = sample_events("rt")
        elog = await _publish_all(nats_server.url, evs)
        back = await elog.history("rt")
        await elog.close()
        return evs, back

    evs, back = asyncio.run(go())
    assert back == evs


def test_republished_event_is_deduplicated(nats_server, sample_events):
    async def go():
        ev = sample_events("dd")[0]
        elog = await EventLog.connect(nats_server.url)
        first = await elog.publish(ev)
        second = await elog.publish(ev)
        hist = await elog.history("dd")
        await elog.close()
        return first, second, hist

    first, second, hist = asyncio.run(go())
    assert not first.duplicate and second.duplicate
    assert second.seq == first.seq
    assert len(hist) == 1


def test_history_is_per_run_and_ordered(nats_server, sample_events):
    async def go():
        a, b = sample_events("run-a"), sample_events("run-b")
        interleaved = [e for pair in zip(a, b, strict=True) for e in pair]
        elog = await EventLog.connect(nats_server.url)
        await elog.publish_many(interleaved)
        ha, hb = await elog.history("run-a"), await elog.history("run-b")
        from_5 = await elog.history("run-a", from_seq=5)
        runs = await elog.run_ids()
        await elog.close()
        return a, b, ha, hb, from_5, runs

    a, b, ha, hb, from_5, runs = asyncio.run(go())
    assert ha == a and hb == b
    assert from_5 == a[2:]  # sequences 1..4 hold a0, b0, a1, b1
    assert runs == ["run-a", "run-b"]


def test_a_reader_retries_its_consumer_while_the_stream_has_no_leader(
    nats_server, sample_events, monkeypatch
):
    """Creating a reader's consumer is a request to the stream's leader; after a cluster lost
    a node it times out until a new leader is elected (the full suite's
    test_run_survives_losing_a_node failed so in a run's export). The reader retries, as a
    publish does. The lost leader is stood in by the first two creations timing out (said so:
    an election cannot be timed on demand); the server, stream and history are real."""
    import nats

    async def go():
        elog = await EventLog.connect(nats_server.url)
        await elog.publish_many(sample_events("run-a"))
        real, failures = elog.js.pull_subscribe, []

        async def no_leader_yet(*args, **kwargs):
            if len(failures) < 2:
                failures.append(1)
                raise nats.errors.TimeoutError
            return await real(*args, **kwargs)

        monkeypatch.setattr(elog.js, "pull_subscribe", no_leader_yet)
        history = await elog.history("run-a")
        await elog.close()
        return history, len(failures)

    history, failed = asyncio.run(go())
    assert history == sample_events("run-a") and failed == 2


def test_empty_history(nats_server):
    async def go():
        elog = await EventLog.connect(nats_server.url)
        h = await elog.history("nothing-here")
        await elog.close()
        return h

    assert asyncio.run(go()) == []


def test_acked_events_survive_kill_9(tmp_path, sample_events):
    server = NatsServer(tmp_path / "store")
    server.start()
    evs = sample_events("crash")

    async def write():
        elog = await EventLog.connect(server.url)
        await elog.publish_many(evs)
        await elog.close()

    async def read():
        elog = await EventLog.connect(server.url)
        h = await elog.history("crash")
        await elog.close()
        return h

    asyncio.run(write())
    server.kill()
    assert not server.running
    server.start()
    try:
        assert asyncio.run(read()) == evs
    finally:
        server.kill()


def test_export_import_is_byte_identical(tmp_path, sample_events):
    src = NatsServer(tmp_path / "a")
    dst = NatsServer(tmp_path / "b")
    src.start()
    dst.start()
    path = tmp_path / "run.aolog"

    async def go():
        elog = await EventLog.connect(src.url)
        await elog.publish_many(sample_events("exp"))
        n = await elog.export_run("exp", str(path))
        raw_src = [(m.subject, m.data) async for m in elog.iter_raw("accelopt.exp.>")]
        await elog.close()
        other = await EventLog.connect(dst.url)
        imported = await other.import_file(str(path))
        raw_dst = [(m.subject, m.data) async for m in other.iter_raw("accelopt.exp.>")]
        with pytest.raises(ValueError, match="already exists"):
            await other.import_file(str(path))
        await other.close()
        return n, imported, raw_src, raw_dst

    try:
        n, imported, raw_src, raw_dst = asyncio.run(go())
    finally:
        src.kill()
        dst.kill()
    assert n == imported == len(sample_events("exp"))
    assert raw_dst == raw_src
    header, records = read_records(path)
    assert header.run_id == "exp"
    assert [decode(d, s) for s, d in records] == read_events(path) == sample_events("exp")


def test_truncated_export_is_reported(tmp_path, sample_events, nats_server):
    path = tmp_path / "run.aolog"

    async def go():
        elog = await EventLog.connect(nats_server.url)
        await elog.publish_many(sample_events("tr"))
        await elog.export_run("tr", str(path))
        await elog.close()

    asyncio.run(go())
    data = path.read_bytes()
    path.write_bytes(data[:-5])
    with pytest.raises(LogFileError, match="truncated"):
        read_events(path)
    (tmp_path / "junk").write_bytes(b"hello")
    with pytest.raises(LogFileError, match="magic"):
        read_events(tmp_path / "junk")
