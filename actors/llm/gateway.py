"""The LLM gateway: every model call of the agents goes through here (see docs/llm-providers.md).

- litellm (`acompletion`) for every provider; the model, temperature, max tokens,
  concurrency, timeout, retries, API base, the name of the environment variable holding
  the API key and the provider parameters passed through (`params`: `reasoning_effort`,
  `top_p`, `extra_body`, ...) come from `LLMConfig.for_role(role)`. `max_tokens` is capped
  at the model's output limit when litellm's model info knows it. The key is read from the
  environment at call time and never logged or recorded.
- A per-role semaphore bounds the calls in flight; each attempt has a timeout (litellm's,
  and an asyncio deadline around it, which also covers custom providers).
- Retries with exponential backoff and jitter only on transient errors (rate limits,
  timeouts, 5xx, connection errors); authentication, bad requests, context-window and
  content-policy errors fail at once, and their record says so (`permanent`), which the
  coordinator counts to stop a run whose model cannot be reached (`llm.fail_after`).
- Every attempt becomes an `LLMCallCompleted` (failed ones with `error`), with usage, cost,
  latency and the content hash = sha256 of (model, messages, params, sample index). Event
  ids derive from (request id, attempt), so a redelivered request de-duplicates.
- Cost: an explicit price from the config wins, `builtin/` models (and providers declared
  free with `declare_free_provider`) cost 0,
  else litellm's `completion_cost` (its bundled price map). An unpriced model is refused
  (the call fails without reaching the model) unless `allow_unpriced`. `price_snapshot`
  gives the prices to record in `RunStarted` and raises `UnpricedModelError` naming the
  models with no price.
- `recording`: content hash -> a recorded `LLMCallCompleted`; a call whose hash is there is
  answered from the recording (`served_from` = the recorded event id, cost 0) without
  calling the model. Used by ablation replays.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import random
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import litellm

from accelopt.catalog import LLMCallCompleted, envelope
from accelopt.config import LLMConfig, ResolvedLLM
from accelopt.logging import get_logger
from accelopt.records import ChatMessage, ModelPrice, TokenUsage
from actors.llm.pricing import (  # noqa: F401  (the pricing names are used through this module too)
    FREE_PROVIDERS,
    UnpricedModelError,
    declare_free_provider,
    model_price,
    price_snapshot,
    provider_of,
    role_models,
)

litellm.suppress_debug_info = True

log = get_logger(component="llm-gateway")

_PERMANENT = (
    litellm.AuthenticationError,
    litellm.PermissionDeniedError,
    litellm.BadRequestError,  # includes context-window, content-policy, unsupported params
    litellm.NotFoundError,
    litellm.UnprocessableEntityError,
)
_TRANSIENT = (
    litellm.RateLimitError,
    litellm.Timeout,
    litellm.InternalServerError,
    litellm.ServiceUnavailableError,
    litellm.BadGatewayError,
    litellm.APIConnectionError,
    asyncio.TimeoutError,
    TimeoutError,
    ConnectionError,
)


# errors that some providers raise as 5xx although no retry can fix them
_PERMANENT_TEXT = ("missing credentials", "api_key client option must be set", "no api key provided")


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: rate limits, timeouts, 5xx and connection errors; not 4xx errors, nor a
    missing API key (the OpenAI client reports that as a 500)."""
    if isinstance(exc, _PERMANENT) or any(t in str(exc).lower() for t in _PERMANENT_TEXT):
        return False
    if isinstance(exc, _TRANSIENT):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in (408, 409, 429) or status >= 500)


def max_output_tokens(model: str) -> int | None:
    """The model's output limit from litellm's model info, None when unknown."""
    try:
        value = litellm.get_model_info(model).get("max_output_tokens")
    except Exception:
        return None
    return int(value) if isinstance(value, int | float) and value > 0 else None


def call_params(cfg: ResolvedLLM) -> dict[str, Any]:
    """What the call sends besides model and messages: temperature, max_tokens (capped at the
    model's output limit) and the role's provider parameters. Recorded and hashed."""
    limit = max_output_tokens(cfg.model)
    params: dict[str, Any] = {
        "temperature": cfg.temperature,
        "max_tokens": min(cfg.max_tokens, limit) if limit else cfg.max_tokens,
    }
    params.update(cfg.params)
    return params


