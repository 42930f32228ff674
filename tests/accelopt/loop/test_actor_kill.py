"""Killing the LLM roles' host (the planner among them) or the profiler actor mid-run loses
and duplicates nothing: Ray restarts the actor and re-runs its loop, JetStream redelivers
the unacked request, and result ids derived from the request keep a second handling from
adding a second result."""

from __future__ import annotations

from collections import Counter

import suites
from accelopt import catalog as c
from actors.runtime.session import SessionOptions, run_session
from events.logfile import read_events


def test_killed_planner_and_profiler_lose_and_duplicate_nothing(ray_session, run_config):
    import ray

    # (the memory is not what this test looks at)
    cfg = run_config(
        "problems=[matmul]",
        "search.iterations=2",
        "search.plans_per_candidate=3",
        "workers.ack_wait_s=4",
        "workers.heartbeat_s=1",
        "memory.enabled=false",
    )
    killed: list[str] = []

    def kill(prefix: str) -> None:
        for name in ray.util.list_named_actors():
            if name.startswith(prefix):
                ray.kill(ray.get_actor(name), no_restart=False)
                killed.append(name)

    def on_event(e: c.Event, view) -> None:
        if isinstance(e, c.PlanRequested) and e.iteration == 1 and e.sample_index == 0 and not killed:
            kill("accelopt-llm-")  # the host of the four LLM roles, the planner among them
        if isinstance(e, c.ProfileRequested) and e.purpose == "candidate" and len(killed) == 1:
            kill("accelopt-profiler-cpu-")

    outcome = run_session(
        cfg, [suites.get_problem("cpu/matmul")], SessionOptions(on_event=on_event, timeout_s=600)
    )
    assert len(killed) == 2, killed
    assert outcome.view.completed is not None
    events = read_events(outcome.run_dir / "log.aolog")
    answered = Counter(
        e.request_id
        for e in events
        if isinstance(e, (c.PlanProposed, c.ProposalFailed))
        and e.request_id in {p.event_id for p in events if isinstance(p, c.PlanRequested)}
    )
    plan_requests = [e.event_id for e in events if isinstance(e, c.PlanRequested)]
    assert sorted(answered) == sorted(plan_requests) and set(answered.values()) == {1}
    profiled = Counter(e.request_id for e in events if isinstance(e, c.KernelProfiled))
    requested = [e.event_id for e in events if isinstance(e, c.ProfileRequested)]
    assert sorted(profiled) == sorted(requested) and set(profiled.values()) == {1}
