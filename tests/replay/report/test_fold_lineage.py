"""The fold's kernel lineage (parents, plans, fix chains), memory snapshots and cost series."""

from __future__ import annotations

from itertools import pairwise

import pytest

from accelopt import catalog as ev
from replay.fold import RunView
from replay.lineage import best_path, search_tree


@pytest.fixture(scope="module")
def view(synthetic):
    return RunView.from_events(
        synthetic(run_id="lin", problems=2, overrides=("search.iterations=4",), fail_rate=0.4)
    )


def test_fix_chains_keep_the_lineage_of_the_broken_kernel(view):
    fixes = [k for k in view.kernels.values() if k.fix_of]
    assert fixes, "the synthetic world breaks 40% of implementations"
    for k in fixes:
        broken = view.kernels[k.fix_of]
        assert broken.fixed_by == k.kernel_id and not broken.passed
        assert (k.parent_id, k.plan_id) == (broken.parent_id, broken.plan_id)
        assert view.plan_text(k.kernel_id) == view.plan_text(broken.kernel_id) is not None
        chain = view.fix_chain(broken.kernel_id)
        assert chain[0] is broken and [c.fix_round for c in chain] == list(
            range(broken.fix_round, broken.fix_round + len(chain))
        )


def test_best_path_runs_from_the_baseline_with_plans(view):
    for name, p in view.problems.items():
        steps = best_path(view, p.best_id)
        assert steps[0].kernel.kernel_id == p.baseline_id and steps[0].kind == "baseline"
        assert steps[-1].kernel.kernel_id == p.best_id
        for prev, step in pairwise(steps):
            assert step.previous is prev.kernel
            if step.kind == "plan":
                assert step.plan and view.plans[step.kernel.plan_id].candidate_id == prev.kernel.kernel_id
            else:
                assert step.kind == "fix" and step.kernel.fix_of == prev.kernel.kernel_id
        best = view.kernels[p.best_id]
        assert steps[-1].speedup == pytest.approx(view.kernels[p.baseline_id].latency_ms / best.latency_ms)
        roots, left_out = search_tree(view, name)
        assert left_out == 0 and len(roots) == 1 and roots[0].kernel.kernel_id == p.baseline_id


def test_memory_snapshots_and_cost_series(view):
    for name in view.problems:
        learnt = [len(view.memory_snapshot(name, i).learnt) for i in range(1, 5)]
        assert learnt == sorted(learnt) and learnt[0] == 0 < learnt[-1]
        for i in range(1, 5):
            snap = view.memory_snapshot(name, i)
            # one retrieval per candidate of the iteration's beam (the baseline alone in iteration 1)
            assert len(snap.retrieved) == len(view.problems[name].beams.get(i - 1, ["baseline"]))
            assert all(isinstance(m, ev.MemoryRetrieved) and m.iteration == i for m in snap.retrieved)
    costs = [c.cost_usd for c in view.cost_series]
    assert costs == sorted(costs) and costs[-1] == pytest.approx(view.cost_usd) and costs[-1] > 0
    assert view.cost_series[-1].calls == view.llm_calls == sum(u.calls for u in view.usage.values())
    assert set(view.usage) == {"planner", "executor", "fixer", "summarizer"}
