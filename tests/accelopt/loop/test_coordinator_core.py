"""The coordinator's pure core, driven by a simulated world (see sim.py: no LLM, no device;
the real end-to-end runs are in test_run_*.py)."""

from __future__ import annotations

import msgspec
import pytest
from sim import tile

from accelopt import catalog as c


def of(log, t):
    return [e for e in log if isinstance(e, t)]


def test_run_completes_with_the_configured_shape(simulate, sim_world):
    _core, log, _ = simulate(["search.fix_rounds=0", "memory.enabled=false"])
    assert isinstance(log[-1], c.RunCompleted) and log[-1].reason == "completed"
    for name in ("a", "b"):
        its = [e for e in of(log, c.IterationCompleted) if e.problem == name]
        assert [e.iteration for e in its] == [0, 1, 2, 3]
        plans = [e for e in of(log, c.PlanRequested) if e.problem == name]
        # iteration 1 has beam 1 (baseline), later ones up to B=2: N=2 plans per candidate
        assert len([p for p in plans if p.iteration == 1]) == 2
        assert all(len([p for p in plans if p.iteration == i]) in (2, 4) for i in (2, 3))


def test_elitist_beam_never_loses_the_best(simulate, sim_world):
    _, log, _ = simulate(["memory.enabled=false", "search.iterations=6"])
    for name in ("a", "b"):
        lat = [e.best_latency_ms for e in of(log, c.IterationCompleted) if e.problem == name]
        assert lat == sorted(lat, reverse=True)
        assert lat[-1] < lat[0]  # the search found something faster


def test_a_candidate_planned_again_draws_new_samples(simulate, sim_world):
    """A candidate the beam keeps is planned again in the next iteration with the next sample
    indices: the same prompt with the same index would be served the cached (or the same
    deterministic) plans, and the iteration would re-profile kernels it already has."""

    class BaselineStaysBest(sim_world):
        def answer(self, e: c.Event) -> list[c.Event]:
            out = super().answer(e)
            if isinstance(e, c.ProfileRequested) and out[0].profile.latency is not None:
                t = float(tile(e.source))  # every plan raises TILE, so every new kernel is slower
                lat = msgspec.structs.replace(
                    out[0].profile.latency, samples_ms=[t], median_ms=t, min_ms=t, max_ms=t
                )
                out = [
                    msgspec.structs.replace(
                        out[0], profile=msgspec.structs.replace(out[0].profile, latency=lat)
                    )
                ]
            return out

    _, log, _ = simulate(["memory.enabled=false", "search.iterations=4"], world=BaselineStaysBest())
    for name in ("a", "b"):
        by_candidate: dict[str, list[int]] = {}
        for e in of(log, c.PlanRequested):
            if e.problem == name:
                by_candidate.setdefault(e.candidate_id, []).append(e.sample_index)
        assert any(len(v) > 2 for v in by_candidate.values())  # the baseline stays in the elitist beam
        for indices in by_candidate.values():
            assert indices == list(range(len(indices)))  # 0, 1, then 2, 3, ...: never the same draw twice


def test_decisions_do_not_depend_on_result_order(simulate, sim_world):
    _, log1, _ = simulate([], shuffle_seed=1)
    _, log2, _ = simulate([], shuffle_seed=2)
    ids1 = sorted(e.event_id for e in log1)
    ids2 = sorted(e.event_id for e in log2)
    assert ids1 == ids2


