"""Scripted-LLM runs through the real agents, gateway and parsing, driven by the pure
coordinator core in-process (no NATS, no Ray: the full-run tests with actors are in
tests/accelopt/loop). The scripted model answers in the shapes real models give, including prose
with no code, chatter around fenced kernels, <think> reasoning and kernels that do not
compile; kernels are "profiled" by compiling them with the system C compiler and timing
them from their TILE_J. Covers the fixer loop, failure events and the budget stop."""

from __future__ import annotations

import asyncio
import itertools
import re
import shutil
import subprocess
from typing import Any

import pytest
from llm_helpers import envelope, scale_add_problem
from scripted_llm import Reply

from accelopt import catalog as c
from accelopt.config import build_config
from accelopt.coordinator import CoordinatorCore
from accelopt.profile import LatencyStats, Profile
from actors.llm.gateway import LLMGateway
from actors.llm.role_table import tuner_reply
from actors.roles.llm_roles import ROLE_WORKERS

RUN = "scripted-loop"
CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")


class Contexts:
    """Stands in for actors.base.run_context.RunContexts (the run's RunStarted, without NATS)."""

    def __init__(self, started: c.RunStarted) -> None:
        self.s = started

    async def started(self, run_id: str) -> c.RunStarted:
        return self.s

    async def target(self, run_id: str, problem: str) -> c.ProblemTarget:
        return next(t for t in self.s.targets if t.problem.name == problem)


