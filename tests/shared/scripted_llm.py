"""`scripted/<name>`: a litellm provider that replays a script of replies, for tests.

It lives with the tests, not in the package: a run never serves it. `install_script`
registers it in the calling process (priced at 0), so it answers calls made there only.

No LLM API is reachable from the development machines, so tests of the LLM path stand a
script in for a real model: the replies are written in the formats real models produce
(prose around a fenced kernel, prose with no code, two code blocks, truncated output,
reasoning in `<think>` tags, a kernel that does not compile then a fixed one, ...) and
replayed through litellm exactly like a remote model's reply, so the gateway, parsing and
agents run their real code. A script entry can also raise a litellm exception (429,
timeout, auth error...), wait (`delay_s`) or be held by a `gate` to exercise retries,
timeouts and concurrency limits.

    script = Script({"executor": ["no code here", "```c\\nint f(void){return 1;}\\n```"]})
    model = install_script("t1", script)        # -> "scripted/t1"; configure it for a role

Replies are consumed per role (the gateway passes the role in litellm metadata), in order;
a role with no list of its own uses the "*" list. A script that runs out raises
`litellm.BadRequestError` (not retried), so a test that makes more calls than it scripted
fails loudly. Calls are recorded on the script (`script.calls`), with the peak number of
calls in flight (`script.max_in_flight`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import litellm
from litellm import CustomLLM
from litellm.types.utils import ModelResponse

from actors.llm.gateway import declare_free_provider
from actors.llm.tuner import fill_response, register_provider

PROVIDER = "scripted"


@dataclass
class Reply:
    """One scripted reply: text (or a function of the messages), or an exception to raise."""

    text: str | Callable[[list[dict[str, Any]]], str] | None = None
    error: BaseException | None = None
    delay_s: float = 0.0
    finish_reason: str = "stop"
    # awaited (async calls only) before replying, with the script, e.g. to hold replies until
    # a number of calls are in flight
    gate: Callable[[Script], Awaitable[None]] | None = None


@dataclass
class ScriptedCall:
    role: str
    messages: list[dict[str, Any]]
    metadata: dict[str, Any]
    started: float
    reply: Reply | None = None
    api_key_given: bool = False  # whether the call carried an API key (its value is not kept)


ScriptItem = str | Reply | BaseException


@dataclass
class Script:
    replies: Mapping[str, Sequence[ScriptItem]] = field(default_factory=dict)
    calls: list[ScriptedCall] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    def __post_init__(self) -> None:
        self._queues: dict[str, list[Reply]] = {
            role: [_as_reply(item) for item in items] for role, items in self.replies.items()
        }
        self._lock = threading.Lock()

    def next_reply(
        self, role: str, messages: list[dict[str, Any]], metadata: dict[str, Any], api_key_given: bool = False
    ) -> Reply:
        with self._lock:
            call = ScriptedCall(role, messages, metadata, time.monotonic(), api_key_given=api_key_given)
            self.calls.append(call)
            queue = self._queues.get(role)
            if queue is None:
                queue = self._queues.get("*")
            if not queue:
                raise litellm.BadRequestError(
                    message=f"scripted model: the script has no reply left for role {role!r} "
                    f"(call {len(self.calls)})",
                    model=f"{PROVIDER}/?",
                    llm_provider=PROVIDER,
                )
            call.reply = queue.pop(0)
            return call.reply

    def remaining(self, role: str) -> int:
        return len(self._queues.get(role, []))

    def calls_for(self, role: str) -> list[ScriptedCall]:
        return [c for c in self.calls if c.role == role]


def _as_reply(item: ScriptItem) -> Reply:
    if isinstance(item, Reply):
        return item
    if isinstance(item, BaseException):
        return Reply(error=item)
    return Reply(text=item)


_SCRIPTS: dict[str, Script] = {}


def install_script(name: str, script: Script) -> str:
    """Make `script` answer `scripted/<name>`; returns that model name."""
    register_scripted_provider()
    _SCRIPTS[name] = script
    return f"{PROVIDER}/{name}"


def remove_script(name: str) -> None:
    _SCRIPTS.pop(name, None)


def _next(kwargs: dict[str, Any]) -> tuple[Script, Reply, list[dict[str, Any]]]:
    model = str(kwargs.get("model") or "")
    name = model.split("/", 1)[1] if model.startswith(f"{PROVIDER}/") else model
    script = _SCRIPTS.get(name)
    if script is None:
        raise litellm.BadRequestError(
            message=f"scripted model {name!r}: no script installed",
            model=f"{PROVIDER}/{name}",
            llm_provider=PROVIDER,
        )
    meta = dict((kwargs.get("litellm_params") or {}).get("metadata") or {})
    role = str(meta.get("accelopt_role") or "*")
    messages = list(kwargs.get("messages") or [])
    return script, script.next_reply(role, messages, meta, bool(kwargs.get("api_key"))), messages


def _finish(kwargs: dict[str, Any], messages: list[dict[str, Any]], reply: Reply) -> ModelResponse:
    if reply.error is not None:
        raise reply.error
    text = reply.text(messages) if callable(reply.text) else (reply.text or "")
    model = str(kwargs.get("model") or "")
    if not model.startswith(f"{PROVIDER}/"):
        model = f"{PROVIDER}/{model}"
    return fill_response(kwargs["model_response"], model, messages, text, reply.finish_reason)


class ScriptedLLM(CustomLLM):
    def completion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        _, reply, messages = _next(kwargs)
        if reply.delay_s:
            time.sleep(reply.delay_s)
        return _finish(kwargs, messages, reply)

    async def acompletion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        script, reply, messages = _next(kwargs)
        script.in_flight += 1
        script.max_in_flight = max(script.max_in_flight, script.in_flight)
        try:
            if reply.gate is not None:
                await reply.gate(script)
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            return _finish(kwargs, messages, reply)
        finally:
            script.in_flight -= 1


_HANDLER = ScriptedLLM()


def register_scripted_provider() -> None:
    register_provider(PROVIDER, _HANDLER)
    declare_free_provider(PROVIDER)
