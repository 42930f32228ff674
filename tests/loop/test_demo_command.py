"""`accelopt demo` (what `make demo` runs) is a real optimization run on embedded defaults:
its own NATS server, a local Ray, real compiled kernels, the offline builtin/tuner model."""

from __future__ import annotations

import subprocess
import sys

from events.logfile import read_events


def test_demo_runs_the_loop_and_says_what_to_look_at_next(tmp_path):
    out = subprocess.run([sys.executable, "-m", "accelopt.cli", "demo", "--problems", "silu", "--root",
                          str(tmp_path / "runs"), "--set", "search.iterations=1"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    logs = list((tmp_path / "runs").glob("*/log.aolog"))
    assert len(logs) == 1
    events = read_events(logs[0])
    assert events[0].type == "RunStarted" and events[-1].type == "RunCompleted"
    assert events[0].config["llm"]["default"]["model"] in (None, "builtin/tuner")
    assert sum(e.type == "KernelProfiled" for e in events) >= 2  # the baseline and candidates
    run_id = logs[0].parent.name
    assert f"run {run_id}: completed" in out.stdout
    assert f"accelopt replay {run_id} --verify --root {tmp_path / 'runs'}" in out.stdout