def profile(req: c.ProfileRequested) -> c.KernelProfiled:
    proc = subprocess.run(
        [CC, "-std=c11", "-fsyntax-only", "-fopenmp", "-DM=1024", "-DN=256", "-x", "c", "-"],
        input=req.source,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode:
        prof = Profile(status="compile_error", device="cpu", log=proc.stderr)
    else:
        tile = int(re.search(r"#define TILE_J (\d+)", req.source).group(1))
        lat = 8.0 / min(tile, 128) + (0.2 if tile > 128 else 0.0)
        prof = Profile(
            status="passed",
            device="cpu",
            peak_fraction=0.1,
            t_peak_ms=0.01,
            latency=LatencyStats(samples_ms=[lat], median_ms=lat, min_ms=lat, max_ms=lat, spread=0.0),
        )
    return c.KernelProfiled(
        **envelope(RUN, "KernelProfiled", req.event_id),
        kernel_id=req.kernel_id,
        problem=req.problem,
        device="cpu",
        request_id=req.event_id,
        profile=prof,
    )


def model_like_replies() -> dict[str, list[Any]]:
    """Replies as a real model would phrase them; the content itself comes from the tuner."""
    n = itertools.count()

    def planner(messages):
        return "<think>The kernel is memory bound; a wider tile helps.</think>\n" + tuner_reply(
            messages, "planner"
        )

    def executor(messages):
        i = next(n)
        kernel = re.search(r"```c\n(.*?)```", tuner_reply(messages, "executor"), re.DOTALL).group(1)
        if i % 4 == 1:
            return "You should widen the tile as the plan says; the rest of the kernel can stay as it is."
        if i % 4 == 2:
            kernel = kernel.replace("ALPHA *", "ALPHA * undeclared_scale *")
        return f"Here is the optimized kernel:\n\n```c\n{kernel}```\n\nIt follows the plan exactly."

    def fixer(messages):
        return "The identifier was never declared; here is the corrected kernel.\n" + tuner_reply(
            messages, "fixer"
        )

    def summarizer(messages):
        return tuner_reply(messages, "summarizer")

    many = 500
    return {
        "planner": [Reply(text=planner)] * many,
        "executor": [Reply(text=executor)] * many,
        "fixer": [Reply(text=fixer)] * many,
        "summarizer": [Reply(text=summarizer)] * many,
    }


def drive(model: str, overrides: list[str], base: dict | None = None, max_steps: int = 5000):
    roles = [f"llm.{role}.model={model}" for role in ROLE_WORKERS]
    cfg = build_config(preset="quick", overrides=[*roles, "memory.enabled=false", *overrides], base=base)
    started = c.RunStarted(
        **envelope(RUN, "RunStarted"),
        config=cfg.to_dict(),
        seed=11,
        targets=[c.ProblemTarget(problem=scale_add_problem(), device="cpu", language="c", content_hash="h")],
    )
    gateway = LLMGateway(cfg.llm, backoff_base_s=0.01)
    agents = {}
    for role, cls in ROLE_WORKERS.items():
        agent = cls("nats://unused:4222", cfg.llm, gateway=gateway)
        agent._contexts = Contexts(started)  # type: ignore[assignment]
        agents[role] = agent
    core = CoordinatorCore(RUN, clock=lambda: 0.0)
    log: list[c.Event] = []

    async def go() -> None:
        inbox: list[c.Event] = [started]
        steps = 0
        while inbox and steps < max_steps and not core.finished:
            steps += 1
            e = inbox.pop(0)
            log.append(e)
            result = core.step(e)
            for o in result.outputs:
                log.append(o)
                role = c.ROLE_OF_REQUEST.get(type(o))
                if role:
                    inbox += await agents[role].handle(o)
                elif isinstance(o, c.ProfileRequested):
                    inbox.append(profile(o))
            for eff in result.effects:
                assert not isinstance(eff, c.MemoryRequested)
            if isinstance(e, c.RunCompleted):
                break

    asyncio.run(go())
    return log


def of(log, t):
    return [e for e in log if isinstance(e, t)]


def test_scripted_run_parses_fixes_and_records_failures(scripted):
    model, _ = scripted(model_like_replies())
    log = drive(model, ["search.fix_rounds=2", "search.iterations=3"])
    assert log[-1].type == "RunCompleted" and log[-1].reason == "completed"
    # every LLM request was answered by a recorded call
    requests = {e.event_id for e in log if type(e) in c.ROLE_OF_REQUEST}
    assert requests <= {e.request_id for e in of(log, c.LLMCallCompleted)}
    # prose with no code -> a failure event with the reason
    failed = of(log, c.ProposalFailed)
    assert failed and all(f.stage == "implement" and f.reason == "no code block in reply" for f in failed)
    # a kernel that does not compile -> FixRequested -> a fixed kernel that compiles and passes
    fixes = of(log, c.FixRequested)
    assert fixes and all("undeclared_scale" in f.error_log for f in fixes)
    profiled = {e.kernel_id: e.profile.status for e in of(log, c.KernelProfiled)}
    fixed = [k for k in of(log, c.KernelProposed) if k.fix_of]
    assert fixed and all(profiled[k.kernel_id] == "passed" for k in fixed)
    # plans were stripped of reasoning, and the search got faster than the baseline
    assert all("<think>" not in p.plan for p in of(log, c.PlanProposed))
    done = of(log, c.IterationCompleted)
    assert done[-1].best_latency_ms < done[0].best_latency_ms
    insights = [i for i in of(log, c.InsightSummarized) if not i.noop]
    assert insights and all(
        re.match(r"(Increase|Decrease) TILE_J|(Increase|Decrease) UNROLL", i.title) for i in insights
    )


def test_budget_stop_from_recorded_costs(scripted):
    model, _ = scripted(model_like_replies())
    price = {"input_cost_per_token": 1e-5, "output_cost_per_token": 1e-5}
    log = drive(
        model, ["llm.budget_usd=0.05", "search.iterations=5"], base={"llm": {"prices": {model: price}}}
    )
    spent = sum(e.cost_usd for e in of(log, c.LLMCallCompleted))
    [over] = of(log, c.BudgetExceeded)
    assert log[-1].type == "RunCompleted" and log[-1].reason == "budget"
    assert over.spent_usd >= 0.05 and spent >= 0.05
    assert all(e.cost_usd > 0 for e in of(log, c.LLMCallCompleted))
