"""A simulated world for the coordinator's pure core: it answers each request in-process
(no LLM, no device) so the state machine itself is under test. Its answers are simple
rules the tests assert on; the loop that drives the core is the synthetic logs' one
(`replay.synthetic.drive_core`)."""

from __future__ import annotations

import random
import re

from accelopt import catalog as c
from accelopt.config import build_config
from accelopt.coordinator import CoordinatorCore
from accelopt.problem import (
    AxisConst,
    Definition,
    Problem,
    Roofline,
    TensorSpec,
    Workload,
    one_file_solution,
)
from accelopt.profile import LatencyStats, Profile
from accelopt.records import TokenUsage
from replay.synthetic import drive_core

RUN = "sim"
BASE = "#define TILE 4\nvoid k(const float* x, float* y) { /* v */ }\n"


def problem(name: str) -> c.ProblemTarget:
    d = Definition(
        name=name,
        op_type="elementwise",
        axes={"N": AxisConst(value=8)},
        inputs={"x": TensorSpec(shape=["N"], dtype="float32")},
        outputs={"y": TensorSpec(shape=["N"], dtype="float32")},
        reference="def run(x): return x",
        x_roofline=Roofline(bytes_min="8*N"),
    )
    s = one_file_solution(name, BASE, entry_point="k.c::k", name=f"{name}_base")
    return c.ProblemTarget(
        problem=Problem(definition=d, workload=Workload(uuid="w"), baseline=s),
        device="cpu",
        language="c",
        content_hash=name,
    )


def tile(src: str) -> int:
    return int(re.search(r"#define TILE (\d+)", src).group(1))


class World:
    """Answers requests like agents and profilers would, deterministically."""

    def __init__(self, *, broken_every: int = 0, cost: float = 0.0) -> None:
        self.n = 0
        self.broken_every = broken_every
        self.cost = cost
        self.started: c.RunStarted | None = None  # the run's start: its rule names the kernels

    def kernel_id(self, request: c.ImplementationRequested | c.FixRequested, source: str) -> str:
        """The id the run gives the kernel `request` got back: the rule its RunStarted says."""
        assert self.started is not None
        return self.started.new_kernel_id(request.problem, request.language, source, request.event_id)

    def env(self, kind: str, *key: object) -> dict:
        return {"event_id": c.derive_event_id(RUN, kind, *key), "run_id": RUN, "ts": 0.0}

    def answer(self, e: c.Event) -> list[c.Event]:
        if isinstance(e, c.MemoryRequested):
            return [
                c.MemoryRetrieved(
                    event_id=e.result_id,
                    run_id=RUN,
                    ts=0.0,
                    problem=e.problem,
                    iteration=e.iteration,
                    candidate_id=e.candidate_id,
                    query="q",
                    entries=[],
                )
            ]
        if isinstance(e, c.PlanRequested):
            llm = c.LLMCallCompleted(
                **self.env("LLMCallCompleted", e.event_id),
                role="planner",
                request_id=e.event_id,
                model="m",
                params={},
                messages=[],
                response="",
                usage=TokenUsage(),
                cost_usd=self.cost,
                latency_s=0.0,
                content_hash="h",
            )
            new = tile(e.candidate_source) * (2 if e.sample_index % 2 == 0 else 1) + e.sample_index
            return [
                llm,
                c.PlanProposed(
                    **self.env("PlanProposed", e.event_id),
                    problem=e.problem,
                    iteration=e.iteration,
                    candidate_id=e.candidate_id,
                    request_id=e.event_id,
                    plan=f"TILE={new}",
                    llm_call_id=llm.event_id,
                ),
            ]
        if isinstance(e, c.ImplementationRequested):
            self.n += 1
            new = int(e.plan.split("=")[1])
            src = re.sub(r"#define TILE \d+", f"#define TILE {new}", e.candidate_source)
            if self.broken_every and self.n % self.broken_every == 0:
                src = "BROKEN " + src
            return [
                c.KernelProposed(
                    **self.env("KernelProposed", e.event_id),
                    kernel_id=self.kernel_id(e, src),
                    problem=e.problem,
                    iteration=e.iteration,
                    parent_id=e.candidate_id,
                    plan_id=e.plan_id,
                    request_id=e.event_id,
                    language="c",
                    source=src,
                )
            ]
        if isinstance(e, c.FixRequested):
            src = e.source.replace("BROKEN ", "")
            return [
                c.KernelProposed(
                    **self.env("KernelProposed", e.event_id),
                    kernel_id=self.kernel_id(e, src),
                    problem=e.problem,
                    iteration=e.iteration,
                    parent_id=e.parent_id,  # as the fixer: the lineage its request carries
                    plan_id=e.plan_id,
                    request_id=e.event_id,
                    language="c",
                    source=src,
                    fix_of=e.kernel_id,
                    fix_round=e.fix_round,
                )
            ]
        if isinstance(e, c.ProfileRequested):
            if e.source.startswith("BROKEN"):
                prof = Profile(status="compile_error", device="cpu", log="error: BROKEN")
            else:
                t = tile(e.source)
                lat = 10.0 / min(t, 64) + (0.5 if t > 64 else 0.0)  # faster up to 64, then worse
                prof = Profile(
                    status="passed",
                    device="cpu",
                    peak_fraction=0.1,
                    latency=LatencyStats(samples_ms=[lat], median_ms=lat, min_ms=lat, max_ms=lat, spread=0),
                )
            return [
                c.KernelProfiled(
                    **self.env("KernelProfiled", e.event_id),
                    kernel_id=e.kernel_id,
                    problem=e.problem,
                    device="cpu",
                    request_id=e.event_id,
                    profile=prof,
                )
            ]
        if isinstance(e, c.SummaryRequested):
            return [
                c.InsightSummarized(
                    **self.env("InsightSummarized", e.event_id),
                    problem=e.problem,
                    iteration=e.iteration,
                    request_id=e.event_id,
                    title="**TILE**",
                    text="t",
                )
            ]
        return []