def test_with_content_ids_a_kernel_two_plans_reach_decides_the_same_in_any_order(simulate, sim_world):
    """Kernels named by content: plans that move TILE up or down a power of two come back to
    kernels already proposed (in this iteration or an earlier one). Whichever proposal
    arrives first owns the kernel, but each counts as a sample of its own plan, so the beams
    and the pairs summarized are the same in any order of the results, and no kernel is
    profiled twice or summarized twice."""

    class Converging(sim_world):
        def answer(self, e: c.Event) -> list[c.Event]:
            out = super().answer(e)
            if isinstance(e, c.PlanRequested):
                t = tile(e.candidate_source)
                new = t * 2 if e.sample_index % 2 == 0 else max(1, t // 2)
                out = [out[0], msgspec.structs.replace(out[1], plan=f"TILE={new}")]
            return out

    runs = [
        simulate(
            ["memory.enabled=false", "search.iterations=4"],
            world=Converging(),
            shuffle_seed=seed,
            kernel_ids="content",
        )[1]
        for seed in (None, 1, 2, 3)
    ]
    decided = []
    for log in runs:
        assert isinstance(log[-1], c.RunCompleted)
        proposed = of(log, c.KernelProposed)
        assert len(proposed) > len({k.kernel_id for k in proposed})  # kernels were proposed again
        profiled = [e.kernel_id for e in of(log, c.ProfileRequested) if e.purpose != "remeasure"]
        assert sorted(profiled) == sorted({k.kernel_id for k in proposed})  # each once
        pairs = [frozenset((e.slow_kernel_id, e.fast_kernel_id)) for e in of(log, c.SummaryRequested)]
        assert pairs and len(pairs) == len(set(pairs))  # each pair learnt once
        decided.append(
            (
                sorted(e.event_id for e in log),
                sorted(
                    (e.problem, e.iteration, tuple(m.kernel_id for m in e.beam))
                    for e in of(log, c.BeamSelected)
                ),
                sorted(map(sorted, pairs)),
            )
        )
    assert all(d == decided[0] for d in decided[1:])


def test_fixer_loop_repairs_broken_kernels_and_counts_rounds(simulate, sim_world):
    _, log, _ = simulate(["memory.enabled=false", "search.fix_rounds=2"], world=sim_world(broken_every=2))
    fixes = of(log, c.FixRequested)
    assert fixes and all(f.fix_round == 1 for f in fixes)  # each repaired in one round
    fixed = [k for k in of(log, c.KernelProposed) if k.fix_of]
    assert {k.fix_of for k in fixed} == {f.kernel_id for f in fixes}
    profiled = {e.kernel_id: e.profile.status for e in of(log, c.KernelProfiled)}
    assert all(profiled[k.kernel_id] == "passed" for k in fixed)


def test_fix_budget_zero_means_no_fixes(simulate, sim_world):
    _, log, _ = simulate(["memory.enabled=false", "search.fix_rounds=0"], world=sim_world(broken_every=2))
    assert of(log, c.FixRequested) == []
    assert log[-1].type == "RunCompleted"


def test_backpressure_bounds_requests_in_flight(simulate, sim_world):
    _, log, peak = simulate(
        [
            "memory.enabled=false",
            "limits.llm_inflight_per_role=1",
            "limits.profiles_inflight_per_device=1",
            "search.plans_per_candidate=3",
        ],
        shuffle_seed=5,
    )
    assert log[-1].type == "RunCompleted"
    assert peak["PlanRequested"] == 1 and peak["profile"] == 1 and peak["ImplementationRequested"] == 1


def test_budget_stop(simulate, sim_world):
    core, log, _ = simulate(["memory.enabled=false", "llm.budget_usd=0.05"], world=sim_world(cost=0.01))
    assert len(of(log, c.BudgetExceeded)) == 1
    assert log[-1].type == "RunCompleted" and log[-1].reason == "budget"
    over = of(log, c.BudgetExceeded)[0]
    later_requests = [e for e in log[log.index(over) :] if isinstance(e, c.PlanRequested)]
    assert later_requests == []
    assert core.spent_usd == pytest.approx(sum(e.cost_usd for e in of(log, c.LLMCallCompleted)))


def test_memory_retrieval_precedes_planning_and_entries_are_added(simulate, sim_world):
    _, log, _ = simulate([])
    first_mem = next(i for i, e in enumerate(log) if isinstance(e, c.MemoryRetrieved))
    first_plan = next(i for i, e in enumerate(log) if isinstance(e, c.PlanRequested))
    assert first_mem < first_plan
    assert of(log, c.MemoryEntryAdded)
    for e in of(log, c.MemoryEntryAdded):
        assert e.entry.speedup > 1.0 and e.entry.slow_kernel and e.entry.fast_kernel


def test_summaries_follow_the_thresholds(simulate, sim_world):
    _, log, _ = simulate(["memory.enabled=false", "search.iterations=5"])
    for s in of(log, c.SummaryRequested):
        assert s.speedup > 1.04 if s.positive else s.speedup > 1.15
    per_iter: dict[tuple[str, int], list] = {}
    for s in of(log, c.SummaryRequested):
        per_iter.setdefault((s.problem, s.iteration), []).append(s)
    assert all(len(v) <= 8 and sum(x.positive for x in v) <= 4 for v in per_iter.values())
