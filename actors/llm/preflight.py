"""Before a run starts: can every role reach its model?

A run whose model cannot be reached would otherwise fail every LLM call and complete on
its baselines. `check_models` finds, without calling any model, what litellm itself can
tell (one line each, naming what to set):

- a model name litellm has no provider for (`litellm.get_llm_provider`);
- the API key the provider needs missing from the environment
  (`litellm.validate_environment`), or the variable `llm.<role>.api_key_env` names unset;
- an `api_base` nobody listens on (a TCP connect with a short timeout).

`probe_models` then makes one tiny real call per distinct model through the gateway (so
keys, prices and provider parameters are the run's own) and reports its latency; a call
that fails there fails the preflight. Offline models (`builtin/`, plugin
providers registered as litellm custom providers) need neither.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Mapping
from urllib.parse import urlparse

import litellm
import msgspec

from accelopt.catalog import LLM_ROLES
from accelopt.config import LLMConfig
from accelopt.records import ChatMessage
from actors.llm.gateway import FREE_PROVIDERS, LLMGateway, _keyless_placeholder, provider_of

PROBE = [ChatMessage(role="user", content="Reply with the single word OK.")]
PROBE_MAX_TOKENS = 16


class ModelUse(msgspec.Struct, frozen=True, kw_only=True):
    """One distinct way the run reaches a model, and the roles that use it."""

    model: str
    api_base: str | None
    api_key_env: str | None
    roles: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.model} ({', '.join(self.roles)})"


class Probe(msgspec.Struct, frozen=True, kw_only=True):
    use: ModelUse
    latency_s: float
    error: str | None = None
    cost_usd: float = 0.0


def model_uses(config: LLMConfig) -> list[ModelUse]:
    """The run's distinct (model, api_base, api_key_env), with the roles of each."""
    roles: dict[tuple[str, str | None, str | None], list[str]] = {}
    for role in LLM_ROLES:
        r = config.for_role(role)
        roles.setdefault((r.model, r.api_base, r.api_key_env), []).append(role)
    return [ModelUse(model=m, api_base=b, api_key_env=k, roles=tuple(rs)) for (m, b, k), rs in roles.items()]


def is_offline(model: str) -> bool:
    """Served in this process: the built-in providers and plugins' litellm custom providers."""
    from actors.llm.gateway import _register_offline_providers

    provider = provider_of(model)
    if provider in FREE_PROVIDERS:
        return True
    _register_offline_providers()
    return any(
        isinstance(p, Mapping) and p.get("provider") == provider for p in litellm.custom_provider_map or []
    )


def needs_preflight(config: LLMConfig) -> bool:
    return any(not is_offline(u.model) for u in model_uses(config))


def check_models(
    config: LLMConfig, *, env: Mapping[str, str] | None = None, connect_timeout_s: float = 3.0
) -> list[str]:
    """What stops the run's models from being reached, one line each (empty: nothing found)."""
    env = os.environ if env is None else env
    problems: list[str] = []
    for use in model_uses(config):
        if is_offline(use.model):
            continue
        problem = (
            _provider_problem(use) or _key_problem(use, config, env) or _reach_problem(use, connect_timeout_s)
        )
        if problem:
            problems.append(problem)
    return problems


def _provider_problem(use: ModelUse) -> str | None:
    try:
        litellm.get_llm_provider(use.model, api_base=use.api_base)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return (
            f"model {use.label}: litellm knows no provider for {use.model!r} ({first[:160]}); name it as "
            "PROVIDER/MODEL, e.g. openai/gpt-4o-mini, anthropic/claude-sonnet-4-5, or hosted_vllm/NAME with "
            "--api-base for a self-hosted server (docs/llm-providers.md)"
        )
    return None


def _key_problem(use: ModelUse, config: LLMConfig, env: Mapping[str, str]) -> str | None:
    if use.api_key_env:
        if not env.get(use.api_key_env):
            return f"model {use.label}: set {use.api_key_env} (named by llm.roles.<role>.api_key_env) to its API key"
        return None
    resolved = config.for_role(use.roles[0])
    if _keyless_placeholder(resolved):  # a self-hosted OpenAI-compatible server: no key wanted
        return None
    try:
        missing = list(
            litellm.validate_environment(use.model, api_base=use.api_base).get("missing_keys") or []
        )
    except Exception:
        return None  # litellm cannot tell; the probe call will
    missing = [k for k in missing if not env.get(k)]
    if missing:
        return (
            f"model {use.label}: set {' and '.join(missing)} in the environment (the key litellm needs for "
            f"{use.model}), or name another variable with llm.default.api_key_env"
        )
    return None


def _reach_problem(use: ModelUse, timeout_s: float) -> str | None:
    if not use.api_base:
        return None
    url = urlparse(use.api_base if "://" in use.api_base else f"http://{use.api_base}")
    if not url.hostname:
        return f"model {use.label}: api_base {use.api_base!r} is not a URL (e.g. http://host:8000/v1)"
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError as e:
        return f"model {use.label}: api_base {use.api_base!r}: {e}"
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout_s):
            return None
    except OSError as e:
        return (
            f"model {use.label}: api_base {use.api_base} is not reachable ({e.strerror or e}); start the server "
            "or fix --api-base / llm.roles.<role>.api_base"
        )


def probe_config(config: LLMConfig) -> LLMConfig:
    """The run's LLM settings for one short probe call per model: few tokens, no retries."""
    small = msgspec.structs.replace(config.default, max_tokens=PROBE_MAX_TOKENS, retries=0)
    roles = {
        r: msgspec.structs.replace(own, max_tokens=None, retries=None) for r, own in config.roles.items()
    }
    return msgspec.structs.replace(config, default=small, roles=roles)


async def probe_models(config: LLMConfig, *, gateway: LLMGateway | None = None) -> list[Probe]:
    """One tiny real call per distinct online model (concurrently), with its latency."""
    cfg = probe_config(config)
    gw = gateway or LLMGateway(cfg)
    uses = [u for u in model_uses(cfg) if not is_offline(u.model)]

    async def one(use: ModelUse) -> Probe:
        start = time.monotonic()
        calls = await gw.complete(
            use.roles[0], PROBE, run_id="preflight", request_id=f"preflight-{use.model}"
        )
        last = calls[-1]
        return Probe(use=use, latency_s=time.monotonic() - start, error=last.error, cost_usd=last.cost_usd)

    return list(await asyncio.gather(*(one(u) for u in uses)))


def probe_problem(p: Probe) -> str | None:
    if p.error is None:
        return None
    first = p.error.strip().splitlines()[0] if p.error.strip() else "failed"
    return f"model {p.use.label}: the test call failed: {first[:300]}"