def drive(
    overrides: list[str],
    *,
    world: World | None = None,
    shuffle_seed: int | None = None,
    problems=("a", "b"),
    max_steps: int = 100_000,
    kernel_ids: c.KernelIds = "request",
):
    """Run the core to completion; results are delivered in FIFO or shuffled order. Kernels
    are named by request (the rule of runs recorded before content ids) unless `kernel_ids`
    says "content"."""
    world = world or World()
    cfg = build_config(preset="quick", overrides=overrides)
    core = CoordinatorCore(RUN, clock=lambda: 0.0)
    start = c.RunStarted(
        **world.env("RunStarted"),
        config=cfg.to_dict(),
        seed=0,
        targets=[problem(p) for p in problems],
        kernel_ids=kernel_ids,
    )
    world.started = start
    rng = random.Random(shuffle_seed)
    max_inflight: dict[str, int] = {}
    outstanding: dict[str, set[str]] = {}

    def answered(e: c.Event) -> c.Event:
        if isinstance(
            e, (c.PlanProposed, c.KernelProposed, c.KernelProfiled, c.InsightSummarized, c.ProposalFailed)
        ):
            for pending in outstanding.values():
                pending.discard(e.request_id)
        return e

    def requested(o: c.Event) -> None:
        lane = o.type if o.type != "ProfileRequested" else "profile"
        outstanding.setdefault(lane, set()).add(o.event_id)
        max_inflight[lane] = max(max_inflight.get(lane, 0), len(outstanding[lane]))

    log = drive_core(
        core,
        start,
        world.answer,
        admit=answered,
        on_output=requested,
        max_steps=max_steps,
        pick=(lambda inbox: rng.randrange(len(inbox))) if shuffle_seed is not None else None,
    )
    return core, log, max_inflight
