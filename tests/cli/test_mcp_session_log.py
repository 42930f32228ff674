"""An agent session is a log like a run's: each verdict of the judge is on disk (in the
exported-log format) before the agent reads it, `accelopt runs` says the session's state
(running while its server serves, completed when it ended, interrupted when it was killed),
and `replay --verify` and `report` read it; a server killed -9 loses none of it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import anyio
from mcp_session import ACCELOPT, REPO, alive, descendants, stdio_session

from accelopt import catalog as ev
from events.logfile import read_events

SILU = (REPO / "suites" / "cpu_v2" / "silu" / "baseline.c").read_text()
SEGFAULT = "void kernel(const float* x, float* out) { *(volatile int*)0 = 1; }\n"


def accelopt(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ACCELOPT, *args], capture_output=True, text=True, cwd=REPO, timeout=120)


def runs(root: Path) -> dict[str, dict]:
    out = accelopt("runs", "--root", str(root), "--json")
    assert out.returncode == 0, out.stderr
    return {r["run_id"]: r for r in map(json.loads, out.stdout.splitlines())}


def server_pid() -> int:
    for pid in descendants(os.getpid()):
        with contextlib.suppress(OSError):
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"mcp" in cmd and b"--root" in cmd and alive(pid):
                return pid
    raise AssertionError("no accelopt mcp server below this test")


def test_the_session_log_survives_a_kill_and_reads_like_a_run(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    seen: dict[str, str] = {}

    async def scenario() -> None:
        with contextlib.suppress(Exception):  # the server dies under the client at the end
            async with stdio_session(root, name="scripted-agent") as c:
                for source in (SILU, SEGFAULT):
                    r = await c.call_tool("profile_kernel", {"problem": "cpu_v2/silu", "source": source})
                    assert not r.is_error
                    seen[r.structured_content["kernel_id"]] = r.structured_content["event_id"]
                (session,) = [p.name for p in root.iterdir() if p.is_dir() and p.name != "memory"]
                seen["session"] = session
                assert runs(root)[session]["state"] == "running"
                os.kill(server_pid(), signal.SIGKILL)
                await anyio.sleep(0.5)

    anyio.run(scenario)
    session = seen.pop("session")
    events = read_events(root / session / "log.aolog")
    assert [type(e) for e in events] == [ev.RunStarted, *[ev.KernelProposed, ev.KernelProfiled] * 2]
    profiled = [e for e in events if isinstance(e, ev.KernelProfiled)]
    assert {e.kernel_id: e.event_id for e in profiled} == seen
    assert [e.profile.status for e in profiled] == ["passed", "runtime_error"]
    assert all("profile_kernel for scripted-agent 1.0" in e.worker for e in profiled)
    proposed = [e for e in events if isinstance(e, ev.KernelProposed)]
    assert [e.source for e in proposed] == [SILU, SEGFAULT] and all(e.request_id for e in proposed)

    listed = runs(root)[session]
    assert listed["state"] == "interrupted" and listed["source"] == "file"
    verify = accelopt("replay", session, "--root", str(root), "--verify")
    assert verify.returncode == 0 and "verified" in verify.stdout, verify.stdout + verify.stderr
    report = accelopt("report", session, "--root", str(root))
    assert report.returncode == 0 and (root / session / "report.html").is_file(), report.stderr


def test_a_session_that_ends_is_completed(tmp_path: Path) -> None:
    root = tmp_path / "runs"

    async def scenario() -> None:
        async with stdio_session(root) as c:
            r = await c.call_tool("list_problems", {"suite": "cpu_v2"})
            assert not r.is_error

    anyio.run(scenario)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        (state,) = [r["state"] for r in runs(root).values()]
        if state != "running":
            break
        time.sleep(0.5)
    assert state == "completed"
