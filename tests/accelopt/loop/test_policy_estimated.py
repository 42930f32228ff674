"""Estimated kernels (correct in an emulator, priced by a cost model, not timed: NKI without a
Trainium) rank among themselves by their estimate, after every measured kernel and before
untimed ones without an estimate; an estimate is never compared with a measurement; pairs of
estimated kernels become summaries and memory entries marked as estimated."""

from __future__ import annotations

from accelopt import catalog as ev
from accelopt.beam_policy import Scored, plan_pair, select_beam, select_summaries
from accelopt.coordinator import CoordinatorCore
from accelopt.profile import Estimate, Profile, SeedCheck
from accelopt.records import ESTIMATED_MARKER, is_estimated


def k(
    kid: str, order: int, *, ms: float | None = None, est: float | None = None, unmeasured: bool = False
) -> Scored:
    return Scored(
        kid,
        ms,
        passed=ms is not None,
        source_hash=kid,
        order=order,
        unmeasured=unmeasured or est is not None,
        estimated_ms=est,
    )


def test_measured_then_estimated_then_untimed() -> None:
    beam = [k("base", 0, est=5.0)]
    plans = [
        [k("slow", 1, est=9.0)],
        [k("fast", 2, est=1.0)],
        [k("timed", 3, ms=50.0)],
        [k("blind", 4, unmeasured=True)],
    ]
    assert [s.kernel_id for s in select_beam(beam, plans, 5)] == ["timed", "fast", "base", "slow", "blind"]


def test_estimated_pairs_never_mix_with_measured_latencies() -> None:
    samples = [k("est", 1, est=2.0), k("timed", 2, ms=0.001)]
    pair = plan_pair("parent", 4.0, samples, estimated=True)
    assert pair is not None and pair.child_id == "est" and pair.speedup == 2.0 and pair.estimated
    measured = plan_pair("parent", 4.0, samples)
    assert measured is not None and measured.child_id == "timed" and not measured.estimated
    picks = select_summaries(
        [pair], positive_threshold=1.04, negative_threshold=1.15, max_positive=4, max_total=8
    )
    assert picks and picks[0].estimated


def _profile(est_ms: float) -> Profile:
    return Profile(
        status="unmeasured",
        device="trn1",
        correctness=[SeedCheck(case="seed0", passed=True)],
        estimate=Estimate(latency_ms=est_ms, peak_fraction=0.1, model="test"),
    )


def test_the_coordinator_ranks_summarizes_and_marks_estimates() -> None:
    import msgspec

    import suites

    problem = suites.get_problem("nki_tune/silu")
    core = CoordinatorCore("r1", clock=lambda: 0.0)
    from accelopt.config import build_config

    cfg = build_config(
        overrides=[
            "search.iterations=1",
            "search.beam_width=1",
            "search.plans_per_candidate=1",
            "search.samples_per_plan=1",
            "search.remeasure_rounds=0",
            "memory.enabled=false",
        ]
    )
    target = ev.ProblemTarget(problem=problem, device="trn1", language="nki", content_hash="h")
    started = ev.RunStarted(
        event_id="s", run_id="r1", ts=0.0, config=msgspec.to_builtins(cfg), seed=0, targets=[target]
    )
    out = core.step(started).outputs
    base = next(e for e in out if isinstance(e, ev.KernelProposed))
    req = next(e for e in out if isinstance(e, ev.ProfileRequested))
    out = core.step(
        ev.KernelProfiled(
            event_id="p0",
            run_id="r1",
            ts=0.0,
            kernel_id=base.kernel_id,
            problem="silu",
            device="trn1",
            request_id=req.event_id,
            profile=_profile(4.0),
        )
    ).outputs
    done0 = next(e for e in out if isinstance(e, ev.IterationCompleted))
    assert done0.best_latency_ms is None and done0.best_estimated_ms == 4.0  # never as a measured latency
    plan_req = next(e for e in out if isinstance(e, ev.PlanRequested))
    out = core.step(
        ev.PlanProposed(
            event_id="pl",
            run_id="r1",
            ts=0.0,
            problem="silu",
            iteration=1,
            candidate_id=base.kernel_id,
            request_id=plan_req.event_id,
            plan="p",
            llm_call_id="c",
        )
    ).outputs
    impl = next(e for e in out if isinstance(e, ev.ImplementationRequested))
    out = core.step(
        ev.KernelProposed(
            event_id="k1",
            run_id="r1",
            ts=0.0,
            kernel_id="k1",
            problem="silu",
            iteration=1,
            parent_id=base.kernel_id,
            plan_id="pl",
            request_id=impl.event_id,
            language="nki",
            source=base.source + "\n# variant\n",
        )
    ).outputs
    req1 = next(e for e in out if isinstance(e, ev.ProfileRequested))
    out = core.step(
        ev.KernelProfiled(
            event_id="p1",
            run_id="r1",
            ts=0.0,
            kernel_id="k1",
            problem="silu",
            device="trn1",
            request_id=req1.event_id,
            profile=_profile(2.0),
        )
    ).outputs
    beam = next(e for e in out if isinstance(e, ev.BeamSelected))
    assert beam.best_kernel_id == "k1" and beam.beam[0].estimated_ms == 2.0 and beam.beam[0].latency_ms == 0.0
    summ = next(e for e in out if isinstance(e, ev.SummaryRequested))
    assert summ.estimated and summ.speedup == 2.0
    out = core.step(
        ev.InsightSummarized(
            event_id="i1",
            run_id="r1",
            ts=0.0,
            problem="silu",
            iteration=1,
            request_id=summ.event_id,
            title="Increase TILE_F",
            text="bigger tiles",
        )
    ).outputs
    entry = next(e for e in out if isinstance(e, ev.MemoryEntryAdded)).entry
    assert (
        is_estimated(entry.text)
        and entry.text.startswith(ESTIMATED_MARKER)
        and entry.text.endswith("bigger tiles")
    )
    done1 = next(e for e in out if isinstance(e, ev.IterationCompleted))
    assert done1.best_estimated_ms == 2.0 and done1.best_latency_ms is None