def content_hash(
    model: str, messages: Sequence[ChatMessage], params: Mapping[str, Any], sample_index: int
) -> str:
    payload = json.dumps(
        {
            "model": model,
            "messages": [[m.role, m.content] for m in messages],
            "params": dict(params),
            "sample_index": sample_index,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def recording_from(events: Iterable[object]) -> dict[str, LLMCallCompleted]:
    """The `recording` for a replay of a run: its first successful call per content hash."""
    out: dict[str, LLMCallCompleted] = {}
    for e in events:
        if isinstance(e, LLMCallCompleted) and e.error is None and e.response is not None:
            out.setdefault(e.content_hash, e)
    return out


_plugins_loaded = False


def use_llm_provider_plugin(name: str, obj: Any) -> None:
    """An LLM-provider entry point is a `litellm.CustomLLM` subclass or instance; its name
    is the provider prefix of the models it serves."""
    from actors.llm.tuner import register_provider

    handler = obj() if isinstance(obj, type) else obj
    if not isinstance(handler, litellm.CustomLLM):
        raise TypeError(
            f"entry point {name!r} is not a litellm.CustomLLM (subclass or instance): "
            f"{type(handler).__name__}"
        )
    register_provider(name, handler)


def _register_offline_providers() -> None:
    """The built-in custom providers, then (once per process) those of installed plugins
    (`accelopt.llm_providers` entry points, `accelopt/plugins.py`)."""
    global _plugins_loaded
    from actors.llm.role_table import tuner_reply
    from actors.llm.tuner import register_tuner_provider

    register_tuner_provider(tuner_reply)
    if not _plugins_loaded:
        from accelopt.plugins import LLM_PROVIDER_GROUP, load_plugins

        load_plugins(LLM_PROVIDER_GROUP, use_llm_provider_plugin)
        _plugins_loaded = True


@dataclass(frozen=True)
class _Call:
    """One LLM call of a request: what every attempt's `LLMCallCompleted` records."""

    role: str
    cfg: ResolvedLLM
    params: dict[str, Any]
    msgs: list[ChatMessage]
    run_id: str
    request_id: str
    sample_index: int
    seed: int

    @functools.cached_property
    def content_hash(self) -> str:
        return content_hash(self.cfg.model, self.msgs, self.params, self.sample_index)

    def record(self, attempt: int, **fields: Any) -> LLMCallCompleted:
        """The event of attempt `attempt`: the call's facts, then `fields` (its outcome)."""
        base: dict[str, Any] = {
            **envelope(
                LLMCallCompleted, self.run_id, self.request_id, attempt, ts=time.time(), cause=self.request_id
            ),
            "role": self.role,
            "request_id": self.request_id,
            "model": self.cfg.model,
            "params": self.params,
            "messages": self.msgs,
            "response": None,
            "usage": TokenUsage(),
            "cost_usd": 0.0,
            "latency_s": 0.0,
            "content_hash": self.content_hash,
            "attempt": attempt,
        }
        base.update(fields)
        return LLMCallCompleted(**base)


class LLMGateway:
    """See the module docstring. One per process (or per agent); safe across event loops."""

    def __init__(
        self,
        config: LLMConfig,
        *,
        recording: Mapping[str, LLMCallCompleted] | None = None,
        call_kwargs: Mapping[str, Any] | None = None,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 60.0,
        timeout_grace_s: float = 2.0,
    ) -> None:
        """`call_kwargs` are extra keyword arguments for every `litellm.acompletion` call
        (e.g. `mock_response` in tests, `drop_params`); they are not part of the hash."""
        self.config = config
        self.recording = dict(recording or {})
        self.call_kwargs = dict(call_kwargs or {})
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.timeout_grace_s = timeout_grace_s
        # per event loop (a semaphore belongs to one loop), per role
        self._sems: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = (
            weakref.WeakKeyDictionary()
        )
        self._prices: dict[str, ModelPrice | None] = {}
        _register_offline_providers()

    # --- prices --------------------------------------------------------------------------

    def price_of(self, model: str) -> ModelPrice | None:
        if model not in self._prices:
            self._prices[model] = model_price(self.config, model)
        return self._prices[model]

    def price_snapshot(self, models: Iterable[str] | None = None) -> dict[str, ModelPrice]:
        return price_snapshot(self.config, models)

    # --- calls ---------------------------------------------------------------------------

    def _semaphore(self, role: str, limit: int) -> asyncio.Semaphore:
        per_role = self._sems.setdefault(asyncio.get_running_loop(), {})
        sem = per_role.get(role)
        if sem is None:
            sem = per_role[role] = asyncio.Semaphore(max(1, limit))
        return sem

    async def complete(
        self,
        role: str,
        messages: Sequence[ChatMessage],
        *,
        run_id: str,
        request_id: str,
        sample_index: int = 0,
        seed: int = 0,
        recording: Mapping[str, LLMCallCompleted] | None = None,
    ) -> list[LLMCallCompleted]:
        """Call `role`'s model; returns one event per attempt, the last being the success or
        the final failure. `recording` (per call) is consulted before the gateway's own."""
        cfg = self.config.for_role(role)
        params = call_params(cfg)
        msgs = list(messages)
        call = _Call(role, cfg, params, msgs, run_id, request_id, sample_index, seed)
        recorded = (recording or {}).get(call.content_hash) or self.recording.get(call.content_hash)
        if recorded is not None and recorded.error is None and recorded.response is not None:
            return [
                call.record(
                    0,
                    response=recorded.response,
                    usage=recorded.usage,
                    served_from=recorded.event_id,
                    finish_reason=recorded.finish_reason,
                    reasoning=recorded.reasoning,
                )
            ]
        price = self.price_of(cfg.model)
        if price is None and not self.config.allow_unpriced:
            return [
                call.record(0, error=f"UnpricedModelError: {UnpricedModelError([cfg.model])}", permanent=True)
            ]
        api_key: str | None = None
        if cfg.api_key_env:
            api_key = os.environ.get(cfg.api_key_env)
            if not api_key:
                return [
                    call.record(
                        0,
                        error=f"MissingAPIKey: environment variable {cfg.api_key_env} "
                        f"(llm.roles.{role}.api_key_env) is not set",
                        permanent=True,
                    )
                ]
        return await self._attempts(call, api_key, price)

    async def _attempts(
        self, call: _Call, api_key: str | None, price: ModelPrice | None
    ) -> list[LLMCallCompleted]:
        """Call the model until it answers, an error no retry can fix, or the retries run out:
        one event per attempt."""
        cfg, role = call.cfg, call.role
        rng = random.Random(f"{call.seed}\x1f{call.request_id}")
        out: list[LLMCallCompleted] = []
        for attempt in range(cfg.retries + 1):
            async with self._semaphore(role, cfg.concurrency):
                start = time.monotonic()
                try:
                    resp = await asyncio.wait_for(
                        self._call(
                            cfg,
                            role,
                            call.msgs,
                            call.params,
                            api_key,
                            call.sample_index,
                            call.seed,
                            call.request_id,
                        ),
                        timeout=cfg.timeout_s + self.timeout_grace_s,
                    )
                    error: BaseException | None = None
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # classified below: transient -> retry, else fail now
                    resp, error = None, e
                latency = time.monotonic() - start
            if error is None:
                out.append(self._success(call.record, attempt, cfg, call.msgs, resp, latency, price))
                return out
            text = _error_text(error, api_key, cfg.timeout_s)
            transient = is_transient(error)
            out.append(call.record(attempt, error=text, latency_s=latency, permanent=not transient))
            log.warning(
                "llm call failed",
                run_id=call.run_id,
                request_id=call.request_id,
                role=role,
                model=cfg.model,
                attempt=attempt,
                transient=transient,
                error=text[:300],
            )
            if not transient or attempt >= cfg.retries:
                break
            await asyncio.sleep(self._backoff(attempt, rng, error))
        return out

    async def _call(
        self,
        cfg: ResolvedLLM,
        role: str,
        msgs: list[ChatMessage],
        params: Mapping[str, Any],
        api_key: str | None,
        sample_index: int,
        seed: int,
        request_id: str,
    ) -> Any:
        kwargs: dict[str, Any] = {
            **params,
            "model": cfg.model,
            "messages": [{"role": m.role, "content": m.content} for m in msgs],
            "timeout": cfg.timeout_s,
            "num_retries": 0,
            "max_retries": 0,
            "metadata": {
                "accelopt_role": role,
                "sample_index": sample_index,
                "seed": seed,
                "request_id": request_id,
            },
        }
        if cfg.api_base:
            kwargs["api_base"] = cfg.api_base
        api_key = api_key or _keyless_placeholder(cfg)
        if api_key:
            kwargs["api_key"] = api_key
        kwargs.update(self.call_kwargs)
        return await litellm.acompletion(**kwargs)

    def _backoff(self, attempt: int, rng: random.Random, error: BaseException) -> float:
        cap = min(self.backoff_max_s, self.backoff_base_s * (2**attempt))
        delay = cap * (0.5 + 0.5 * rng.random())  # "equal jitter": half fixed, half random
        retry_after = _retry_after(error)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.backoff_max_s))
        return delay

    def _success(
        self,
        record: Any,
        attempt: int,
        cfg: ResolvedLLM,
        msgs: list[ChatMessage],
        resp: Any,
        latency: float,
        price: ModelPrice | None,
    ) -> LLMCallCompleted:
        choice = resp.choices[0] if getattr(resp, "choices", None) else None
        message = getattr(choice, "message", None)
        text = getattr(message, "content", None)
        reasoning = getattr(message, "reasoning_content", None)
        finish = getattr(choice, "finish_reason", None)
        usage = _usage(resp, cfg.model, msgs, text)
        cost = self._cost(cfg.model, resp, usage, price)
        return record(
            attempt,
            response=text,
            usage=usage,
            cost_usd=cost,
            latency_s=latency,
            finish_reason=str(finish) if finish else None,
            reasoning=reasoning if isinstance(reasoning, str) and reasoning else None,
        )

    def _cost(self, model: str, resp: Any, usage: TokenUsage, price: ModelPrice | None) -> float:
        if price is None:  # allowed unpriced
            return 0.0
        if price.source == "litellm":
            try:
                return float(litellm.completion_cost(completion_response=resp, model=model))
            except Exception:  # fall back to the snapshot's per-token price
                pass
        return (
            usage.prompt_tokens * price.input_cost_per_token
            + usage.completion_tokens * price.output_cost_per_token
        )


