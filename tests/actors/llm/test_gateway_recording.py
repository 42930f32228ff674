"""Recorded responses are served by content hash without calling the model (ablation replays)."""

from __future__ import annotations

import asyncio

from llm_helpers import llm_config

from accelopt.records import ChatMessage
from actors.llm.gateway import LLMGateway, content_hash, recording_from

MSGS = [ChatMessage(role="system", content="sys"), ChatMessage(role="user", content="Plan.")]


def test_recorded_call_is_served_and_the_model_not_called(scripted):
    model, script = scripted(["live plan"])
    cfg = llm_config(model)
    first = asyncio.run(
        LLMGateway(cfg).complete("planner", MSGS, run_id="r1", request_id="q", sample_index=2)
    )[-1]
    assert first.response == "live plan" and first.served_from is None
    assert first.content_hash == content_hash(model, MSGS, first.params, 2)

    assert recording_from([first]) == {first.content_hash: first}
    replay = LLMGateway(cfg, recording=recording_from([first]))
    served = asyncio.run(replay.complete("planner", MSGS, run_id="r2", request_id="q2", sample_index=2))
    assert len(served) == 1 and served[0].served_from == first.event_id
    assert served[0].response == "live plan" and served[0].cost_usd == 0.0 and served[0].run_id == "r2"
    assert len(script.calls) == 1  # the script had one reply: a live call would have failed

    other = asyncio.run(replay.complete("planner", MSGS, run_id="r2", request_id="q3", sample_index=3))
    assert other[-1].served_from is None and other[-1].error  # different sample index: a live call


def test_hash_covers_model_messages_params_and_sample_index():
    base = content_hash("m", MSGS, {"temperature": 0.0}, 0)
    assert base == content_hash("m", list(MSGS), {"temperature": 0.0}, 0)
    assert base != content_hash("m2", MSGS, {"temperature": 0.0}, 0)
    assert base != content_hash("m", MSGS[:1], {"temperature": 0.0}, 0)
    assert base != content_hash("m", MSGS, {"temperature": 1.0}, 0)
    assert base != content_hash("m", MSGS, {"temperature": 0.0}, 1)
