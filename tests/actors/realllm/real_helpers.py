"""Helpers of the real-LLM tests (imported as `real_helpers`)."""

from __future__ import annotations

import asyncio
from typing import Any

from accelopt.catalog import LLMCallCompleted
from accelopt.config import LLMConfig, RoleLLM
from accelopt.records import ChatMessage, ModelPrice
from actors.llm.gateway import LLMGateway
from actors.llm.local_llm import LITELLM_MODEL

FREE = {LITELLM_MODEL: ModelPrice(input_cost_per_token=0.0, output_cost_per_token=0.0, source="config")}
SHORT = [
    ChatMessage(role="user", content="Write a C function `float add(float a, float b)` in one fenced block.")
]
# a long prompt keeps the server busy in prompt processing for a few seconds, whatever the
# model goes on to write: a request is certainly in flight while the test acts on it
LONG = [
    ChatMessage(
        role="user",
        content="Repeat this text back, word for word:\n"
        + " ".join(f"item {i} of the list is the number {i * 7 % 101}." for i in range(150)),
    )
]


def config(
    url: str, *, timeout_s: float = 60.0, retries: int = 0, concurrency: int = 4, max_tokens: int = 64
) -> LLMConfig:
    return LLMConfig(
        default=RoleLLM(
            model=LITELLM_MODEL,
            api_base=url,
            temperature=0.0,
            max_tokens=max_tokens,
            concurrency=concurrency,
            timeout_s=timeout_s,
            retries=retries,
        ),
        prices=FREE,
    )


def gateway(cfg: LLMConfig, **kw: Any) -> LLMGateway:
    return LLMGateway(
        cfg,
        backoff_base_s=kw.pop("backoff_base_s", 0.2),
        backoff_max_s=kw.pop("backoff_max_s", 2.0),
        timeout_grace_s=kw.pop("timeout_grace_s", 1.0),
    )


async def call(
    gw: LLMGateway, messages: list[ChatMessage] = SHORT, request_id: str = "r", role: str = "planner"
) -> list[LLMCallCompleted]:
    return await gw.complete(role, messages, run_id="real", request_id=request_id)


def run(coro: Any) -> Any:
    return asyncio.run(coro)
