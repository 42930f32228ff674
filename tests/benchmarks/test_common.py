"""benchmarks/_common.py's `ask_log`: the fault benchmarks' look at a server they may have
killed, on a real nats-server."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from events.log import EventLog
from events.server import NatsServer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from _common import ask_log


def test_ask_log_answers_from_a_live_server_and_none_from_a_dead_one(nats_server: NatsServer) -> None:
    url = nats_server.url

    async def create() -> None:
        elog = await EventLog.connect(url)  # the stream exists: ask_log does not create it
        await elog.close()

    asyncio.run(create())
    info = ask_log(url, lambda elog: elog.stream_info(), 10)
    assert info is not None and info.config.name and info.state.messages == 0
    assert ask_log(url, lambda elog: elog.run_ids(), 5) == []

    nats_server.kill()
    t0 = time.monotonic()
    assert ask_log(url, lambda elog: elog.run_ids(), 5) is None
    assert time.monotonic() - t0 < 30
