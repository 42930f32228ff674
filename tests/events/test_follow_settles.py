"""A run that ends (fails, stops on budget) with LLM calls in flight: the session's follow
waits a bounded time for their results, so the summary and the exported log count them.
Real nats-server; the events are published by hand (no actors are needed for this)."""

from __future__ import annotations

import asyncio
import time

from accelopt import catalog as c
from accelopt.records import TokenUsage
from actors.runtime.session import create_stream, follow_run
from events.log import EventLog, StreamSettings

RUN = "run-settle"


def _env(kind: str, *key: object) -> dict:
    return {"event_id": c.derive_event_id(RUN, kind, *key), "run_id": RUN, "ts": time.time()}


def _answer(request: c.PlanRequested) -> c.LLMCallCompleted:
    return c.LLMCallCompleted(
        **_env("LLMCallCompleted", request.event_id),
        role="planner",
        request_id=request.event_id,
        model="openai/gpt-4o-mini",
        params={},
        messages=[],
        response=None,
        usage=TokenUsage(),
        cost_usd=0.0,
        latency_s=0.1,
        content_hash="h",
        error="AuthenticationError",
        permanent=True,
    )


def _requests(n: int) -> list[c.PlanRequested]:
    return [
        c.PlanRequested(
            **_env("PlanRequested", i), problem="silu", iteration=1, candidate_id="k0", sample_index=i
        )
        for i in range(n)
    ]


async def _scenario(url: str, answer_late: bool, settle_s: float) -> tuple[dict[str, int], float]:
    await create_stream(url, StreamSettings())
    first, in_flight = _requests(2)
    elog = await EventLog.connect(url)
    try:
        for e in (
            first,
            _answer(first),
            in_flight,
            c.RunFailed(**_env("RunFailed"), reason="llm", detail="x"),
        ):
            await elog.publish(e)

        async def late() -> None:
            await asyncio.sleep(1.0)
            await elog.publish(_answer(in_flight))

        t0 = time.monotonic()
        task = asyncio.create_task(late()) if answer_late else None
        view, timed_out = await follow_run(url, RUN, settle_s=settle_s)
        took = time.monotonic() - t0
        if task is not None:
            await task
    finally:
        await elog.close()
    assert not timed_out and view.failed is not None
    return {role: u.calls for role, u in view.usage.items()}, took


def test_a_call_answered_after_the_run_failed_is_counted(nats_server):
    calls, took = asyncio.run(_scenario(nats_server.url, answer_late=True, settle_s=10.0))
    assert calls == {"planner": 2}
    assert took < 8.0  # it returned once the call was answered, not at the end of the window


def test_a_call_never_answered_is_waited_for_only_a_bounded_time(nats_server):
    calls, took = asyncio.run(_scenario(nats_server.url, answer_late=False, settle_s=1.5))
    assert calls == {"planner": 1}
    assert 1.0 <= took < 10.0
