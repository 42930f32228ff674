"""A call that exceeds the role's timeout is cut off, recorded as a Timeout and retried."""

from __future__ import annotations

import asyncio

from llm_helpers import llm_config
from scripted_llm import Reply

from accelopt.records import ChatMessage
from actors.llm.gateway import LLMGateway

MSGS = [ChatMessage(role="user", content="hi")]


def test_slow_reply_times_out_then_the_retry_succeeds(scripted):
    model, _script = scripted([Reply(text="late", delay_s=30.0), "in time"])
    gw = LLMGateway(llm_config(model, retries=1, timeout_s=0.2), backoff_base_s=0.01, timeout_grace_s=0.05)
    calls = asyncio.run(gw.complete("executor", MSGS, run_id="r", request_id="q"))
    assert len(calls) == 2 and calls[0].attempt == 0 and calls[0].response is None
    assert calls[0].error == "Timeout: no reply within 0.2s"
    # cut off at the timeout, not after the 30 s reply: a generous bound (about 0.25 s when idle)
    assert 0.2 <= calls[0].latency_s < 10
    assert calls[1].response == "in time" and calls[1].attempt == 1 and calls[1].error is None


def test_timeouts_until_retries_run_out(scripted):
    model, _ = scripted([Reply(text="late", delay_s=5.0)] * 3)
    gw = LLMGateway(llm_config(model, retries=2, timeout_s=0.1), backoff_base_s=0.01, timeout_grace_s=0.05)
    calls = asyncio.run(gw.complete("executor", MSGS, run_id="r", request_id="q"))
    assert len(calls) == 3 and all(c.error and c.error.startswith("Timeout") for c in calls)
