"""Summarizer against a real nats-server: insights, no-ops, the tuner's insight."""

from __future__ import annotations

import asyncio

from llm_helpers import SCALE_ADD_C, envelope, llm_config, of_type, run_agent, scale_add_problem

from accelopt import catalog as c

RUN = "sum-run"
FAST = SCALE_ADD_C.replace("#define TILE_J 32", "#define TILE_J 64")


def summary_request(
    key: str, fast: str = FAST, speedup: float = 1.37, positive: bool = True
) -> c.SummaryRequested:
    return c.SummaryRequested(
        **envelope(RUN, "SummaryRequested", key),
        problem="scale_add",
        iteration=2,
        slow_kernel_id="ks",
        fast_kernel_id="kf",
        speedup=speedup,
        positive=positive,
        language="c",
        device="cpu",
        slow_source=SCALE_ADD_C,
        fast_source=fast,
    )


INSIGHT = (
    "**Widen the column tile**\nA 64-column tile halves the loop overhead per row and keeps x and y "
    "streaming; apply it to elementwise kernels with short inner loops (1.37x here).\n"
    "Original code:\n```c\n#define TILE_J 32\n```\nOptimized code:\n```c\n#define TILE_J 64\n```\n"
)


def test_insight_and_noop(nats_server, scripted):
    model, script = scripted({"summarizer": [INSIGHT, "The kernels are identical. No optimization found."]})
    reqs = [summary_request("a"), summary_request("b", fast=SCALE_ADD_C, speedup=1.05)]
    log = asyncio.run(
        run_agent(
            nats_server.url, "summarizer", llm_config(model, concurrency=1), RUN, scale_add_problem(), reqs
        )
    )
    out = {e.request_id: e for e in of_type(log, c.InsightSummarized)}
    a, b = out[reqs[0].event_id], out[reqs[1].event_id]
    assert a.title == "Widen the column tile" and a.text == INSIGHT.strip() and not a.noop
    assert a.event_id == c.derive_event_id(RUN, "InsightSummarized", reqs[0].event_id)
    assert b.noop and b.title == "No optimization found"
    assert "# Speedup\n1.370x" in script.calls[0].messages[1]["content"]


def test_tuner_insight(nats_server):
    req = summary_request("t", speedup=1.25, positive=False)
    log = asyncio.run(
        run_agent(nats_server.url, "summarizer", llm_config("builtin/tuner"), RUN, scale_add_problem(), [req])
    )
    [ins] = of_type(log, c.InsightSummarized)
    assert ins.title == "Increase TILE_J (32 -> 64)" and "1.250x faster" in ins.text and not ins.noop


def test_empty_reply_fails(nats_server, scripted):
    model, _ = scripted({"summarizer": [""]})
    log = asyncio.run(
        run_agent(
            nats_server.url, "summarizer", llm_config(model), RUN, scale_add_problem(), [summary_request("e")]
        )
    )
    [failed] = of_type(log, c.ProposalFailed)
    assert failed.stage == "summarize" and failed.reason == "empty reply"
