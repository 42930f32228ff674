"""Executor against a real nats-server, on replies in the shapes real models give."""

from __future__ import annotations

import asyncio

import litellm
from llm_helpers import SCALE_ADD_C, envelope, llm_config, of_type, run_agent, scale_add_problem
from scripted_llm import Reply

from accelopt import catalog as c

RUN = "impl-run"
TILED = SCALE_ADD_C.replace("#define TILE_J 32", "#define TILE_J 64")
CPP = (
    '#include <vector>\nextern "C" void kernel(const float* x, const float* y, float* out) {\n'
    "    std::vector<float> t(16);\n}\n"
)


def impl_request(k: int, plan: str = "CHANGE: TILE_J 32 -> 64") -> c.ImplementationRequested:
    return c.ImplementationRequested(
        **envelope(RUN, "ImplementationRequested", "plan1", k),
        problem="scale_add",
        iteration=1,
        candidate_id="k0",
        plan_id="plan1",
        sample_index=k,
        language="c",
        device="cpu",
        plan=plan,
        candidate_source=SCALE_ADD_C,
    )


REPLIES = [
    f"Here is the kernel with the wider tile:\n\n```c\n{TILED}```\n\nThis halves the loop overhead.",
    "To implement this plan you would change TILE_J to 64; the rest of the kernel stays the same.",
    f"```c\n{TILED}```\nAlternatively, unrolled:\n```c\n{SCALE_ADD_C}```",
    f"Sure! Here's the optimized version:\n```c\n{TILED[:200]}",  # cut off by max_tokens
    f"```cpp\n{CPP}```",  # C++ in a C file: parsed; the compiler will judge it
    f"<think>Should I use ```c blocks? yes.</think>\n```c\n{TILED}```",
]


def test_replies_in_real_shapes(nats_server, scripted):
    model, _ = scripted(
        {"executor": [*REPLIES[:3], Reply(text=REPLIES[3], finish_reason="length"), *REPLIES[4:]]}
    )
    reqs = [impl_request(k) for k in range(len(REPLIES))]
    cfg = llm_config(model, concurrency=1)  # one at a time: replies are consumed in request order
    log = asyncio.run(run_agent(nats_server.url, "executor", cfg, RUN, scale_add_problem(), reqs))
    calls = {e.request_id: e for e in of_type(log, c.LLMCallCompleted)}
    kernels = {e.request_id: e for e in of_type(log, c.KernelProposed)}
    failed = {e.request_id: e for e in of_type(log, c.ProposalFailed)}
    assert len(calls) == 6 and set(kernels) | set(failed) == {r.event_id for r in reqs}

    k0 = kernels[reqs[0].event_id]
    assert k0.source == TILED and k0.parent_id == "k0" and k0.plan_id == "plan1" and k0.fix_of is None
    assert k0.kernel_id == c.derive_event_id(RUN, "Kernel", reqs[0].event_id)
    assert k0.event_id == c.derive_event_id(RUN, "KernelProposed", reqs[0].event_id)
    assert k0.llm_call_id == calls[reqs[0].event_id].event_id and k0.language == "c"

    f1 = failed[reqs[1].event_id]
    assert f1.stage == "implement" and f1.reason == "no code block in reply"
    assert f1.llm_call_id == calls[reqs[1].event_id].event_id

    assert kernels[reqs[2].event_id].source == TILED  # two blocks: the first
    truncated = failed[reqs[3].event_id]  # cut at max_tokens: a recorded failure, never half a kernel
    assert truncated.reason == "truncated" and "max_tokens" in truncated.detail
    assert calls[reqs[3].event_id].finish_reason == "length"
    assert truncated.llm_call_id == calls[reqs[3].event_id].event_id
    assert "std::vector" in kernels[reqs[4].event_id].source
    assert kernels[reqs[5].event_id].source == TILED


def test_rate_limited_then_kernel(nats_server, scripted):
    model, _ = scripted(
        {
            "executor": [
                litellm.RateLimitError(message="429", llm_provider="openai", model="m"),
                f"```c\n{TILED}```",
            ]
        }
    )
    req = impl_request(0)
    log = asyncio.run(
        run_agent(nats_server.url, "executor", llm_config(model, retries=2), RUN, scale_add_problem(), [req])
    )
    calls = of_type(log, c.LLMCallCompleted)
    assert [(x.attempt, bool(x.error)) for x in calls] == [(0, True), (1, False)]
    [kernel] = of_type(log, c.KernelProposed)
    assert kernel.llm_call_id == calls[1].event_id


def test_tuner_applies_the_plan(nats_server):
    req = impl_request(0, plan="**Increase TILE_J from 32 to 64**\nCHANGE: TILE_J 32 -> 64")
    log = asyncio.run(
        run_agent(nats_server.url, "executor", llm_config("builtin/tuner"), RUN, scale_add_problem(), [req])
    )
    [kernel] = of_type(log, c.KernelProposed)
    assert kernel.source == TILED
