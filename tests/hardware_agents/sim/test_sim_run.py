"""A real run on the simulated device: real nats-server (JetStream), real Ray actors, the
real coordinator (the memory is off to keep the test short), the offline `builtin/tuner` model; only the device is
simulated. One profiler host runs several simulated profiles at once."""

from __future__ import annotations

from collections import Counter

import pytest

import suites
from accelopt import catalog as c
from accelopt.config import build_config
from actors.runtime.session import SessionOptions, run_session
from events.logfile import read_events
from hardware_agents.sim.suite import write_suite
from replay.verify import verify


@pytest.fixture(scope="module")
def sim_run(ray_session, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sim-run")
    suite = write_suite(tmp, 2)
    cfg = build_config(
        preset="quick",
        overrides=[
            f"root={tmp / 'runs'}",
            f"memory.uri={tmp / 'memory'}",
            f"suite={suite}",
            "device=sim",
            "search.iterations=2",
            "search.plans_per_candidate=3",
            "search.remeasure_rounds=1",
            "memory.enabled=false",  # the memory's model load dominates a run this short: a benchmark's matter
            "devices.sim.options.allow=true",
            "devices.sim.options.profile_s=0.05",
            "devices.sim.options.pass_rate=0.7",
            "devices.sim.concurrency=4",
        ],
    )
    return run_session(cfg, suites.load_suite(str(suite)), SessionOptions(timeout_s=600))


def test_run_on_the_sim_device_completes(sim_run):
    assert not sim_run.timed_out
    assert sim_run.view.completed is not None and sim_run.view.completed.reason == "completed"
    events = read_events(sim_run.run_dir / "log.aolog")
    assert verify(events).ok
    requested = Counter(e.event_id for e in events if isinstance(e, c.ProfileRequested))
    answered = Counter(e.request_id for e in events if isinstance(e, c.KernelProfiled))
    assert requested == answered and set(answered.values()) == {1}  # none lost, none doubled
    profiles = [e for e in events if isinstance(e, c.KernelProfiled)]
    assert {e.device for e in profiles} == {"sim"}
    statuses = Counter(e.profile.status for e in profiles)
    assert statuses["passed"] > 0 and statuses["incorrect"] > 0  # the configured pass rate at work
    assert all(
        e.profile.counters.get("simulated") == 1.0 and e.profile.latency_ms > 0
        for e in profiles
        if e.profile.status == "passed"
    )
    assert {r.problem for r in sim_run.view.results()} == {"p000", "p001"}
