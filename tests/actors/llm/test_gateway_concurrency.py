"""The per-role concurrency limit bounds the calls actually in flight."""

from __future__ import annotations

import asyncio
import contextlib

from llm_helpers import llm_config
from scripted_llm import Reply, Script

from accelopt.config import RoleLLM
from accelopt.records import ChatMessage
from actors.llm.gateway import LLMGateway

MSGS = [ChatMessage(role="user", content="hi")]


class InFlightGate:
    """Holds every scripted reply until `n` calls are in flight at once, then lets them all
    through. The overlap is thus certain, not a matter of timing. Should `n` never be reached
    (a limit lower than expected), it opens after `timeout_s` with `reached` False, so the test
    fails instead of hanging."""

    def __init__(self, n: int, timeout_s: float = 20.0) -> None:
        self.n, self.timeout_s = n, timeout_s
        self.reached = False
        self._open = asyncio.Event()

    async def __call__(self, script: Script) -> None:
        if script.in_flight >= self.n:
            self.reached = True
            self._open.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._open.wait(), self.timeout_s)
        self._open.set()


async def _burst(gw: LLMGateway, role: str, n: int, prefix: str = "q") -> list:
    return await asyncio.gather(
        *(gw.complete(role, MSGS, run_id="r", request_id=f"{prefix}{i}", sample_index=i) for i in range(n))
    )


def test_limit_of_two_means_two_in_flight(scripted):
    gate = InFlightGate(2)
    model, script = scripted([Reply(text="ok", gate=gate)] * 6)
    gw = LLMGateway(llm_config(model, concurrency=2, timeout_s=60.0))
    results = asyncio.run(_burst(gw, "planner", 6))
    assert all(r[-1].response == "ok" for r in results)
    assert gate.reached  # two calls were in flight together...
    assert script.max_in_flight == 2  # ...and never more


def test_higher_limit_allows_more_and_roles_have_their_own_limit(scripted):
    gate = InFlightGate(7)  # 6 planner + 1 executor
    model, script = scripted([Reply(text="ok", gate=gate)] * 12)
    cfg = llm_config(model, concurrency=6, timeout_s=60.0)
    cfg.roles["executor"] = RoleLLM(concurrency=1)
    gw = LLMGateway(cfg)

    async def both():
        return await asyncio.gather(_burst(gw, "planner", 6, "p"), _burst(gw, "executor", 6, "e"))

    planner, executor = asyncio.run(both())
    assert all(r[-1].response == "ok" for r in planner + executor)
    assert gate.reached  # the executor's limit of 1 did not hold the planner's 6 back
    assert script.max_in_flight == 7
    assert len(script.calls_for("executor")) == 6


def test_gateway_works_across_event_loops(scripted):
    model, _ = scripted(["a", "b"])
    gw = LLMGateway(llm_config(model, concurrency=1))
    assert asyncio.run(_burst(gw, "planner", 1))[0][-1].response == "a"
    assert asyncio.run(_burst(gw, "planner", 1))[0][-1].response == "b"
