"""A duplicate of any event, arriving at any later time, changes none of the coordinator's
decisions, so its applied-id memory can be a small window (accelopt/coordinator.py): the
real core over a synthetic run's log, with copies of earlier events replayed far outside
the window."""

from __future__ import annotations

import random

import pytest

from accelopt import catalog as ev
from accelopt.coordinator import CoordinatorCore, RecentIds
from replay.synthetic import synthetic_run

RUN = "dups"


@pytest.fixture(scope="module")
def log() -> list[ev.Event]:
    events = synthetic_run(
        run_id=RUN,
        problems=2,
        seed=3,
        overrides=("search.iterations=4", "search.beam_width=2", "llm.budget_usd=1000"),
    )
    assert isinstance(events[-1], ev.RunCompleted)
    return events


def fold(events: list[ev.Event], core: CoordinatorCore) -> list[str]:
    out: list[str] = []
    for e in events:
        out += [o.event_id for o in core.step(e).outputs]
    return out


def test_recent_ids_forget_the_oldest():
    ids = RecentIds(2)
    for i in ("a", "b", "a", "c"):
        ids.add(i)
    assert "a" not in ids and "b" in ids and "c" in ids and len(ids) == 2


def test_copies_of_earlier_events_decide_nothing_and_cost_nothing(log):
    reference = CoordinatorCore(RUN)
    decided = fold(log, reference)
    assert reference.finished and decided

    rng = random.Random(7)
    noisy: list[ev.Event] = []
    for i, e in enumerate(log):
        noisy.append(e)
        noisy += [log[rng.randrange(i + 1)] for _ in range(2)]  # copies of anything seen so far
    noisy += log  # and the whole log once more after the end
    small = CoordinatorCore(RUN, applied_window=4)
    again = fold(noisy, small)

    assert sorted(again) == sorted(decided)  # the same decisions, each made once
    assert len(small.applied) <= 4
    assert small.spent_usd == pytest.approx(reference.spent_usd) and reference.spent_usd > 0
    assert {n: p.best_id for n, p in small.problems.items()} == {
        n: p.best_id for n, p in reference.problems.items()
    }
    assert small.requests == {} and small.request_problem == {} and small.spend.counted == {}


def test_each_kind_of_copy_is_caught_without_the_window(log):
    """Per event type: a copy arriving after the window forgot its id is a no-op."""
    core = CoordinatorCore(RUN, applied_window=1)
    fold(log, core)
    spent = core.spent_usd
    kinds = {type(e) for e in log}
    assert {
        ev.LLMCallCompleted,
        ev.IterationStarted,
        ev.IterationCompleted,
        ev.KernelProposed,
        ev.KernelProfiled,
        ev.PlanRequested,
    } <= kinds
    for e in log:
        assert core.step(e).outputs == [], f"a copy of {e.type} decided something"
    assert core.spent_usd == spent
