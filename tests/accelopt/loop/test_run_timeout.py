"""`--timeout` bounds the whole run, the start of its agents included (real Ray, real NATS):
here the run's trn1 profiler waits for a node with a NeuronCore, which this Ray does not
have, so the agents never all become ready. (On a Ray without NeuronCores a trn1 profiler
would emulate instead, `actors/runtime/hosting.device_placement`; the test asks for the
placement a cluster with NeuronCores gives, the one real fault: a Trainium node that never
joins.) The run gives up when its time is up, says which
agent was not ready, and leaves nothing half-recorded (before: the wait for the agents alone
took 5 minutes, whatever the timeout)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import suites
from actors.runtime.hosting import Placement
from actors.runtime.session import RunTimedOut, SessionOptions, run_session

TIMEOUT_S = 12.0


def test_the_timeout_bounds_the_wait_for_agents(ray_session, run_config, monkeypatch):
    import actors.runtime.deployment as deployment

    monkeypatch.setattr(
        deployment, "device_placement", lambda device: Placement(resources={"neuron_cores": 1})
    )
    cfg = run_config("problems=[silu]", "device=trn1", "memory.enabled=false")
    t0 = time.monotonic()
    with pytest.raises(RunTimedOut) as err:
        run_session(cfg, [suites.get_problem("cpu/silu")], SessionOptions(timeout_s=TIMEOUT_S))
    took = time.monotonic() - t0
    text = str(err.value)
    assert (
        f"timed out after {TIMEOUT_S:g} s" in text and "profiler-trn1-0" in text and "did not start" in text
    )
    # the timeout and the agents' teardown, not the 300 s wait for agents the run used to make
    assert took < TIMEOUT_S + 30, took
    assert not list(Path(cfg.root).glob("*/log.aolog"))  # no run was started: nothing half-recorded
