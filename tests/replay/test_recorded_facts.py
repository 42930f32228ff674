"""Facts in the events, read, not re-derived: a fix's lineage travels on its `FixRequested` and
its `KernelProposed`, and the kernels a problem keeps at an iteration's close are decided once
by the coordinator and recorded (`IterationCompleted.kept`). The fold, the dashboard and the
coordinator read them; `replay --verify` checks the recorded ones against the decider's.

A log that records other facts than the decider would decide folds to what it records (the
fold shows the log, it does not judge it) and does not verify (that is `replay --verify`'s
job). A log of version 1, which recorded neither, reads as its new version: its facts are
derived once, by `accelopt/old_log_facts.py`, so it folds and verifies as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from accelopt import catalog as ev
from accelopt.coordinator import CoordinatorCore
from accelopt.old_log_facts import OldLogFacts
from accelopt.search_state import kept_kernels
from events.codec import decode, encode
from events.logfile import read_events
from replay.dashboard.models import run_model
from replay.fold import RunView
from replay.synthetic import synthetic_run
from replay.verify import verify

RUN = "facts"
FIXTURE = Path(__file__).parent / "data" / "run_before_event_versions.aolog"


@pytest.fixture(scope="module")
def log() -> list[ev.Event]:
    """Two problems, three iterations, a broken kernel in three (fixes, fix chains)."""
    events = synthetic_run(
        run_id=RUN,
        problems=2,
        seed=3,
        fail_rate=0.35,
        overrides=("search.iterations=3", "search.fix_rounds=3"),
        kernel_ids="request",  # a fix that returns its broken source is another kernel: chains
    )
    assert verify(events).ok
    assert sum(isinstance(e, ev.FixRequested) for e in events) >= 3
    return events


def _index(log: list[ev.Event], kind: type[ev.Event], pick: Any = lambda e: True) -> int:
    return next(i for i, e in enumerate(log) if isinstance(e, kind) and pick(e))


def _replaced(log: list[ev.Event], i: int, **fields: Any) -> list[ev.Event]:
    return [*log[:i], msgspec.structs.replace(log[i], **fields), *log[i + 1 :]]


# --- what is recorded ---------------------------------------------------------------------------


def test_each_iteration_records_what_its_problem_keeps_and_the_core_keeps_just_that(log):
    view = RunView.from_events(log)
    done = [e for e in log if isinstance(e, ev.IterationCompleted)]
    assert done and all(e.kept for e in done)
    for e in done:
        p = view.problems[e.problem]
        beam = p.beams.get(e.iteration, [p.baseline_id] if e.iteration == 0 else [])
        assert e.kept == kept_kernels(p.baseline_id, e.best_kernel_id, beam) == p.kept[e.iteration]
    core = CoordinatorCore(RUN)
    for e in log:
        core.step(e)
    for name, p in core.problems.items():  # the kernels it holds are those its last close kept
        last = [e for e in done if e.problem == name][-1]
        assert set(p.kernel_ids) == set(last.kept or ())


def test_a_fix_request_carries_its_kernel_s_lineage_and_the_fix_keeps_it(log):
    proposed = {e.kernel_id: e for e in log if isinstance(e, ev.KernelProposed) and not e.fix_of}
    requests = {e.event_id: e for e in log if isinstance(e, ev.FixRequested)}
    fixes = [e for e in log if isinstance(e, ev.KernelProposed) and e.fix_of]
    assert fixes and any(e.fix_round > 1 for e in fixes)  # chains too
    for e in fixes:
        request = requests[e.request_id]
        assert request.kernel_id == e.fix_of and request.plan_id is not None
        assert (e.parent_id, e.plan_id) == (request.parent_id, request.plan_id)
        first = proposed.get(e.fix_of)
        if first is not None:  # round 1: the broken kernel's own proposal
            assert (request.parent_id, request.plan_id) == (first.parent_id, first.plan_id)


# --- readers read -------------------------------------------------------------------------------


def test_the_fold_and_the_dashboard_read_the_recorded_kept_set_and_verify_flags_it(log):
    """The log says problem op00 kept one kernel less at iteration 1 than the coordinator
    decides: the fold (full and compact) and the dashboard show what the log says, and `replay
    --verify` says the log is not what the coordinator decides, naming the event and `kept`."""
    i = _index(log, ev.IterationCompleted, lambda e: e.problem == "op00" and e.iteration == 1)
    done = log[i]
    assert isinstance(done, ev.IterationCompleted) and done.kept and len(done.kept) >= 2
    dropped = done.kept[-1]
    kept = done.kept[:-1]
    altered = _replaced(log, i, kept=kept)
    view = RunView.from_events(altered)
    assert view.problems["op00"].kept[1] == kept  # not the baseline, best and beam re-derived
    compact = RunView(compact=True)
    for e in altered[: i + 1]:
        compact.apply(e)
    assert dropped not in compact.kernels and dropped not in compact.problems["op00"].kernel_ids
    assert all(k in compact.kernels for k in kept)
    model = run_model(RunView.from_events(altered[: i + 1]), "test", streaming=False, now=0.0)
    [row] = [b for b in model.beams if b.problem == "op00"]
    assert (row.kept, row.kept_iteration) == (kept, 1)
    report = verify(altered)
    assert not report.ok and report.divergence is not None
    d = report.divergence
    assert (d.kind, d.event_type, d.position) == ("different", "IterationCompleted", i + 1)
    assert d.describe().split("differ in ")[1].startswith("kept:")


def test_the_fold_reads_a_fix_s_recorded_lineage(log):
    """A fix whose proposal names another plan than its broken kernel's is, for the fold, a
    sample of the plan it names; re-deriving would give it the broken kernel's."""
    i = _index(log, ev.KernelProposed, lambda e: bool(e.fix_of))
    fix = log[i]
    assert isinstance(fix, ev.KernelProposed)
    other = next(
        e.plan_id
        for e in log
        if isinstance(e, ev.KernelProposed)
        and e.plan_id
        and e.plan_id != fix.plan_id
        and e.problem == fix.problem
    )
    view = RunView.from_events(_replaced(log, i, plan_id=other))
    k = view.kernels[fix.kernel_id]
    assert k.plan_id == other != view.kernels[fix.fix_of or ""].plan_id
    assert view.plan_text(fix.kernel_id) == view.plans[other].text


