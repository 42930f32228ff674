"""A run's state from its log and its driver (replay/runstate.py, replay/states.py): a driver
killed with SIGKILL leaves its run `interrupted`, with the command that resumes it; a run being
driven cannot get a second driver; an embedded nats-server never outlives the process that
started it.
(Real processes and a real nats-server; the whole `kill -9` of `accelopt ablate` then
`resume` is tests/accelopt/loop/test_ablation_resume.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli.main import main
from events.runsource import running_server_url
from events.server import NatsServer
from replay.runs import list_runs
from replay.runstate import RunBusy, RunLock
from replay.states import run_driver

RUN = "driven"


def _driver(root: Path, run_id: str) -> subprocess.Popen[str]:
    """A process that takes the run's lock, says so, and sleeps."""
    code = (
        f"from replay.runstate import RunLock\nwith RunLock({str(root)!r}, {run_id!r}):\n"
        "    print('locked', flush=True)\n    import time; time.sleep(120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    data = Path(f"/proc/{pid}/stat").read_bytes()
    return data[data.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def test_a_killed_driver_leaves_its_run_interrupted(tmp_path: Path, synthetic, export_log, capsys) -> None:
    # a run that has not ended: its events on file are cut before the end, its driver alive
    events = synthetic(run_id=RUN, problems=1, seed=2, overrides=("search.iterations=2",))
    export_log(events[: len(events) // 2], tmp_path / RUN / "log.aolog")
    proc = _driver(tmp_path, RUN)
    try:
        assert run_driver(tmp_path, RUN).lock == "held"
        (listing,), _ = list_runs(tmp_path)
        assert listing.status() == "running" and not listing.resume
        with pytest.raises(RunBusy, match=f"pid {proc.pid}"), RunLock(tmp_path, RUN):
            pass
        assert main(["resume", RUN, "--root", str(tmp_path)]) == 2
        assert "being driven by a live process" in capsys.readouterr().err
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert run_driver(tmp_path, RUN).lock == "released"
    (listing,), _ = list_runs(tmp_path)
    assert listing.status() == "interrupted"
    assert listing.resume == f"accelopt resume {RUN} --root {tmp_path}"
    assert main(["runs", "--root", str(tmp_path), "--json"]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert row["state"] == row["status"] == "interrupted" and row["resume"] == listing.resume


def test_a_run_known_only_by_its_lock_is_listed(tmp_path: Path) -> None:
    """Its events are on a stream that went down with it: the listing still shows it."""
    proc = _driver(tmp_path, "lost")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    (listing,), _ = list_runs(tmp_path)
    assert listing.summary.run_id == "lost" and listing.source == "lock" and listing.status() == "interrupted"
    assert run_driver(tmp_path, "never-locked").lock == "none"


def test_the_embedded_server_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    code = (
        "from events.runsource import open_log_endpoint\n"
        f"e = open_log_endpoint(None, {str(tmp_path)!r})\nprint(e.url, flush=True)\n"
        "import time; time.sleep(120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().startswith("nats://")
    server_pid = json.loads((tmp_path / ".nats" / "server.json").read_text())["pid"]
    assert running_server_url(tmp_path) is not None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 15
    while _alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(server_pid)
    assert running_server_url(tmp_path) is None


def test_an_orphaned_embedded_server_is_stopped_not_reused(tmp_path: Path) -> None:
    """A server whose owner is gone (started where the parent-death signal could not be used)
    is stopped by the next command that looks for the root's server."""
    server = NatsServer(tmp_path / ".nats")
    server.start()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    assert server.proc is not None
    (tmp_path / ".nats" / "server.json").write_text(
        json.dumps({"url": server.url, "pid": server.proc.pid, "owner": int(dead)})
    )
    try:
        assert running_server_url(tmp_path) is None
        server.proc.wait(15)  # it was stopped (SIGTERM), and it is our child: reap it
        assert not (tmp_path / ".nats" / "server.json").exists()
    finally:
        server.kill()
