"""The LLM gateway against a real model behind a real HTTP API (SmolLM2-135M on loopback):
usage from the server, timeouts, a server killed mid-request, a server down at the start,
the per-role concurrency limit and cancellation. Never asserts on the model's text (it
differs between builds of llama.cpp), only on what the gateway records."""

from __future__ import annotations

import asyncio
import itertools
import time

from real_helpers import LONG, SHORT, call, config, gateway, run

from actors.llm.local_llm import LITELLM_MODEL
from events.server import free_port


def test_a_call_records_the_servers_usage_and_response(llm_server):
    calls = run(call(gateway(config(llm_server.url))))
    assert len(calls) == 1
    c = calls[0]
    assert c.error is None, c.error
    assert c.model == LITELLM_MODEL and c.response and c.finish_reason in ("stop", "length")
    assert c.usage.prompt_tokens > 10 and c.usage.completion_tokens > 0
    assert not c.usage.estimated  # counted by the server, not by us
    assert c.cost_usd == 0.0 and c.latency_s > 0 and c.messages == SHORT


def test_a_slow_server_times_out_and_every_attempt_is_recorded(own_llm_server):
    server = own_llm_server()
    calls = run(call(gateway(config(server.url, timeout_s=0.5, retries=1, max_tokens=512)), LONG))
    assert [c.attempt for c in calls] == [0, 1]
    for c in calls:
        assert c.response is None and c.error and "Timeout" in c.error, c.error
        assert c.latency_s < 10  # bounded by the timeout, not by the generation


def test_a_server_down_at_the_start_fails_after_the_retries(prepared_llm):
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    calls = run(call(gateway(config(url, retries=2))))
    assert [c.attempt for c in calls] == [0, 1, 2]
    assert all(c.response is None and c.error for c in calls)
    assert "Connection" in calls[-1].error or "connect" in calls[-1].error.lower(), calls[-1].error


def test_a_server_killed_mid_request_is_retried_once_it_is_back(own_llm_server):
    server = own_llm_server()
    port = server.port

    async def scenario():
        gw = gateway(config(server.url, retries=6, max_tokens=16), backoff_base_s=0.5, backoff_max_s=2.0)
        task = asyncio.create_task(call(gw, LONG))
        await asyncio.sleep(1.0)  # the long prompt is being processed
        assert not task.done()
        server.kill()
        await asyncio.sleep(0.5)
        own_llm_server(port=port)  # the same address comes back
        return await task

    calls = run(scenario())
    assert calls[0].error is not None and calls[0].response is None
    assert calls[-1].error is None and calls[-1].response, calls[-1].error
    assert calls[-1].usage.prompt_tokens > 1000 and not calls[-1].usage.estimated
    assert [c.attempt for c in calls] == list(range(len(calls)))


def _intervals(calls_per_request):
    out = []
    for calls in calls_per_request:
        c = calls[-1]
        assert c.error is None, c.error
        out.append((c.ts - c.latency_s, c.ts))
    return sorted(out)


def _overlaps(intervals) -> int:
    return sum(1 for (_, end), (start, _) in itertools.pairwise(intervals) if start < end - 1e-3)


def test_the_role_concurrency_limit_holds_against_a_real_server(llm_server):
    async def three(limit: int):
        gw = gateway(config(llm_server.url, concurrency=limit, max_tokens=16))
        return await asyncio.gather(*(call(gw, request_id=f"c{limit}-{i}") for i in range(3)))

    # the server answers one request at a time; the client-side intervals show what the
    # gateway let through: with a limit of 1 they never overlap, with 3 they all do
    assert _overlaps(_intervals(run(three(1)))) == 0
    assert _overlaps(_intervals(run(three(3)))) == 2


def test_a_cancelled_call_releases_its_slot(own_llm_server):
    server = own_llm_server()

    async def scenario():
        gw = gateway(config(server.url, concurrency=1, max_tokens=16))
        task = asyncio.create_task(call(gw, LONG, request_id="cancelled"))
        await asyncio.sleep(0.5)
        task.cancel()
        # the server goes on with the abandoned prompt (it cannot tell); a fresh one on the
        # same address keeps this test about the gateway's slot, not the server's backlog
        server.kill()
        own_llm_server(port=server.port)
        t0 = time.monotonic()
        try:
            await task
        except asyncio.CancelledError:
            cancelled = True
        else:
            cancelled = False
        waited = time.monotonic() - t0
        after = await call(gw, request_id="after")  # would wait forever on a leaked slot
        return cancelled, waited, after

    cancelled, waited, after = run(asyncio.wait_for(scenario(), 120))
    assert cancelled
    assert waited < 5  # cancellation does not wait for the server to finish
    assert after[-1].error is None and after[-1].response
