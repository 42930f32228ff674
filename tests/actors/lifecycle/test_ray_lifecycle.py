"""A driver's local Ray, started as AccelOpt starts it (`deployment.init_ray`), ends with the
driver, and says what it has to say in AccelOpt's words. Real Ray, real processes, each test
in a driver process of its own (the one being killed):

- `kill -9` of the driver: no process it started (Ray's head, its DashboardAgent and
  RuntimeEnvAgent, workers) is alive 5 s later (they were ~60 s without the reaper), and a
  `/dev/shm`-style folder its dead agents left is swept;
- SIGTERM of the driver: it unwinds (its `finally` runs), and no crash dump is printed (Ray's
  abseil handler printed `*** SIGTERM received ...` with a stack, twice);
- an agent killed by Ray's memory monitor (its threshold set to 1 % of the host, so it kills
  at once) or by SIGKILL is said in one line that names it, why and what to change; Ray's own
  `(raylet)` lines stay off stdout and no colour code reaches a redirected file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# the driver: a local Ray as AccelOpt starts it and one actor at work, then it reports its
# process tree (pid and start time of every descendant) once its actor runs, and waits
DRIVER = textwrap.dedent(
    """
    import os, sys, time
    sys.path.insert(0, {root!r})
    from actors.runtime.deployment import init_ray
    from hardware_agents.sandbox.resources import private_dir, default_base_dir
    init_ray(num_cpus=2)
    import ray

    @ray.remote
    class Busy:
        def pid(self):
            return os.getpid()
        def spin(self):
            while True:
                time.sleep(0.1)

    b = Busy.remote()
    ray.get(b.pid.remote())
    b.spin.remote()
    shm = private_dir(default_base_dir(), "accelopt-test-")  # what a profiler leaves there
    print("SHM", shm.parent, flush=True)
    try:
        print("READY", flush=True)
        time.sleep(600)
    finally:
        print("UNWOUND", flush=True)
    """
)


def _stat(pid: int) -> tuple[int, int, str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    f = raw.rsplit(b")", 1)[1].split()
    return int(f[1]), int(f[19]), f[0].decode()


def tree(root: int) -> dict[int, int]:
    """Every live descendant of `root`: pid -> start time."""
    table = {
        int(p.name): s for p in Path("/proc").iterdir() if p.name.isdigit() and (s := _stat(int(p.name)))
    }
    out: dict[int, int] = {}
    todo = [root]
    while todo:
        parent = todo.pop()
        for pid, (ppid, start, _) in table.items():
            if ppid == parent and pid not in out:
                out[pid] = start
                todo.append(pid)
    return out


def alive(procs: dict[int, int]) -> list[str]:
    out = []
    for pid, start in procs.items():
        st = _stat(pid)
        if st is not None and st[1] == start and st[2] != "Z":
            out.append(f"{pid} {Path(f'/proc/{pid}/cmdline').read_bytes()[:80]!r}")
    return out


def start_driver(tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    env = {**os.environ, "ACCELOPT_SANDBOX_DIR": str(tmp_path / "shm")}
    (tmp_path / "shm").mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER.format(root=str(ROOT))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    shm = None
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("SHM "):
            shm = Path(line.split(" ", 1)[1].strip())
        if line.startswith("READY"):
            break
    assert shm is not None, proc.stderr.read() if proc.stderr else ""
    return proc, shm


def test_kill_9_of_the_driver_leaves_no_process_of_its_ray(tmp_path: Path) -> None:
    proc, shm_root = start_driver(tmp_path)
    try:
        time.sleep(2.0)  # the agents are up with the raylet; the reaper has seen them
        procs = tree(proc.pid)
        names = b" ".join(
            Path(f"/proc/{p}/cmdline").read_bytes() for p in procs if Path(f"/proc/{p}").exists()
        )
        # what lingered for a minute before: the raylet's agents, and a busy worker
        assert b"ray::DashboardAgent" in names and b"ray::RuntimeEnvAgent" in names, names[:2000]
        assert b"ray::Busy" in names, names[:2000]
        assert shm_root.is_dir()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        time.sleep(5.0)
        assert alive(procs) == []
        # its process root under the sandboxes' base is gone (its pid is dead: swept)
        assert not shm_root.exists(), list(shm_root.parent.iterdir())
    finally:
        if proc.poll() is None:
            proc.kill()


def test_sigterm_of_the_driver_unwinds_quietly(tmp_path: Path) -> None:
    proc, _ = start_driver(tmp_path)
    try:
        procs = tree(proc.pid)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "UNWOUND" in out  # its `finally` ran: SIGTERM raised, as Ctrl-C does
    assert "SIGTERM received" not in err and "failure_signal_handler" not in err, err[-3000:]
    assert "actors.runtime.signals.Terminated" in err  # (the script does not catch it; the CLI does)
    time.sleep(5.0)
    assert alive(procs) == []


WATCHED = textwrap.dedent(
    """
    import os, signal, sys, time
    sys.path.insert(0, {root!r})
    from actors.runtime.deployment import init_ray
    from actors.runtime.deaths import DeathWatch, stall_hint
    init_ray(num_cpus=2)
    import ray

    @ray.remote(max_restarts=1, max_task_retries=1)
    class Agent:
        def pid(self):
            return os.getpid()
        def run(self):
            held = []
            while True:
                held.append(bytearray(8 << 20))
                time.sleep(0.2)

    class Hosted:  # what the watch reads of a deployment's agent
        def __init__(self, name, handle, device):
            self.name, self.handle = name, handle
            self.spawn = ("profiler", {{"device": device}}, None, None) if device else None

    a = Agent.remote()
    pid = ray.get(a.pid.remote()) if {kill!r} else None
    a.run.remote()
    watch, hosts = DeathWatch(), [Hosted("profiler-trn1-0", a, "trn1")]
    if {kill!r}:
        time.sleep(1.0)
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        deaths = watch.check(hosts)
        if deaths:
            print("LINE", deaths[0].line(), flush=True)
            print("HINT", stall_hint("trn1"), flush=True)
            break
        time.sleep(0.5)
    else:
        print("NO DEATH SEEN", flush=True)
    """
)


def _watched(kill: bool, env: dict[str, str]) -> tuple[str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", WATCHED.format(root=str(ROOT), kill=kill)],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **env},
        start_new_session=True,
    )
    return proc.stdout, proc.stderr


def test_an_agent_killed_by_rays_memory_monitor_is_said_in_one_line() -> None:
    # the monitor kills a worker at work once the host's memory is above 1 %: at once, here
    out, err = _watched(False, {"RAY_memory_usage_threshold": "0.01", "RAY_memory_monitor_refresh_ms": "200"})
    lines = [ln for ln in out.splitlines() if ln.startswith("LINE ")]
    assert len(lines) == 1, (out[-3000:], err[-3000:])
    line = lines[0]
    assert (
        "the trn1 profiler (profiler-trn1-0) was killed by Ray's memory monitor (host memory above 1%)"
        in line
    )
    assert "lower devices.trn1.concurrency" in line, line
    # a run that waits on trn1 says this death, not "is a worker for that role/device running?"
    assert "HINT the trn1 profiler (profiler-trn1-0) was killed by Ray's memory monitor" in out, out
    # Ray's own report (a page of it) stayed off stdout, and no colour code is anywhere
    assert "(raylet)" not in out and "Top 10 memory users" not in out, out[-3000:]
    assert "\x1b[" not in out and "\x1b[" not in err, (out[-2000:], err[-2000:])


def test_an_agent_killed_with_sigkill_is_said_as_killed() -> None:
    out, err = _watched(True, {})
    lines = [ln for ln in out.splitlines() if ln.startswith("LINE ")]
    assert len(lines) == 1, (out[-3000:], err[-3000:])
    assert "the trn1 profiler (profiler-trn1-0) was killed: its process ended without a word" in lines[0]
    assert "Ray restarted it (restart 1)" in lines[0], lines[0]
    assert "(raylet)" not in out and "\x1b[" not in out, out[-3000:]


@pytest.fixture(autouse=True)
def _linux_only() -> None:
    if not Path("/proc/self/stat").exists():
        pytest.skip("the reaper and these checks read /proc")
