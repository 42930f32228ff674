"""An ablation that changes a decision: `accelopt ablate RUN --set memory.enabled=false
--from-iteration 1` on a real recorded run (subprocess CLI: real NATS, real Ray, real
compiled kernels, the offline builtin/tuner model).

Up to the fork the new run repeats its parent (same kernels, same beams, everything served
from the recording); after it, memory is off, so the planners see no insights, their prompts
differ from the parent's where the parent had insights, and only those calls (and what
follows from different plans) are made anew.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from loop_cli import cli, kill_embedded_server, run_dirs
from runlog import last_decision

from accelopt import catalog as c
from events.logfile import read_events
from replay.recording import served_counts

FORK = 1
# a test-only problem whose tunable has a large real effect, so iteration 1 surely yields
# an insight (1 -> 2 partial sums is ~1.3x) that the parent's later planners retrieve; on
# the CPU suite, insights come from noise and may not come at all
HEADROOM = str(Path(__file__).with_name("headroom_suite"))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("abl-mem")
    root = tmp / "runs"
    root.mkdir()
    try:
        # the test is about the ablation, not the noise rule: without the noise margin the
        # summarizer surely gets iteration 1's slow-fast pair even on a loaded machine
        r = cli(
            "run",
            "--suite",
            HEADROOM,
            "--problems",
            "rownorm",
            "--preset",
            "quick",
            "--memory",
            str(tmp / "memory"),
            "--set",
            "search.iterations=2",
            "--set",
            "search.summary_noise_margin=false",
            "--set",
            "search.remeasure_rounds=0",
            root=root,
        )  # (nor the end-of-problem re-measure)
        assert r.returncode == 0, r.stdout + r.stderr
        (parent,) = run_dirs(root)
        yield root, parent
    finally:
        kill_embedded_server(root)


def ablate(root: Path, parent: str, *overrides: str) -> tuple[list[c.Event], list[c.Event], str]:
    before = run_dirs(root)
    sets = [a for o in overrides for a in ("--set", o)]
    a = cli("ablate", parent, *sets, "--from-iteration", str(FORK), root=root)
    assert a.returncode == 0, a.stdout + a.stderr
    (child,) = run_dirs(root) - before
    return read_events(root / parent / "log.aolog"), read_events(root / child / "log.aolog"), a.stdout


@pytest.fixture(scope="module")
def parent_and_ablation(recorded):
    return ablate(*recorded, "memory.enabled=false")


def _iteration_of(events: list[c.Event]) -> dict[str, int]:
    """Request id -> iteration, for every request (LLM calls are about a request)."""
    return {
        e.event_id: e.iteration
        for e in events
        if isinstance(e, (c.PlanRequested, c.ImplementationRequested, c.FixRequested, c.SummaryRequested))
    }


def test_the_ablation_completes_as_a_fork_of_its_parent(parent_and_ablation):
    parent, child, _ = parent_and_ablation
    started = child[0]
    assert isinstance(started, c.RunStarted)
    assert started.parent_run == parent[0].run_id and started.fork_iteration == FORK
    assert started.config["memory"]["enabled"] is False and started.fork_config["memory"]["enabled"] is True
    end = last_decision(child)
    assert isinstance(end, c.RunCompleted) and end.reason == "completed"
    done = {(e.problem, e.iteration) for e in child if isinstance(e, c.IterationCompleted)}
    assert done == {("rownorm", 0), ("rownorm", 1), ("rownorm", 2)}


def test_up_to_the_fork_the_ablation_repeats_its_parent(parent_and_ablation):
    parent, child, _ = parent_and_ablation

    def kernels(events):
        return {
            (e.kernel_id, e.iteration, e.source)
            for e in events
            if isinstance(e, c.KernelProposed) and e.iteration <= FORK
        }

    def beams(events):
        return {
            (e.iteration, tuple(m.kernel_id for m in e.beam), e.best_kernel_id)
            for e in events
            if isinstance(e, c.BeamSelected) and e.iteration <= FORK
        }

    def retrievals(events):
        return {
            (e.event_id, tuple(x.entry_id for x in e.entries))
            for e in events
            if isinstance(e, c.MemoryRetrieved) and e.iteration <= FORK
        }

    assert kernels(child) == kernels(parent) and len(kernels(parent)) > 1
    assert beams(child) == beams(parent) and beams(parent)
    assert retrievals(child) == retrievals(parent) and retrievals(parent)
    # every LLM call and every profile up to the fork was served from the recording
    it = _iteration_of(child)
    early = [e for e in child if isinstance(e, c.LLMCallCompleted) and it[e.request_id] <= FORK]
    assert early and all(e.served_from for e in early)
    early_kernels = {k[0] for k in kernels(child)}
    profiled = [e for e in child if isinstance(e, c.KernelProfiled) and e.kernel_id in early_kernels]
    assert profiled and all(e.served_from for e in profiled)


def test_after_the_fork_memory_is_off(parent_and_ablation):
    parent, child, _ = parent_and_ablation
    assert not [e for e in child if isinstance(e, c.MemoryRetrieved) and e.iteration > FORK]
    late_plans = [e for e in child if isinstance(e, c.PlanRequested) and e.iteration > FORK]
    assert late_plans and all(not e.insights and e.memory_event_id is None for e in late_plans)
    # the parent did plan its last iteration with insights: the change made a difference
    assert any(e.insights for e in parent if isinstance(e, c.PlanRequested) and e.iteration > FORK)


def test_only_changed_decisions_cost_new_llm_calls(parent_and_ablation):
    parent, child, stdout = parent_and_ablation
    s = served_counts(child)
    new = s.llm_calls - s.llm_served
    assert s.llm_served > 0 and s.profiles_served > 0
    assert (
        f"served from the recording of {parent[0].run_id}: {s.llm_served} of {s.llm_calls} LLM calls "
        f"({new} made anew), {s.profiles_served} of {s.profiles} profiles"
    ) in " ".join(stdout.split())
    parent_calls = [e for e in parent if isinstance(e, c.LLMCallCompleted)]
    recorded = {e.content_hash for e in parent_calls if e.error is None and e.response is not None}
    calls = [e for e in child if isinstance(e, c.LLMCallCompleted)]
    # a call is made anew exactly when its prompt was not in the recording
    assert all((e.served_from is not None) == (e.content_hash in recorded) for e in calls)
    # the planner calls whose parent prompt carried insights now differ: each is a new call
    with_insights = {
        e.event_id for e in parent if isinstance(e, c.PlanRequested) and e.insights and e.iteration > FORK
    }
    changed_plans = [e for e in calls if e.role == "planner" and e.request_id in with_insights]
    assert changed_plans and all(e.served_from is None for e in changed_plans)
    assert 0 < new < len(parent_calls)
    # new calls only after the fork
    it = _iteration_of(child)
    assert all(it[e.request_id] > FORK for e in calls if e.served_from is None)


def test_llm_settings_also_change_only_after_the_fork(recorded):
    """The agents, not the coordinator, apply the LLM settings: up to the fork they must use
    the parent's (else every prompt hash differs and the history diverges before the fork)."""
    _, child, _ = ablate(*recorded, "llm.planner.temperature=0.9")
    it = _iteration_of(child)
    calls = [e for e in child if isinstance(e, c.LLMCallCompleted)]
    early = [e for e in calls if it[e.request_id] <= FORK]
    assert early and all(e.served_from for e in early)
    assert {e.params["temperature"] for e in early if e.role == "planner"} != {0.9}
    late_plans = [e for e in calls if e.role == "planner" and it[e.request_id] > FORK]
    assert late_plans and all(e.served_from is None and e.params["temperature"] == 0.9 for e in late_plans)
    assert isinstance(last_decision(child), c.RunCompleted)


