"""The per-role concurrency limit bounds the calls actually in flight."""

from __future__ import annotations

import asyncio

from llm_helpers import llm_config

from accelopt.config import RoleLLM
from accelopt.records import ChatMessage
from actors.gateway import LLMGateway
from actors.scripted import Reply

MSGS = [ChatMessage(role="user", content="hi")]


async def _burst(gw: LLMGateway, role: str, n: int, prefix: str = "q") -> list:
    return await asyncio.gather(*(gw.complete(role, MSGS, run_id="r", request_id=f"{prefix}{i}", sample_index=i)
                                  for i in range(n)))


def test_limit_of_two_means_two_in_flight(scripted):
    model, script = scripted([Reply(text="ok", delay_s=0.15)] * 6)
    gw = LLMGateway(llm_config(model, concurrency=2))
    results = asyncio.run(_burst(gw, "planner", 6))
    assert all(r[-1].response == "ok" for r in results)
    assert script.max_in_flight == 2


def test_higher_limit_allows_more_and_roles_have_their_own_limit(scripted):
    model, script = scripted([Reply(text="ok", delay_s=0.15)] * 12)
    cfg = llm_config(model, concurrency=6)
    cfg.executor = RoleLLM(concurrency=1)
    gw = LLMGateway(cfg)

    async def both():
        await asyncio.gather(_burst(gw, "planner", 6, "p"), _burst(gw, "executor", 6, "e"))

    asyncio.run(both())
    assert script.max_in_flight == 7  # 6 planner + 1 executor


def test_gateway_works_across_event_loops(scripted):
    model, _ = scripted(["a", "b"])
    gw = LLMGateway(llm_config(model, concurrency=1))
    assert asyncio.run(_burst(gw, "planner", 1))[0][-1].response == "a"
    assert asyncio.run(_burst(gw, "planner", 1))[0][-1].response == "b"
