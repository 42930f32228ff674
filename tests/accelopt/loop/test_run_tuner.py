"""A full run with the offline `builtin/tuner` model on two CPU problems: real NATS, real
Ray actors, real compiled kernels, real LanceDB memory (no LLM API is reachable here, so
the built-in model plays every agent). Every problem ends with its best kernel and baseline
re-profiled in interleaved rounds on seeds the search never used: the best must be correct
on them and measurably faster than its baseline.

The problems come from `headroom_suite/`, test-only row reductions whose one tunable (the
number of independent partial sums) has a large real effect: with one accumulator the loop
runs at the latency of the add chain, with 8 it vectorizes and runs near memory speed
(~2.5-4x here). The CPU suite's own tunables (work-item sizes) move latency by less than
this shared 2-core machine's noise, so a "faster" check on them measures luck."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from runlog import last_decision

import suites
from accelopt import catalog as c
from actors.roles.profiler import seeds_for
from actors.runtime.session import SessionOptions, run_session
from events.logfile import read_events
from replay.fold import RunView
from replay.verify import verify

SUITE = str(Path(__file__).with_name("headroom_suite"))
PROBLEMS = ["rownorm", "rowsum"]
# the best kernel must be at least this much faster when re-measured (the real effect is
# 2.5-4x; the margin leaves room for a noisy machine without accepting noise as a win)
MIN_SPEEDUP = 1.3
ROUNDS = 3  # interleaved rounds of the end-of-problem re-measure (baseline, best; best, baseline; ...)


@pytest.fixture(scope="module")
def tuner_run(ray_session, tmp_path_factory):
    from accelopt.config import build_config

    tmp = tmp_path_factory.mktemp("tuner-run")
    cfg = build_config(
        preset="quick",
        overrides=[
            f"root={tmp / 'runs'}",
            f"memory.uri={tmp / 'memory'}",
            f"suite={SUITE}",
            f"problems=[{','.join(PROBLEMS)}]",
            "search.iterations=3",
            "search.plans_per_candidate=3",
            f"search.remeasure_rounds={ROUNDS}",
        ],
    )
    problems = [suites.get_problem(f"{SUITE}/{p}") for p in PROBLEMS]
    outcome = run_session(cfg, problems, SessionOptions(timeout_s=900))
    return outcome, problems


def test_run_completes_and_records_everything(tuner_run):
    outcome, _ = tuner_run
    assert not outcome.timed_out
    assert outcome.view.completed is not None and outcome.view.completed.reason == "completed"
    events = read_events(outcome.run_dir / "log.aolog")
    assert events[0].type == "RunStarted" and last_decision(events).type == "RunCompleted"
    assert verify(events).ok
    view = RunView.from_events(events)
    assert {r.problem for r in view.results()} == set(PROBLEMS)
    # every profile request got exactly one result, every LLM request an LLM call record, and
    # the search profiled each kernel once (a re-measure names the kernel it times again)
    requested = Counter(e.event_id for e in events if isinstance(e, c.ProfileRequested))
    profiled = Counter(e.request_id for e in events if isinstance(e, c.KernelProfiled))
    assert requested == profiled and set(profiled.values()) == {1}
    searched = Counter(
        e.kernel_id for e in events if isinstance(e, c.ProfileRequested) and e.purpose != "remeasure"
    )
    assert set(searched.values()) == {1}
    llm_requests = {
        e.event_id
        for e in events
        if e.type in ("PlanRequested", "ImplementationRequested", "FixRequested", "SummaryRequested")
    }
    answered = {e.request_id for e in events if isinstance(e, c.LLMCallCompleted)}
    assert llm_requests <= answered
    assert (outcome.run_dir / "results.json").exists()
    for p in PROBLEMS:
        assert (outcome.run_dir / "best" / f"{p}.c").exists()


def test_best_kernels_are_correct_and_faster_when_remeasured(tuner_run):
    """The run's end-of-problem re-measure (ProblemRemeasured): baseline and best, interleaved,
    each round on seeds no search profile used, every profile correct, and the ratio of the
    medians is the speedup it records. (Before, the test timed the kernels again itself, 20
    more profiles of what the run had just measured the same way.)"""
    outcome, problems = tuner_run
    events = read_events(outcome.run_dir / "log.aolog")
    view = RunView.from_events(events)
    searched = {
        s
        for e in events
        if isinstance(e, c.ProfileRequested) and e.purpose != "remeasure"
        for s in seeds_for(e)
    }
    remeasures = {
        e.event_id: e for e in events if isinstance(e, c.ProfileRequested) and e.purpose == "remeasure"
    }
    for problem in problems:
        p = view.problems[problem.name]
        assert p.best_id != p.baseline_id, f"{problem.name}: no improvement found"
        [done] = [e for e in events if isinstance(e, c.ProblemRemeasured) and e.problem == problem.name]
        assert (done.baseline.kernel_id, done.best.kernel_id) == (p.baseline_id, p.best_id)
        assert done.rounds == ROUNDS and done.baseline.status == done.best.status == "passed"
        assert len(done.baseline.rounds_ms) == len(done.best.rounds_ms) == ROUNDS
        profiles = [
            e
            for e in events
            if isinstance(e, c.KernelProfiled) and e.request_id in remeasures and e.problem == problem.name
        ]
        assert len(profiles) == 2 * ROUNDS and all(e.profile.status == "passed" for e in profiles)
        assert all(c.passed for e in profiles for c in e.profile.correctness)
        fresh = {s for e in profiles for s in seeds_for(remeasures[e.request_id])}
        assert fresh and not fresh & searched, "the re-measure reused the search's seeds"
        base, best = view.kernels[p.baseline_id].source, view.kernels[p.best_id].source
        order = [remeasures[e.request_id].source for e in profiles]
        assert order == [base, best, best, base, base, best][: 2 * ROUNDS], "not interleaved"
        assert done.speedup == pytest.approx(done.baseline.median_ms / done.best.median_ms)
        assert done.speedup >= MIN_SPEEDUP, (
            f"{problem.name}: best {done.best.median_ms:.3f} ms vs baseline {done.baseline.median_ms:.3f} ms"
        )


def test_memory_entries_were_indexed_and_retrieved(tuner_run):
    outcome, _ = tuner_run
    from memory_index import MemoryIndex

    events = read_events(outcome.run_dir / "log.aolog")
    added = {e.entry.id for e in events if isinstance(e, c.MemoryEntryAdded)}
    assert added, "the summarizer produced no insight"
    index = MemoryIndex.open(outcome.view.started.config["memory"]["uri"])
    assert index.has_ids(added) == added
    retrieved = [e for e in events if isinstance(e, c.MemoryRetrieved) and e.entries]
    assert retrieved
    planned_with = [e for e in events if isinstance(e, c.PlanRequested) and e.insights]
    assert planned_with and all(e.memory_event_id for e in planned_with)