def _keyless_placeholder(cfg: ResolvedLLM) -> str | None:
    """A self-hosted OpenAI-compatible server (vLLM, SGLang, llama.cpp) usually wants no key,
    but the OpenAI client refuses to send a request without one. Given an `api_base` and no
    `api_key_env`, send a placeholder: never the provider's own key from the environment
    (OPENAI_API_KEY), which the client would otherwise hand to whatever server `api_base`
    names. A server that wants a key gets it through `api_key_env`."""
    provider = provider_of(cfg.model)
    if (
        not cfg.api_base
        or cfg.api_key_env
        or provider not in ("openai", "hosted_vllm", "text-completion-openai")
    ):
        return None
    return "none"


def _usage(resp: Any, model: str, msgs: list[ChatMessage], text: str | None) -> TokenUsage:
    u = getattr(resp, "usage", None)
    prompt = int(getattr(u, "prompt_tokens", 0) or 0)
    completion = int(getattr(u, "completion_tokens", 0) or 0)
    if prompt == 0 and completion == 0:  # the server reported none: estimate (the budget fails closed)
        prompt = _count_tokens(model, messages=[{"role": m.role, "content": m.content} for m in msgs])
        completion = _count_tokens(model, text=text or "") if text else 0
        return TokenUsage(prompt_tokens=prompt, completion_tokens=completion, estimated=True)
    return TokenUsage(prompt_tokens=prompt, completion_tokens=completion)


def _count_tokens(model: str, **what: Any) -> int:
    try:
        return int(litellm.token_counter(model=model, **what))
    except Exception:
        chars = len(what.get("text") or "") + sum(len(m["content"]) for m in what.get("messages") or [])
        return max(1, chars // 4)


def _retry_after(error: BaseException) -> float | None:
    headers = getattr(getattr(error, "response", None), "headers", None) or getattr(error, "headers", None)
    if not headers:
        return None
    try:
        value = headers.get("retry-after") or headers.get("Retry-After")
        return float(value) if value is not None else None
    except (TypeError, ValueError, AttributeError):
        return None


def _error_text(error: BaseException, api_key: str | None, timeout_s: float) -> str:
    if isinstance(error, asyncio.TimeoutError | TimeoutError) and not isinstance(error, litellm.Timeout):
        text = f"Timeout: no reply within {timeout_s:g}s"
    else:
        text = f"{type(error).__name__}: {error}"
    if api_key:
        text = text.replace(api_key, "***")
    return text[:4000]
