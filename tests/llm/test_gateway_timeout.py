"""A call that exceeds the role's timeout is cut off, recorded as a Timeout and retried."""

from __future__ import annotations

import asyncio
import time

from llm_helpers import llm_config

from accelopt.records import ChatMessage
from actors.gateway import LLMGateway
from actors.scripted import Reply

MSGS = [ChatMessage(role="user", content="hi")]


def test_slow_reply_times_out_then_the_retry_succeeds(scripted):
    model, _script = scripted([Reply(text="late", delay_s=5.0), "in time"])
    gw = LLMGateway(llm_config(model, retries=1, timeout_s=0.2), backoff_base_s=0.01, timeout_grace_s=0.05)
    start = time.monotonic()
    calls = asyncio.run(gw.complete("executor", MSGS, run_id="r", request_id="q"))
    elapsed = time.monotonic() - start
    assert elapsed < 2.0
    assert calls[0].error == "Timeout: no reply within 0.2s" and 0.2 <= calls[0].latency_s < 1.5
    assert calls[1].response == "in time" and calls[1].attempt == 1


def test_timeouts_until_retries_run_out(scripted):
    model, _ = scripted([Reply(text="late", delay_s=5.0)] * 3)
    gw = LLMGateway(llm_config(model, retries=2, timeout_s=0.1), backoff_base_s=0.01, timeout_grace_s=0.05)
    calls = asyncio.run(gw.complete("executor", MSGS, run_id="r", request_id="q"))
    assert len(calls) == 3 and all(c.error and c.error.startswith("Timeout") for c in calls)
