"""What a long run keeps in memory: the coordinator and the CLI's compact view hold the
current iterations, not the whole run (benchmarks/long_run_bench.py measures the RSS of a
million-event run; these check the state itself on a synthetic run, the real coordinator
core driven by a simulated world)."""

from __future__ import annotations

import msgspec
import pytest

from accelopt import catalog as ev
from accelopt.coordinator import CoordinatorCore
from replay.fold import RunView
from replay.summary import summarize
from replay.synthetic import synthetic_run
from replay.verify import verify

PROBLEMS, ITERATIONS, BEAM = 3, 8, 2


@pytest.fixture(scope="module")
def log() -> list[ev.Event]:
    events = synthetic_run(
        run_id="long",
        problems=PROBLEMS,
        overrides=(f"search.iterations={ITERATIONS}", f"search.beam_width={BEAM}"),
    )
    assert isinstance(events[-1], ev.RunCompleted)
    return events


def test_the_coordinator_holds_the_beam_not_the_run(log):
    core = CoordinatorCore("long")
    for e in log:
        core.step(e)
    assert core.finished
    proposed = sum(isinstance(e, ev.KernelProposed) for e in log)
    # per problem: its baseline, its best and its beam (the last beam is kept with the problem done)
    assert len(core.kernels) <= PROBLEMS * (BEAM + 2) < proposed
    assert core.requests == {} and core.request_problem == {}  # every request was answered
    assert verify(log).ok  # the decisions re-derived with the forgetting core match the recording


def test_a_late_kernel_of_a_closed_iteration_is_ignored(log):
    core = CoordinatorCore("long")
    for e in log:
        core.step(e)
    old = next(
        e
        for e in log
        if isinstance(e, ev.KernelProposed) and e.iteration == 1 and e.kernel_id not in core.kernels
    )
    again = msgspec.structs.replace(old, event_id=old.event_id[:-4] + "beef")
    assert core.step(again).outputs == []  # not profiled again, though the core forgot the kernel


def test_the_compact_view_gives_the_same_summary_with_a_fraction_of_the_state(log):
    full = RunView.from_events(log)
    compact = RunView(compact=True)
    for e in log:
        compact.apply(e)
    assert compact.results() == full.results()
    assert compact.usage == full.usage and compact.cost_usd == full.cost_usd and compact.status == full.status
    assert [r.kernels for r in compact.results()] == [len(p.kernel_ids) for p in full.problems.values()]
    assert len(compact.kernels) <= PROBLEMS * (BEAM + 2) < len(full.kernels)
    assert len(compact.request_problem) == 0 < len(full.request_problem)
    assert not compact.plans and not compact.cost_series and full.plans and full.cost_series
    # nothing kept per event or per iteration: the last beam and iteration, entry ids only
    assert not (compact.failures or compact.insights or compact.memory_retrieved or compact.memory_entries)
    assert full.insights and full.memory_retrieved and full.memory_entries
    assert compact.memory_entry_ids == [m.entry.id for m in full.memory_entries]
    assert all(
        len(p.iterations) == 1 and len(p.beams) == 1 and not p.memory for p in compact.problems.values()
    )
    assert compact.status == full.status and summarize(compact) == summarize(full)
    for p in compact.problems.values():  # the best kernel's source is still there to be written out
        assert p.best_id and compact.kernels[p.best_id].source == full.kernels[p.best_id].source
        assert p.kernels_profiled == full.problems[p.name].kernels_profiled > 0
