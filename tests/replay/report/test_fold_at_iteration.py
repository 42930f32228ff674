"""The state at the end of any iteration: nothing of a later iteration, figures equal to what
the full run recorded for that iteration, and the run's ending only in the last state."""

from __future__ import annotations

import pytest

from replay.fold import RunView

T = 4


@pytest.fixture(scope="module")
def log(synthetic):
    return synthetic(
        run_id="cut", problems=2, preset="quick", overrides=(f"search.iterations={T}",), fail_rate=0.3
    )


def test_each_iteration_state_matches_the_full_run(log):
    full = RunView.from_events(log)
    assert full.status == "completed"
    for i in range(T + 1):
        view = RunView.from_events(log, until_iteration=i)
        assert view.until_iteration == i
        assert all(k.iteration <= i for k in view.kernels.values())
        assert {k.iteration for k in view.kernels.values()} == set(range(i + 1))
        assert view.status == ("completed" if i == T else "running")
        for name, p in view.problems.items():
            assert [it.iteration for it in p.iterations] == list(range(i + 1))
            assert max(p.beams, default=0) <= i and max(p.memory, default=0) <= i
            recorded = full.best_per_iteration(name)[i]
            result = next(r for r in view.results() if r.problem == name)
            assert result.best_kernel_id == recorded.best_kernel_id
            assert result.best_ms == pytest.approx(recorded.best_latency_ms)
            assert result.best_pct_peak == pytest.approx(recorded.best_pct_peak)
            assert (result.speedup or 1.0) == pytest.approx(recorded.speedup)
            # the LLM spend of a problem up to its iteration i is what the full run had then
            assert p.cost_usd == pytest.approx(full.problems[name].iteration_cost[i])
        # every kernel of the state is profiled (its profile belongs to its iteration)
        assert all(k.profile is not None for k in view.kernels.values())
        assert set(view.memory_entry_iteration.values()) <= set(range(i + 1))
        assert view.llm_calls == len(view.cost_series)


def test_state_before_any_search_has_only_baselines(log):
    view = RunView.from_events(log, until_iteration=0)
    assert len(view.kernels) == len(view.problems) == 2
    assert all(k.parent_id is None for k in view.kernels.values())
    assert view.llm_calls == 0 and view.cost_usd == 0.0 and not view.plans


def test_real_run_at_iteration_one(real_run):
    from events.logfile import read_events

    events = read_events(real_run.run_dir / "log.aolog")
    full = RunView.from_events(events)
    view = RunView.from_events(events, until_iteration=1)
    assert view.status == "running" and full.status == "completed"
    assert view.problems["rownorm"].best_id == full.best_per_iteration("rownorm")[1].best_kernel_id
    assert 0 < view.llm_calls < full.llm_calls
    assert {pl.iteration for pl in view.plans.values()} == {1}
