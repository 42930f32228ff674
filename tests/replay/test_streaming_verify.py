"""`replay --verify` holds none of the log (replay/verify.py `Verifier`): fed one event at a
time from a generator, it verifies what the list did, holds only the decisions whose
recorded copy has not gone by yet, and still catches a removed decision; a recorded
decision repeated later in the log is a copy, not a divergence."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from accelopt import catalog as ev
from replay.synthetic import synthetic_run
from replay.verify import Verifier, verify

RUN = "stream"


@pytest.fixture(scope="module")
def log() -> list[ev.Event]:
    return synthetic_run(run_id=RUN, problems=3, seed=5, overrides=("search.iterations=4",))


def test_a_generator_verifies_and_the_replay_holds_little(log):
    v = Verifier()
    held = 0
    for e in (x for x in log):
        assert v.feed(e)
        held = max(held, len(v.pending))
    report = v.result()
    assert report.ok and report.events == len(log) and report.decisions_checked > 100
    assert v.pending == {}
    assert 0 < held < report.decisions_checked / 10  # waiting decisions, not the run's


def test_a_removed_decision_is_caught_when_streamed(log):
    i = next(n for n, e in enumerate(log) if isinstance(e, ev.BeamSelected))

    def without() -> Iterator[ev.Event]:
        yield from log[:i]
        yield from log[i + 1 :]

    report = verify(without())
    assert not report.ok and report.divergence is not None
    assert report.divergence.event_type != "" and report.divergence.position >= i


def test_a_repeated_decision_is_a_copy(log):
    i = next(n for n, e in enumerate(log) if isinstance(e, ev.PlanRequested))
    report = verify([*log[: i + 1], log[i], *log[i + 1 :]])
    assert report.ok, report.divergence.describe() if report.divergence else ""


def test_an_empty_log_is_an_error_not_a_pass():
    with pytest.raises(ValueError, match="empty log"):
        Verifier().result()
    with pytest.raises(ValueError, match="empty log"):
        verify(iter(()))
