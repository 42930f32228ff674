"""start_run, watch_run, stop_run: an `accelopt run` started through the tools under the
server's root and memory, with its budget, followed as `accelopt runs` sees it and stopped by
SIGTERM (its process gone, its state no longer running); runs the server did not start, and
unknown runs and problems, are one-line tool errors."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from mcp_session import alive, stdio_session, text_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_start_watch_stop_a_run(tmp_path: Path) -> None:
    root = tmp_path / "runs"

    async def scenario() -> None:
        async with stdio_session(root) as c:
            r = await c.call_tool("start_run", {"suite": "cpu_v2", "problems": ["nope"], "budget_usd": 1.0})
            assert r.is_error and "nope" in text_of(r) and "\n" not in text_of(r)
            r = await c.call_tool("watch_run", {"run_id": "20990101-000000-beef"})
            assert r.is_error and "no run" in text_of(r)

            r = await c.call_tool(
                "start_run",
                {"suite": "cpu_v2", "problems": ["silu"], "budget_usd": 0.5, "iterations": 2},
            )
            assert not r.is_error, text_of(r)
            started = r.structured_content
            run_id, pid = started["run_id"], started["pid"]
            assert (root / run_id / "run.lock").is_file() and alive(pid)
            assert started["budget_usd"] == 0.5 and started["state"] in ("running", "starting")

            r = await c.call_tool("watch_run", {"run_id": run_id})
            assert not r.is_error and r.structured_content["state"] == "running", r.structured_content
            assert run_id in text_of(r)

            r = await c.call_tool("stop_run", {"run_id": run_id})
            stopped = r.structured_content
            assert not r.is_error and stopped["state"] not in ("running", "starting"), stopped
            assert "pid" not in stopped
            deadline = time.monotonic() + 30
            while alive(pid) and time.monotonic() < deadline:
                await anyio.sleep(0.2)
            assert not alive(pid)

    anyio.run(scenario)


def test_a_run_started_elsewhere_is_not_ours_to_stop(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    (root / "20990101-000000-beef").mkdir(parents=True)

    async def scenario() -> None:
        async with stdio_session(root) as c:
            r = await c.call_tool("stop_run", {"run_id": "20990101-000000-beef"})
            assert r.is_error and "not started by this server" in text_of(r)

    anyio.run(scenario)


def test_a_run_stopped_before_its_log_began_is_stopped_not_starting(tmp_path: Path) -> None:
    """stop_run of a run whose process ends before it wrote its log (a loaded host: stopped in
    its first seconds) says it stopped, never 'starting' with a dead pid. The process here is a
    plain `sleep` standing in for an `accelopt run` that has not yet written its folder."""
    import subprocess

    from cli.commands.mcp_server.runs import Runs, _Started

    runs = Runs(tmp_path / "runs", str(tmp_path / "memory"), tmp_path / "out")
    (tmp_path / "runs").mkdir()
    out = tmp_path / "sleep.out"
    out.write_text("")
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    runs._started["20990101-000000-cafe"] = _Started(proc, out, 0.5)
    assert runs.status("20990101-000000-cafe").state == "starting"
    stopped = anyio.run(runs.stop, "20990101-000000-cafe")
    assert stopped.state == "stopped" and stopped.pid is None, stopped
    assert not alive(proc.pid)
