"""Retries only on transient errors, with backoff; every attempt is recorded."""

from __future__ import annotations

import asyncio
import time

import litellm
from llm_helpers import llm_config

from accelopt.catalog import derive_event_id
from accelopt.records import ChatMessage
from actors.llm.gateway import LLMGateway, is_transient

MSGS = [ChatMessage(role="system", content="You plan."), ChatMessage(role="user", content="Plan one step.")]


def _call(gw: LLMGateway, role: str = "planner", request_id: str = "req", **kw):
    return asyncio.run(
        gw.complete(role, MSGS, run_id="run1", request_id=request_id, sample_index=0, seed=3, **kw)
    )


def rate_limit() -> litellm.RateLimitError:
    return litellm.RateLimitError(message="429 Too Many Requests", llm_provider="scripted", model="m")


def test_rate_limit_then_success_is_retried_and_both_attempts_recorded(scripted):
    model, script = scripted([rate_limit(), "Tile the j loop by 64."])
    calls = _call(LLMGateway(llm_config(model, retries=3), backoff_base_s=0.01))
    assert [c.attempt for c in calls] == [0, 1]
    assert calls[0].error.startswith("RateLimitError") and calls[0].response is None
    assert calls[1].error is None and calls[1].response == "Tile the j loop by 64."
    assert calls[0].event_id == derive_event_id("run1", "LLMCallCompleted", "req", 0)
    assert calls[1].event_id == derive_event_id("run1", "LLMCallCompleted", "req", 1)
    assert calls[0].content_hash == calls[1].content_hash and calls[1].causation_id == "req"
    assert calls[1].messages == MSGS and calls[1].params == {"temperature": 0.0, "max_tokens": 2048}
    assert calls[1].finish_reason == "stop" and calls[1].usage.completion_tokens > 0
    assert len(script.calls) == 2 and script.calls[0].metadata["accelopt_role"] == "planner"


def test_auth_error_is_not_retried(scripted):
    auth = litellm.AuthenticationError(message="invalid x-api-key", llm_provider="anthropic", model="m")
    model, script = scripted([auth, "never reached"])
    calls = _call(LLMGateway(llm_config(model, retries=5), backoff_base_s=0.01))
    assert len(calls) == 1 and calls[0].error.startswith("AuthenticationError")
    assert script.remaining("*") == 1


def test_bad_request_and_context_window_are_not_retried(scripted):
    for exc in (
        litellm.ContextWindowExceededError(message="too long", model="m", llm_provider="openai"),
        litellm.BadRequestError(message="bad", model="m", llm_provider="openai"),
    ):
        model, _script = scripted([exc, "never reached"])
        calls = _call(LLMGateway(llm_config(model, retries=5), backoff_base_s=0.01))
        assert len(calls) == 1 and not is_transient(exc)


def test_server_and_connection_errors_are_retried_until_the_limit(scripted):
    errors = [
        litellm.InternalServerError(message="500", llm_provider="openai", model="m"),
        litellm.ServiceUnavailableError(message="503", llm_provider="openai", model="m"),
        litellm.APIConnectionError(message="connection refused", llm_provider="openai", model="m"),
    ]
    model, _ = scripted(errors)
    start = time.monotonic()
    calls = _call(LLMGateway(llm_config(model, retries=2), backoff_base_s=0.05))
    elapsed = time.monotonic() - start
    assert [c.attempt for c in calls] == [0, 1, 2]
    assert all(c.error for c in calls) and calls[-1].error.startswith("APIConnectionError")
    assert elapsed >= 0.05 * 0.5 + 0.1 * 0.5  # backoff slept between attempts (equal jitter)


def test_backoff_is_exponential_with_jitter_and_honours_retry_after():
    gw = LLMGateway(llm_config("builtin/tuner"), backoff_base_s=1.0, backoff_max_s=10.0)
    import random

    rng = random.Random(0)
    delays = [gw._backoff(a, rng, RuntimeError()) for a in range(6)]
    for a, d in enumerate(delays):
        cap = min(10.0, 2.0**a)
        assert cap / 2 <= d <= cap
    assert len(set(delays)) == len(delays)
    import httpx

    resp = httpx.Response(429, headers={"retry-after": "7"}, request=httpx.Request("POST", "http://x"))
    err = litellm.RateLimitError(message="x", llm_provider="openai", model="m", response=resp)
    assert gw._backoff(0, rng, err) >= 7.0


def test_missing_api_key_env_fails_without_calling(scripted, monkeypatch):
    model, script = scripted(["unused"])
    monkeypatch.delenv("ACCELOPT_TEST_KEY", raising=False)
    cfg = llm_config(model)
    cfg.default.api_key_env = "ACCELOPT_TEST_KEY"
    calls = _call(LLMGateway(cfg))
    assert len(calls) == 1 and "ACCELOPT_TEST_KEY" in calls[0].error and not script.calls
    monkeypatch.setenv("ACCELOPT_TEST_KEY", "sk-secret-123")
    calls = _call(LLMGateway(cfg), request_id="req2")
    assert calls[-1].error is None and script.calls[-1].api_key_given
    assert "sk-secret-123" not in repr(calls)


def test_a_missing_api_key_reported_as_a_500_is_not_retried():
    # the OpenAI client raises this (as litellm.InternalServerError) before any request is sent
    err = litellm.InternalServerError(
        message="OpenAIException - Missing credentials. Please pass an `api_key`",
        llm_provider="openai",
        model="gpt-4o-mini",
    )
    assert not is_transient(err)
    assert is_transient(litellm.InternalServerError(message="upstream 503", llm_provider="openai", model="m"))