def test_the_coordinator_reads_a_fix_s_lineage_from_its_proposal(log):
    """The core counts a fix as a sample of the plan its proposal names."""
    i = _index(log, ev.KernelProposed, lambda e: bool(e.fix_of))
    fix = log[i]
    assert isinstance(fix, ev.KernelProposed) and fix.plan_id
    core = CoordinatorCore(RUN)
    for e in [*log[:i], msgspec.structs.replace(fix, plan_id="another-plan")]:
        core.step(e)
    p = core.problems[fix.problem]
    assert fix.kernel_id in p.plan_kernels["another-plan"]
    assert fix.kernel_id not in p.plan_kernels.get(fix.plan_id, [])
    assert core.kernels[fix.kernel_id].plan_id == "another-plan"


def test_a_changed_fix_request_lineage_does_not_verify(log):
    i = _index(log, ev.FixRequested)
    report = verify(_replaced(log, i, plan_id="another-plan"))
    assert not report.ok and report.divergence is not None
    assert (report.divergence.event_type, report.divergence.position) == ("FixRequested", i + 1)


# --- logs of version 1 --------------------------------------------------------------------------


def _as_version_1(e: ev.Event) -> ev.Event:
    """`e` as a run recorded before these facts wrote it, read back through the codec."""
    if not isinstance(e, (ev.IterationCompleted, ev.FixRequested, ev.KernelProposed)):
        return e
    raw = msgspec.msgpack.decode(encode(e))
    if isinstance(e, ev.IterationCompleted):
        del raw["kept"]
    elif isinstance(e, ev.FixRequested):
        del raw["parent_id"], raw["plan_id"]
    elif e.fix_of:
        raw.update(parent_id=None, plan_id=None)  # the fixer of version 1 named none
    return decode(msgspec.msgpack.encode({**raw, "schema_version": 1}))


def test_a_log_of_version_1_reads_folds_and_verifies_as_its_new_version(log, monkeypatch):
    old = [_as_version_1(e) for e in log]
    fixes = [e for e in old if isinstance(e, ev.KernelProposed) and e.fix_of]
    assert fixes and all(e.plan_id is None for e in fixes)  # as written: not recorded
    assert all(e.kept is None for e in old if isinstance(e, ev.IterationCompleted))
    # derived once, on read: the facts the new version records
    facts = OldLogFacts()
    assert [facts.read(e) for e in old] == log
    new_view, old_view = RunView.from_events(log), RunView.from_events(old)
    assert {k: (v.parent_id, v.plan_id) for k, v in old_view.kernels.items()} == {
        k: (v.parent_id, v.plan_id) for k, v in new_view.kernels.items()
    }
    assert {n: p.kept for n, p in old_view.problems.items()} == {
        n: p.kept for n, p in new_view.problems.items()
    }
    report = verify(old)
    assert report.ok and report.decisions_checked == verify(log).decisions_checked
    # without the derivation the old log's fixes have no lineage and its decisions differ
    monkeypatch.setattr(OldLogFacts, "read", lambda self, e: e)
    bare = RunView.from_events(old)
    assert any(bare.kernels[e.kernel_id].plan_id is None for e in fixes)
    assert not verify(old).ok


def test_the_fixture_of_version_1_reads_with_what_it_kept():
    """tests/replay/data/run_before_event_versions.aolog (every type at version 1): its
    iterations' kept sets are derived once on read, as its coordinator kept them."""
    events = read_events(FIXTURE)
    view = RunView.from_events(events)
    p = view.problems["silu"]
    done = [e for e in events if isinstance(e, ev.IterationCompleted)]
    assert done and all(e.schema_version == 2 and e.kept is None for e in done)  # not recorded
    assert sorted(p.kept) == [e.iteration for e in done]
    for e in done:
        beam = p.beams.get(e.iteration, [])
        assert p.kept[e.iteration] == kept_kernels(p.baseline_id, e.best_kernel_id, beam)
    assert p.kept[0] == [p.baseline_id]
    assert verify(events).ok