def test_an_ablation_never_retrieves_its_parents_future(recorded):
    """After the fork the ablation retrieves anew (its memory settings differ) from a memory
    that now holds everything its parent learnt, later iterations included; none of the
    parent's entries may come back (the ablation's own copies of the insights up to the fork
    are its own entries), else the counterfactual would know its own future."""
    from memory_index import MemoryIndex, SearchQuery

    root, parent_id = recorded
    parent, child, _ = ablate(root, parent_id, "memory.top_m=15")
    parent_entries = {e.entry.id for e in parent if isinstance(e, c.MemoryEntryAdded)}
    late = [e for e in child if isinstance(e, c.MemoryRetrieved) and e.iteration > FORK]
    assert parent_entries and late
    retrieved = {x.entry_id for e in late for x in e.entries}
    assert retrieved and not retrieved & parent_entries
    # nor its own entries from after the retrieval (other runs' sibling ablations are past, not lineage)
    at = child.index(late[0])
    emitted_after = {e.entry.id for e in child[at:] if isinstance(e, c.MemoryEntryAdded)}
    assert not {x.entry_id for x in late[0].entries} & emitted_after
    # the exclusion is what keeps them out: a plain search of the same memory returns them
    index = MemoryIndex.open(child[0].config["memory"]["uri"])
    plain = index.search(late[0].query, SearchQuery(top_m=50, collapse=False))
    assert {x.entry_id for x in plain} & parent_entries
