"""An actor that cannot start stops the run at once with its reason (real Ray, real NATS):
here the CPU profiler, whose device agent is given an option it does not take. Without
this the run would wait for profiles nobody takes, and nothing would be recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

import suites
from actors.runtime.session import RunError, SessionOptions, run_session


def test_a_profiler_that_cannot_start_fails_the_run_with_its_reason(ray_session, run_config):
    cfg = run_config("problems=[silu]", "memory.enabled=false", "devices.cpu.options={no_such_option: 1}")
    with pytest.raises(RunError) as err:
        run_session(cfg, [suites.get_problem("cpu/silu")], SessionOptions(timeout_s=600))
    text = str(err.value)
    assert "profiler-cpu-0 actor could not start" in text and "no_such_option" in text
    assert not list(Path(cfg.root).glob("*/log.aolog"))  # no run was started: nothing half-recorded
