"""Every message on the stream carries `Accelopt-Sum` (a BLAKE2b of its bytes); a message whose
bytes do not match is named by its stream sequence wherever it is read, is never sealed into an
exported file, and is terminated, not served, on a work queue. (A real nats-server: the damaged
message is published with a checksum that does not match its bytes, as a flipped bit in the
store would leave it.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from accelopt.catalog import msg_id
from events.codec import SUM_HEADER, StreamIntegrityError, checksum, encode
from events.log import EventLog
from events.subjects import subject_for


def test_a_damaged_message_is_named_by_its_sequence(nats_server, sample_events, tmp_path: Path) -> None:
    events = sample_events("sum")
    bad = events[3]

    async def go() -> tuple[list, int | None, int, list[str], list[str]]:
        elog = await EventLog.connect(nats_server.url)
        await elog.publish_many(events[:3])
        data = encode(bad)
        await elog.js.publish(
            subject_for(bad),
            data,
            stream=elog.settings.name,
            headers={
                "Nats-Msg-Id": msg_id(bad.run_id, bad.event_id),
                SUM_HEADER: checksum(data[:-1] + b"\x00"),
            },
        )
        await elog.publish_many(events[4:])
        msgs = [m async for m in elog.iter_raw("accelopt.sum.>")]
        assert all(m.headers and SUM_HEADER in m.headers for m in msgs)  # every message carries one
        got = []
        seq = None
        try:
            async for _, e in elog.iter_history("sum"):
                got.append(e)
        except StreamIntegrityError as e:
            seq = e.sequence
        with pytest.raises(StreamIntegrityError):
            await elog.export_run("sum", str(tmp_path / "x.aolog"))
        q = await elog.work_queue("test-role", "accelopt.sum.>")
        served = [d.event.event_id for d in await q.fetch(batch=len(events), timeout=2.0)]
        await elog.close()
        return got, seq, msgs[3].metadata.sequence.stream, served, q.rejected

    got, seq, bad_seq, served, rejected = asyncio.run(go())
    assert got == events[:3] and seq == bad_seq
    assert not (tmp_path / "x.aolog").exists() and not (tmp_path / "x.aolog.partial").exists()
    assert bad.event_id not in served and len(served) == len(events) - 1
    assert len(rejected) == 1 and f"sequence {bad_seq}" in rejected[0]
