"""The search loop's phases and the rules the coordinator and the fold share (lineage of a
fix, the kernels kept), on the simulated world of sim.py (no LLM, no device)."""

from __future__ import annotations

from sim import RUN

from accelopt import catalog as c
from accelopt.coordinator import CoordinatorCore
from accelopt.search_state import Phase, kept_kernels
from replay.fold import RunView


def _phases(log: list[c.Event]) -> dict[str, list[Phase]]:
    """Each problem's phases in the order a fresh core is seen in them between two events of
    `log` (CLOSING lasts one step: the IterationCompleted it decides is folded in that step)."""
    core = CoordinatorCore(RUN, clock=lambda: 0.0)
    seen: dict[str, list[Phase]] = {}
    for e in log:
        core.step(e)
        for name, p in core.problems.items():
            phases = seen.setdefault(name, [])
            if not phases or phases[-1] != p.phase:
                phases.append(p.phase)
    return seen


def test_each_iteration_searches_then_summarizes_and_the_problem_ends_remeasured(simulate):
    _, log, _ = simulate(["memory.enabled=false", "search.iterations=2"])
    iteration = [Phase.SEARCH, Phase.SUMMARIZE]
    for phases in _phases(log).values():
        assert phases == [Phase.BASELINE, *iteration, *iteration, Phase.REMEASURE, Phase.DONE]


def test_without_a_re_measure_a_problem_is_done_after_its_last_iteration(simulate):
    _, log, _ = simulate(["memory.enabled=false", "search.iterations=1", "search.remeasure_rounds=0"])
    for phases in _phases(log).values():
        assert phases == [Phase.BASELINE, Phase.SEARCH, Phase.SUMMARIZE, Phase.DONE]


def test_an_iteration_closes_once_its_summaries_are_in(simulate):
    _, log, _ = simulate(["memory.enabled=false", "search.iterations=1", "search.remeasure_rounds=0"])
    last_summary = max(i for i, e in enumerate(log) if isinstance(e, c.InsightSummarized))
    replay = CoordinatorCore(RUN, clock=lambda: 0.0)
    for e in log[:last_summary]:
        replay.step(e)
    closing = replay.step(log[last_summary]).outputs
    assert any(isinstance(e, c.IterationCompleted) and e.iteration == 1 for e in closing)


def test_the_kept_kernels_are_the_baseline_the_best_and_the_beam():
    assert kept_kernels("b", "k3", ["k3", "k5"]) == ["b", "k3", "k5"]
    assert kept_kernels("b", "k9", ["k3"]) == ["b", "k9", "k3"]  # a best the beam let go (not elitist)
    assert kept_kernels(None, None, []) == []


def test_the_fold_and_the_coordinator_give_fixes_the_same_lineage(simulate, sim_world):
    """Through fix chains (every other implementation is broken, fixed in the next round): each
    fix request carries its broken kernel's lineage, the fixer copies it onto its kernel, and
    the fold and the core read it from there."""
    core, log, _ = simulate(["memory.enabled=false", "search.iterations=2"], world=sim_world(broken_every=2))
    fixes = [e for e in log if isinstance(e, c.KernelProposed) and e.fix_of]
    requests = {e.event_id: e for e in log if isinstance(e, c.FixRequested)}
    assert fixes and all(e.plan_id is not None for e in requests.values())
    view = RunView.from_events(log)
    compared = 0
    for e in fixes:
        k = view.kernels[e.kernel_id]
        broken = view.kernels[e.fix_of]
        request = requests[e.request_id]
        assert (e.parent_id, e.plan_id) == (request.parent_id, request.plan_id)
        assert (k.parent_id, k.plan_id) == (broken.parent_id, broken.plan_id) == (e.parent_id, e.plan_id)
        assert k.plan_id is not None
        mine = core.kernels.get(e.kernel_id)
        if mine is not None:  # the core keeps its beam's kernels only
            assert (mine.parent_id, mine.plan_id) == (k.parent_id, k.plan_id)
            compared += 1
    assert compared or any(p.beam for p in core.problems.values())
