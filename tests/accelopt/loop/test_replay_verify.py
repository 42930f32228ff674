"""replay --verify over logs of the simulated world: a faithful recording verifies, an
altered one is caught at the first divergence."""

from __future__ import annotations

import msgspec
import pytest

from accelopt import catalog as c
from replay.verify import verify


@pytest.mark.parametrize("shuffle", [None, 7])
def test_recorded_run_verifies(simulate, shuffle):
    _, log, _ = simulate([], shuffle_seed=shuffle)
    report = verify(log)
    assert report.ok, report.divergence.describe()
    assert report.decisions_checked > 50 and report.inputs > 50


def test_altered_profile_is_caught(simulate):
    _, log, _ = simulate(["memory.enabled=false"])
    # make a slow candidate look fast: the beam the recording shows no longer follows
    idx = next(
        i
        for i, e in enumerate(log)
        if isinstance(e, c.KernelProfiled)
        and e.profile.latency_ms
        and e.profile.latency_ms > 1.0
        and e.kernel_id not in _best_ids(log)
    )
    prof = log[idx].profile
    lat = msgspec.structs.replace(prof.latency, median_ms=0.001, min_ms=0.001, samples_ms=[0.001])
    altered = list(log)
    altered[idx] = msgspec.structs.replace(log[idx], profile=msgspec.structs.replace(prof, latency=lat))
    report = verify(altered)
    assert not report.ok
    assert report.divergence.event_type in (
        "BeamSelected",
        "SummaryRequested",
        "IterationCompleted",
        "PlanRequested",
        "IterationStarted",
    )
    assert report.divergence.position > idx
    assert "differ" in report.divergence.describe() or "did not decide" in report.divergence.describe()


def test_a_decision_of_the_recorded_id_with_other_content_is_caught(simulate):
    """The baseline's profile 10 % slower: no decision is added or dropped (its ids all stay),
    only what they say changes (iteration 0's best latency first). Caught by comparing each
    decision's content with its recorded copy, not by ids alone."""
    _, log, _ = simulate(["memory.enabled=false"])
    idx = next(i for i, e in enumerate(log) if isinstance(e, c.KernelProfiled) and e.profile.latency_ms)
    prof = log[idx].profile
    lat = msgspec.structs.replace(prof.latency, median_ms=prof.latency.median_ms * 1.1)
    altered = list(log)
    altered[idx] = msgspec.structs.replace(log[idx], profile=msgspec.structs.replace(prof, latency=lat))
    report = verify(altered)
    assert not report.ok and report.divergence.kind == "different", report.divergence
    assert report.divergence.event_type == "IterationCompleted"
    assert "best_latency_ms" in report.divergence.describe()


def test_removed_decision_is_caught(simulate):
    _, log, _ = simulate(["memory.enabled=false"])
    idx = next(i for i, e in enumerate(log) if isinstance(e, c.PlanRequested))
    forged = msgspec.structs.replace(log[idx], sample_index=99)
    report = verify([*log[:idx], forged, *log[idx + 1 :]])
    assert not report.ok and report.divergence.position == idx + 1
    assert "sample_index" in report.divergence.describe()


def test_truncated_recording_is_not_a_divergence(simulate):
    _, log, _ = simulate([])
    report = verify(log[: len(log) // 2])
    assert report.ok


def _best_ids(log):
    return {e.best_kernel_id for e in log if isinstance(e, c.IterationCompleted)}
