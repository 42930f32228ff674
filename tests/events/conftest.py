"""A sample of every event type, for round trips and benchmarks."""

from __future__ import annotations

import pytest

from accelopt import catalog as c
from accelopt.problem import (
    AxisConst,
    Definition,
    Problem,
    Roofline,
    TensorSpec,
    Workload,
    one_file_solution,
)
from accelopt.profile import LatencyStats, Profile, SeedCheck
from accelopt.records import ChatMessage, MemoryEntry, ModelPrice, TokenUsage


def sample_problem() -> Problem:
    d = Definition(
        name="silu",
        op_type="elementwise",
        axes={"M": AxisConst(value=64), "N": AxisConst(value=32)},
        inputs={"x": TensorSpec(shape=["M", "N"], dtype="float32")},
        outputs={"y": TensorSpec(shape=["M", "N"], dtype="float32")},
        reference="def run(x):\n    return x * torch.sigmoid(x)\n",
        x_roofline=Roofline(flops_vector="3*M*N", bytes_min="8*M*N"),
    )
    s = one_file_solution("silu", "void silu(const float* x, float* y) {}\n", entry_point="kernel.c::silu")
    return Problem(definition=d, workload=Workload(uuid="w1"), baseline=s)


def make_sample_events(run_id: str) -> list[c.Event]:
    def env(kind: str, *key: object) -> dict:
        return {"event_id": c.derive_event_id(run_id, kind, *key), "run_id": run_id, "ts": 1700000000.5}

    p = sample_problem()
    prof = Profile(
        status="passed",
        device="cpu",
        correctness=[SeedCheck(case="seed0", passed=True, rel_l2=1e-7)],
        latency=LatencyStats(samples_ms=[1.0, 1.1], median_ms=1.05, min_ms=1.0, max_ms=1.1, spread=0.1),
        t_peak_ms=0.5,
        peak_fraction=0.47,
        bound="memory",
        counters={"x": 1.0},
        toolchain={"gcc": "12"},
    )
    entry = MemoryEntry(
        id="m1",
        source_run=run_id,
        problem="silu",
        op_type="elementwise",
        device="cpu",
        language="c",
        slow_kernel="a",
        fast_kernel="b",
        speedup=1.3,
        title="**Unroll**",
        text="unroll by 4",
        created_at=1.0,
    )
    ins = c.RetrievedInsight(
        entry_id="m1",
        problem="silu",
        device="cpu",
        language="c",
        speedup=1.3,
        title="Unroll",
        text="unroll by 4",
        score=0.9,
    )
    return [
        c.RunStarted(
            **env("RunStarted"),
            config={"beam": {"width": 2}},
            seed=7,
            targets=[c.ProblemTarget(problem=p, device="cpu", language="c", content_hash="h")],
            prices={"builtin/tuner": ModelPrice(input_cost_per_token=0.0, output_cost_per_token=0.0)},
            toolchain={"gcc": "12"},
        ),
        c.IterationStarted(**env("IterationStarted", 1), problem="silu", iteration=1, beam=["k0"]),
        c.MemoryRequested(
            **env("MemoryRequested", 1),
            result_id="mr1",
            problem="silu",
            op_type="silu",
            device="cpu",
            language="c",
            iteration=1,
            candidate_id="k0",
            candidate_source="void silu(){}",
            memory={"top_m": 4},
            expect_entry_ids=["m0"],
        ),
        c.MemoryRetrieved(
            **env("MemoryRetrieved", 1),
            problem="silu",
            iteration=1,
            candidate_id="k0",
            query="silu",
            entries=[ins],
        ),
        c.PlanRequested(
            **env("PlanRequested", 1), problem="silu", iteration=1, candidate_id="k0", sample_index=0
        ),
        c.LLMCallCompleted(
            **env("LLMCallCompleted", 1),
            role="planner",
            request_id="r1",
            model="builtin/tuner",
            params={"temperature": 0.0},
            messages=[ChatMessage(role="user", content="hi")],
            response="plan",
            usage=TokenUsage(prompt_tokens=3, completion_tokens=4),
            cost_usd=0.0,
            latency_s=0.01,
            content_hash="ch",
        ),
        c.PlanProposed(
            **env("PlanProposed", 1),
            problem="silu",
            iteration=1,
            candidate_id="k0",
            request_id="r1",
            plan="unroll",
            llm_call_id="l1",
        ),
        c.ImplementationRequested(
            **env("ImplementationRequested", 1),
            problem="silu",
            iteration=1,
            candidate_id="k0",
            plan_id="p1",
            sample_index=0,
        ),
        c.KernelProposed(
            **env("KernelProposed", 1),
            kernel_id="k1",
            problem="silu",
            iteration=1,
            parent_id="k0",
            plan_id="p1",
            request_id="i1",
            language="c",
            source="void silu(){}",
        ),
        c.ProposalFailed(
            **env("ProposalFailed", 1),
            stage="implement",
            request_id="i2",
            problem="silu",
            iteration=1,
            reason="no code block",
        ),
        c.ProfileRequested(
            **env("ProfileRequested", 1),
            kernel_id="k1",
            problem="silu",
            device="cpu",
            language="c",
            source="void silu(){}",
        ),
        c.KernelProfiled(
            **env("KernelProfiled", 1),
            kernel_id="k1",
            problem="silu",
            device="cpu",
            request_id="q1",
            profile=prof,
        ),
        c.ProfileCancelled(
            **env("ProfileCancelled", "q1"),
            request_id="q1",
            reason="the agent cancelled the call",
        ),
        c.FixRequested(
            **env("FixRequested", 1),
            kernel_id="k1",
            parent_id="k0",
            plan_id="pl1",
            problem="silu",
            iteration=1,
            fix_round=1,
            error_log="error: x",
        ),
        c.BeamSelected(
            **env("BeamSelected", 1),
            problem="silu",
            iteration=1,
            beam=[c.BeamMember(kernel_id="k1", latency_ms=1.05, peak_fraction=0.47)],
            best_kernel_id="k1",
        ),
        c.SummaryRequested(
            **env("SummaryRequested", 1),
            problem="silu",
            iteration=1,
            slow_kernel_id="k0",
            fast_kernel_id="k1",
            speedup=1.3,
            positive=True,
        ),
        c.InsightSummarized(
            **env("InsightSummarized", 1),
            problem="silu",
            iteration=1,
            request_id="s1",
            title="Unroll",
            text="unroll by 4",
        ),
        c.MemoryEntryAdded(**env("MemoryEntryAdded", 1), entry=entry),
        c.MemoryIndexed(**env("MemoryIndexed", 1), entry_id=entry.id),
        c.AgentMemoryEntryAdded(
            **env("AgentMemoryEntryAdded", 1), entry=entry, client="claude-code 2.1.0", pair_id="p1"
        ),
        c.IterationCompleted(
            **env("IterationCompleted", 1),
            problem="silu",
            iteration=1,
            best_kernel_id="k1",
            best_latency_ms=1.05,
            best_pct_peak=0.47,
            kept=["k0", "k1"],
        ),
        c.ProblemRemeasured(
            **env("ProblemRemeasured", 1),
            problem="silu",
            rounds=2,
            seed_offsets=[700000, 710000],
            baseline=c.RemeasuredSide(kernel_id="k0", rounds_ms=[2.0, 2.2], median_ms=2.1, spread=0.05),
            best=c.RemeasuredSide(
                kernel_id="k1", rounds_ms=[1.0, 1.1], median_ms=1.05, spread=0.04, peak_fraction=0.47
            ),
            recorded_speedup=1.3,
            speedup=2.0,
            noise=0.09,
            agrees=False,
        ),
        c.BudgetExceeded(**env("BudgetExceeded"), spent_usd=1.01, budget_usd=1.0),
        *campaign_events(env, p),
        c.RunFailed(**env("RunFailed"), reason="test", detail="none"),
        c.RunCompleted(**env("RunCompleted"), reason="done", best_kernel_ids={"silu": "k1"}),
    ]


