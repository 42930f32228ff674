"""A warm pool (`accelopt up`): runs of its root attach to its agents and start no Ray of
their own; a run the pool cannot serve is refused before anything starts; `accelopt down`
stops it. Real nats-server, Ray, CPU profilers and memory; the offline builtin/tuner."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from loop_cli import ACCELOPT, cli, kill_embedded_server, run_dirs
from runlog import last_decision

from actors.runtime.pool import read_pool
from events.logfile import read_events
from replay.verify import verify

SUITE = str(Path(__file__).with_name("headroom_suite"))
SMALL = [
    "--suite",
    SUITE,
    "--preset",
    "quick",
    "--set",
    "search.iterations=1",
    "--set",
    "search.remeasure_rounds=0",
]


def _start_pool(root: Path, memory: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "ACCELOPT_MEMORY"}
    env["ACCELOPT_LOG_LEVEL"] = "ERROR"
    proc = subprocess.Popen(
        [*ACCELOPT, "up", "--root", str(root), "--memory", str(memory)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 300
    while read_pool(root) is None:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the pool did not come up: {proc.stdout.read() if proc.stdout else ''}")
        time.sleep(0.2)
    return proc


@pytest.mark.timeout(900)
def test_runs_attach_to_a_warm_pool_and_down_stops_it(tmp_path):
    root, memory = tmp_path / "runs", tmp_path / "memory"
    pool = _start_pool(root, memory)
    try:
        info = read_pool(root)
        assert info is not None and info.pid == pool.pid and info.devices == ["cpu"]
        out = cli("run", *SMALL, "--problems", "rowsum", "--memory", str(memory), root=root)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        assert f"attached to the agent pool of {root} (pid {pool.pid})" in out.stdout
        # a second run on the same agents; what an attached run costs: neither Ray nor litellm
        # is imported in its process (its coordinator runs on a thread there)
        code = (
            "import sys; from cli.main import main; rc = main(sys.argv[1:]); "
            "print('IMPORTED', 'ray' in sys.modules, 'litellm' in sys.modules); sys.exit(rc)"
        )
        env = {k: v for k, v in os.environ.items() if k != "ACCELOPT_MEMORY"}
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                code,
                "run",
                *SMALL,
                "--problems",
                "rownorm",
                "--memory",
                str(memory),
                "--root",
                str(root),
            ],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        assert "attached to the agent pool" in out.stdout and "IMPORTED False False" in out.stdout
        logs = {d: read_events(root / d / "log.aolog") for d in run_dirs(root)}
        assert len(logs) == 2
        for events in logs.values():
            assert events[0].type == "RunStarted" and last_decision(events).type == "RunCompleted"
            assert verify(events).ok
            assert sum(e.type == "KernelProfiled" for e in events) >= 2
        # the pool's one curator wrote both runs' insights to the one memory
        from memory_index import MemoryIndex

        added = {e.entry.id for events in logs.values() for e in events if e.type == "MemoryEntryAdded"}
        stored = {e.id for e in MemoryIndex.open(str(memory)).iter_entries()} if added else set()
        assert added <= stored

        # a run whose memory is elsewhere would be served by agents writing another memory:
        # refused before anything starts, saying what differs and what to do
        before = run_dirs(root)
        out = cli("run", *SMALL, "--problems", "rowsum", "--memory", str(tmp_path / "other"), root=root)
        assert out.returncode == 2
        assert "cannot serve this run" in out.stderr and "memory.uri" in out.stderr  # an error: stderr
        assert f"accelopt down --root {root}" in " ".join(out.stderr.split())
        assert run_dirs(root) == before

        down = subprocess.run(
            [*ACCELOPT, "down", "--root", str(root)], capture_output=True, text=True, timeout=120
        )
        assert down.returncode == 0, down.stdout + down.stderr
        assert pool.wait(timeout=30) == 0
        assert read_pool(root) is None and not (root / ".pool.json").exists()
        assert "pool stopped" in (pool.stdout.read() if pool.stdout else "")
        again = subprocess.run(
            [*ACCELOPT, "down", "--root", str(root)], capture_output=True, text=True, timeout=60
        )
        assert again.returncode == 1 and "no pool is up" in again.stdout
    finally:
        if pool.poll() is None:
            pool.kill()
        kill_embedded_server(root)
