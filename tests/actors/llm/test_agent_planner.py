"""Planner against a real nats-server: PlanRequested -> LLMCallCompleted + PlanProposed,
or ProposalFailed; ids derived from the request (a redelivery de-duplicates)."""

from __future__ import annotations

import asyncio

import litellm
from llm_helpers import (
    SCALE_ADD_C,
    envelope,
    llm_config,
    of_type,
    run_agent,
    sample_profile,
    scale_add_problem,
)

from accelopt import catalog as c
from actors.roles.llm_roles import ROLE_WORKERS
from events.log import EventLog
from events.subjects import role_filter

RUN = "plan-run"


def plan_request(run_id: str = RUN, sample_index: int = 0, problem: str = "scale_add") -> c.PlanRequested:
    insight = c.RetrievedInsight(
        entry_id="m1",
        problem="matmul",
        device="cpu",
        language="c",
        speedup=1.3,
        title="Increase TILE_J (32 -> 64)",
        text="Larger tiles.",
    )
    return c.PlanRequested(
        **envelope(run_id, "PlanRequested", problem, 1, "k0", sample_index),
        problem=problem,
        iteration=1,
        candidate_id="k0",
        sample_index=sample_index,
        language="c",
        device="cpu",
        candidate_source=SCALE_ADD_C,
        candidate_profile=sample_profile(),
        insights=[insight],
    )


def test_plan_from_a_reasoning_model(nats_server, scripted):
    model, script = scripted(
        {
            "planner": [
                "<think>The profile says memory bound.</think>\nIncrease TILE_J to 64 to stream longer rows."
            ]
        }
    )
    req = plan_request()
    log = asyncio.run(
        run_agent(nats_server.url, "planner", llm_config(model), RUN, scale_add_problem(), [req])
    )
    [call] = of_type(log, c.LLMCallCompleted)
    [plan] = of_type(log, c.PlanProposed)
    assert plan.plan == "Increase TILE_J to 64 to stream longer rows."
    assert plan.event_id == c.derive_event_id(RUN, "PlanProposed", req.event_id)
    assert plan.request_id == req.event_id and plan.candidate_id == "k0" and plan.llm_call_id == call.event_id
    assert call.role == "planner" and call.request_id == req.event_id and call.model == model
    user = call.messages[1].content
    assert "- M = 1024" in user and "percent_of_peak: 20.0%" in user
    assert "device cpu, language c: 1.30x faster" in call.messages[0].content
    assert script.calls[0].metadata["seed"] == 7  # the run's seed from RunStarted
    assert log.index(call) < log.index(plan)


def test_tuner_plans_and_samples_differ(nats_server):
    reqs = [plan_request(sample_index=i) for i in range(3)]
    log = asyncio.run(
        run_agent(nats_server.url, "planner", llm_config("builtin/tuner"), RUN, scale_add_problem(), reqs)
    )
    plans = of_type(log, c.PlanProposed)
    assert len(plans) == 3 and len(of_type(log, c.LLMCallCompleted)) == 3
    assert all("CHANGE: " in p.plan for p in plans)
    assert len({p.plan for p in plans}) == 3


def test_llm_error_after_retries_becomes_proposal_failed(nats_server, scripted):
    auth = litellm.AuthenticationError(message="invalid api key", llm_provider="openai", model="m")
    model, _ = scripted([auth])
    req = plan_request()
    log = asyncio.run(
        run_agent(nats_server.url, "planner", llm_config(model, retries=3), RUN, scale_add_problem(), [req])
    )
    [call] = of_type(log, c.LLMCallCompleted)
    [failed] = of_type(log, c.ProposalFailed)
    assert call.error.startswith("AuthenticationError")
    assert failed.stage == "plan" and failed.reason == "llm error: AuthenticationError"
    assert failed.llm_call_id == call.event_id and failed.request_id == req.event_id
    assert not of_type(log, c.PlanProposed)


def test_unknown_problem_fails_at_once(nats_server):
    req = plan_request(problem="nope")
    log = asyncio.run(
        run_agent(nats_server.url, "planner", llm_config("builtin/tuner"), RUN, scale_add_problem(), [req])
    )
    [failed] = of_type(log, c.ProposalFailed)
    assert failed.reason == "unknown problem" and "nope" in failed.detail
    assert not of_type(log, c.LLMCallCompleted)


def test_handling_a_request_twice_publishes_nothing_new(nats_server):
    cfg = llm_config("builtin/tuner")
    req = plan_request()
    log = asyncio.run(run_agent(nats_server.url, "planner", cfg, RUN, scale_add_problem(), [req]))

    async def again():
        agent = ROLE_WORKERS["planner"](nats_server.url, cfg)
        await agent.connect()
        try:
            outputs = await agent.handle(req)
            elog = await EventLog.connect(nats_server.url)
            results = [await elog.publish(e) for e in outputs]
            history = await elog.history(RUN)
            await elog.close()
            return results, history
        finally:
            await agent.close()

    results, history = asyncio.run(again())
    assert results and all(r.duplicate for r in results)
    assert len(history) == len(log)


def test_agent_defaults():
    agent = ROLE_WORKERS["planner"]("nats://127.0.0.1:1", llm_config("builtin/tuner", concurrency=3))
    assert agent.options.durable == "planner" and agent.options.concurrency == 3
    assert agent.options.filter_subject == role_filter("PlanRequested")