def campaign_events(env, p: Problem) -> list[c.Event]:
    item = c.CampaignItem(
        key="cpu_v2/silu@cpu",
        suite="cpu_v2",
        problem="silu",
        device="cpu",
        language="c",
        op_type="elementwise",
        content_hash=p.content_hash(),
    )
    score = c.ScheduleScore(
        score=0.5,
        headroom=0.9,
        expected_gain=0.2,
        new_insights=1,
        cost_usd=0.0,
        runs=0,
        expected_s=60.0,
        why="w",
    )
    return [
        c.CampaignStarted(
            **env("CampaignStarted"),
            name="n",
            spec={"problems": ["cpu_v2/silu@cpu"]},
            items=[item],
            root="runs",
            memory_uri="/m",
            max_call_usd=0.01,
        ),
        c.CampaignResumed(**env("CampaignResumed", 1), attempt=1),
        c.CampaignTicked(**env("CampaignTicked", 1), why="day"),
        c.CampaignRunScheduled(
            **env("CampaignRunScheduled", 1),
            run="c-r001",
            index=1,
            item=item.key,
            device="cpu",
            seed=1,
            policy="expected_gain",
            reason=score,
            queue=[c.QueueEntry(item=item.key, state="picked", score=0.5, why="w")],
            day="2026-01-01",
            budget_usd=1.25,
            llm_inflight=4,
        ),
        c.CampaignRunFinished(
            **env("CampaignRunFinished", 1),
            run="c-r001",
            item=item.key,
            status="completed",
            gain=1.5,
            gain_source="remeasured",
            best_kernel_id="k1",
            best_source="src",
            memory_entries=["m1"],
        ),
        c.CampaignItemMeasured(
            **env("CampaignItemMeasured", 1),
            run="c1-r001",
            item="cpu_v2/silu@cpu",
            method="interleaved",
            rounds=2,
            seed_offsets=[5, 6],
            origin=c.RemeasuredSide(kernel_id="k0", rounds_ms=[2.0, 2.1], median_ms=2.05),
            candidate=c.RemeasuredSide(kernel_id="k1", rounds_ms=[1.0, 1.1], median_ms=1.05),
        ),
        c.CampaignBudgetSpent(
            **env("CampaignBudgetSpent", 1),
            run="c-r001",
            day="2026-01-01",
            spent_usd=0.5,
            day_spent_usd=0.5,
            total_usd=2.0,
            daily_usd=None,
        ),
        c.CampaignDeviceParked(**env("CampaignDeviceParked", "h100"), device="h100", reason="r", items=[]),
        c.CampaignPaused(**env("CampaignPaused", 1), reason="day", until_ts=1.0),
        c.CampaignStopped(**env("CampaignStopped"), reason="settled", detail="d"),
    ]


@pytest.fixture
def sample_events():
    return make_sample_events
