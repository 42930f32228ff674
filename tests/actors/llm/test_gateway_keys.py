"""API keys for self-hosted OpenAI-compatible servers: a placeholder when none is configured,
never the real OpenAI key from the environment sent to another server."""

from __future__ import annotations

from accelopt.config import ResolvedLLM
from actors.llm.gateway import _keyless_placeholder


def _cfg(model: str, api_base: str | None = None, api_key_env: str | None = None) -> ResolvedLLM:
    return ResolvedLLM(
        model=model,
        temperature=0.0,
        max_tokens=16,
        concurrency=1,
        timeout_s=5.0,
        retries=0,
        api_base=api_base,
        api_key_env=api_key_env,
    )


def test_a_self_hosted_server_gets_a_placeholder_not_the_openai_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-key")
    assert _keyless_placeholder(_cfg("openai/smollm2", "http://127.0.0.1:8000/v1")) == "none"
    assert _keyless_placeholder(_cfg("hosted_vllm/qwen", "http://vllm:8000/v1")) == "none"


def test_no_placeholder_for_hosted_apis_or_a_configured_key():
    assert _keyless_placeholder(_cfg("openai/gpt-4o-mini")) is None  # api.openai.com: its own key
    assert _keyless_placeholder(_cfg("openai/x", "http://proxy/v1", api_key_env="PROXY_KEY")) is None
    assert _keyless_placeholder(_cfg("anthropic/claude-sonnet-4-5", "http://proxy/v1")) is None
