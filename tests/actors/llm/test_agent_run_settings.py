"""Agents are shared by every run on the log: each request is answered with its own run's
LLM settings (from RunStarted), whatever config the agent was started with."""

from __future__ import annotations

import asyncio

from llm_helpers import llm_config, of_type, run_agent, scale_add_problem
from test_agent_planner import plan_request

from accelopt import catalog as c
from accelopt.config import build_config


def test_a_shared_planner_uses_each_runs_own_model(nats_server, scripted):
    agent_model, agent_script = scripted(["Plan from the agent's own model."])
    run_model, run_script = scripted(["Increase TILE_J to 64."])
    run_cfg = build_config(
        overrides=[f"llm.default.model={run_model}", "llm.planner.temperature=0.25"]
    ).to_dict()
    req = plan_request(run_id="shared-run")
    log = asyncio.run(
        run_agent(
            nats_server.url,
            "planner",
            llm_config(agent_model),
            "shared-run",
            scale_add_problem(),
            [req],
            run_config=run_cfg,
        )
    )
    [call] = of_type(log, c.LLMCallCompleted)
    assert call.model == run_model and call.params["temperature"] == 0.25
    assert len(run_script.calls) == 1 and not agent_script.calls
    [plan] = of_type(log, c.PlanProposed)
    assert "TILE_J" in plan.plan
