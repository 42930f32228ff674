"""Token and dollar accounting: explicit prices, litellm's price map, offline providers at 0,
fail-closed on unpriced models, and the price snapshot for RunStarted."""

from __future__ import annotations

import asyncio

import litellm
import pytest
from llm_helpers import llm_config

from accelopt.records import ChatMessage, ModelPrice
from actors.llm.gateway import LLMGateway, UnpricedModelError, price_snapshot

MSGS = [ChatMessage(role="user", content="Plan one optimization step for this kernel, please.")]


def _call(gw: LLMGateway, role: str = "planner"):
    return asyncio.run(gw.complete(role, MSGS, run_id="r", request_id="q"))


def test_explicit_price_from_config(scripted):
    model, _ = scripted(["x" * 400])
    cfg = llm_config(model, prices={model: ModelPrice(input_cost_per_token=1e-3, output_cost_per_token=2e-3)})
    call = _call(LLMGateway(cfg))[-1]
    assert call.usage.completion_tokens == 100 and call.usage.prompt_tokens > 0
    assert call.cost_usd == pytest.approx(call.usage.prompt_tokens * 1e-3 + 100 * 2e-3)


def test_litellm_price_map_for_a_current_model():
    cfg = llm_config("gpt-4o-mini")
    gw = LLMGateway(cfg, call_kwargs={"mock_response": "Tile the j loop by 64."})
    call = _call(gw)[-1]
    assert call.error is None and call.response == "Tile the j loop by 64."
    info = litellm.get_model_info("gpt-4o-mini")
    expected = (
        call.usage.prompt_tokens * info["input_cost_per_token"]
        + call.usage.completion_tokens * info["output_cost_per_token"]
    )
    assert call.cost_usd > 0 and call.cost_usd == pytest.approx(expected)
    snap = gw.price_snapshot(["gpt-4o-mini", "claude-sonnet-4-5"])
    assert snap["gpt-4o-mini"].source == "litellm" and snap[
        "gpt-4o-mini"
    ].input_cost_per_token == pytest.approx(info["input_cost_per_token"])
    assert snap["claude-sonnet-4-5"].output_cost_per_token > 0


def test_offline_providers_cost_nothing():
    cfg = llm_config("builtin/tuner")
    assert price_snapshot(cfg) == {
        "builtin/tuner": ModelPrice(input_cost_per_token=0.0, output_cost_per_token=0.0, source="builtin")
    }
    call = _call(LLMGateway(cfg), role="summarizer")[-1]
    assert call.cost_usd == 0.0 and call.usage.prompt_tokens > 0


def test_config_price_overrides_litellm_and_zero_is_allowed():
    cfg = llm_config(
        "gpt-4o-mini", prices={"gpt-4o-mini": ModelPrice(input_cost_per_token=0.0, output_cost_per_token=0.0)}
    )
    assert price_snapshot(cfg)["gpt-4o-mini"].source == "config"
    call = _call(LLMGateway(cfg, call_kwargs={"mock_response": "ok"}))[-1]
    assert call.cost_usd == 0.0


def test_unpriced_model_is_refused_with_its_name(scripted):
    cfg = llm_config("openai/my-local-model")
    with pytest.raises(UnpricedModelError, match="openai/my-local-model") as e:
        price_snapshot(cfg)
    assert e.value.models == ["openai/my-local-model"]
    calls = _call(LLMGateway(cfg, call_kwargs={"mock_response": "never"}))
    assert len(calls) == 1 and calls[0].error.startswith("UnpricedModelError") and calls[0].response is None


def test_unpriced_model_allowed_costs_zero():
    cfg = llm_config("openai/my-local-model", allow_unpriced=True)
    assert price_snapshot(cfg)["openai/my-local-model"].source == "unpriced"
    call = _call(LLMGateway(cfg, call_kwargs={"mock_response": "fine"}))[-1]
    assert call.error is None and call.cost_usd == 0.0


def test_failed_attempts_cost_nothing(scripted):
    model, _ = scripted([litellm.RateLimitError(message="429", llm_provider="x", model="m"), "ok"])
    cfg = llm_config(
        model, retries=1, prices={model: ModelPrice(input_cost_per_token=1.0, output_cost_per_token=1.0)}
    )
    calls = _call(LLMGateway(cfg, backoff_base_s=0.01))
    assert calls[0].cost_usd == 0.0 and calls[1].cost_usd > 0
