"""Data never outlives its agent, and the CPU agent writes no data to disk at all."""

from __future__ import annotations

import gc
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import suites
from accelopt.problem import Problem
from hardware_agents.cpu import CpuAgent
from hardware_agents.datacache import DataCache


def _staging(problem: Problem, seeds: tuple[int, ...], root: Path | None) -> Path:
    assert root is not None
    d = root / f"{problem.name}-{seeds[0]}"
    d.mkdir()
    (d / "in-x.npy").write_bytes(b"data")
    return d


def test_data_dir_is_removed_on_close_and_on_garbage_collection(tmp_path: Path) -> None:
    p = suites.get_problem("cpu/lora")
    cache = DataCache(_staging, capacity=1, base_dir=tmp_path, prefix="accelopt-data-")
    root = cache.get(p, (0,)).parent
    assert any(root.iterdir()) and (root.stat().st_mode & 0o777) == 0o700
    cache.close()
    assert not root.exists()
    cache2 = DataCache(_staging, capacity=1, base_dir=tmp_path, prefix="accelopt-data-")
    root2 = cache2.get(p, (1,)).parent
    del cache2
    gc.collect()
    assert not root2.exists()


def test_data_dir_is_removed_at_interpreter_exit(tmp_path: Path) -> None:
    code = (
        "import suites; from pathlib import Path; from hardware_agents.datacache import DataCache\n"
        "def build(p, s, root):\n    (root / 'x').write_text('x'); return root\n"
        f"c = DataCache(build, base_dir=Path({str(tmp_path)!r}), prefix='accelopt-data-')\n"
        "c.get(suites.get_problem('cpu/lora'), (0,))\n"
        f"print('made', list(Path({str(tmp_path)!r}).glob('*/*')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "made [" in out.stdout and "accelopt-data-" in out.stdout, out.stderr
    assert list(tmp_path.iterdir()) == []


def test_no_directory_until_used(tmp_path: Path) -> None:
    DataCache(_staging, base_dir=tmp_path, prefix="accelopt-data-")
    assert list(tmp_path.iterdir()) == []


def test_cpu_agent_keeps_its_data_in_memory(cpu_agent: CpuAgent, tmp_path: Path) -> None:
    """Inputs and references of the CPU agent are never files: the kernel's process gets its
    inputs in a read-only shared region and no reference at all."""
    p = suites.get_problem("cpu/lora")
    data = cpu_agent.data.get(p, (0, 21, 42))
    assert cpu_agent.data.root is None
    assert data.cases and all(c.ref64 for c in data.cases)
    assert len(data.pool) >= 2 and all(not c.case.name.startswith("pool") for c in data.cases)


def test_dirs_of_dead_owners_are_swept_by_the_next_process(tmp_path: Path) -> None:
    from hardware_agents import sandbox
    from hardware_agents.sandbox.resources import mount_tmpfs

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    stale = tmp_path / f"accelopt-data-{dead}-abc123"
    (stale / "case").mkdir(parents=True)
    alive = tmp_path / f"accelopt-data-{os.getpid()}-def456"
    alive.mkdir()
    other = tmp_path / f"accelopt-private-{dead}-xyz"  # a dead process's root, with a tmpfs in it
    (other / "accelopt-sbx-1-a" / "work").mkdir(parents=True)
    mounted = os.geteuid() == 0 and mount_tmpfs(other / "accelopt-sbx-1-a" / "work", 1 << 20, None) is None
    unrelated = tmp_path / "something-else-1-2"
    unrelated.mkdir()
    new = sandbox.private_dir(tmp_path, "accelopt-data-")
    assert new.name.startswith(f"accelopt-data-{os.getpid()}-")
    # inside this process's own root, which no other uid may enter
    assert new.parent.name.startswith(f"accelopt-private-{os.getpid()}-") and new.parent.parent == tmp_path
    assert stat.S_IMODE(new.parent.stat().st_mode) == 0o700
    assert not stale.exists() and not other.exists() and alive.exists() and unrelated.exists()
    if mounted:
        assert not any(str(other) in line for line in Path("/proc/self/mountinfo").read_text().splitlines())


_SLEEPER = r"""
#include <sys/prctl.h>
#include <time.h>
__attribute__((constructor)) static void clear(void) { prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0); }
void kernel(const float* x, float* out) { (void)x; (void)out; struct timespec d = {60, 0}; nanosleep(&d, 0); }
"""


def _agent_under_a_sleeping_kernel(
    cache: Path, options: dict[str, object]
) -> tuple[subprocess.Popen[bytes], int]:
    """An agent process profiling a kernel that clears its parent-death signal (where the wall
    lets it) and sleeps in its first call; returns it and the kernel server's pid."""
    from hardware_agents.sandbox.uids import UID_BASE, UID_SPAN, _proc_ids

    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})\n"
        "from cpu_helpers import c_solution, scale_shift_problem\n"
        "from hardware_agents.cpu import CpuAgent\n"
        "from hardware_agents.sandbox import allow_unisolated\n"
        f"agent = CpuAgent(cache_dir={str(cache)!r}, calibrate_if_missing=False, timeout_s=120, "
        f"sandbox_options={options!r})\n"
        "p = scale_shift_problem()\n"
        f"with allow_unisolated(True): agent.profile(p, c_solution(p, {_SLEEPER!r}), measure=False)\n"
    )
    agent = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            ids = _proc_ids(entry) if entry.isdigit() else None
            if ids and UID_BASE <= ids[0] < UID_BASE + UID_SPAN and ids[1] == agent.pid and ids[2] == b"S":
                time.sleep(0.5)  # in its first call, the kernel loaded
                return agent, int(entry)
        time.sleep(0.05)
    agent.kill()
    raise AssertionError("the kernel server never started")


def _alive(pid: int) -> bool:
    from hardware_agents.sandbox.freeze import proc_state

    return proc_state(pid) not in (None, "Z", "X")


def test_a_kernel_server_dies_with_its_agent(cpu_cache: Path) -> None:
    """SIGKILL of the agent (the OOM killer, a Ray shutdown): the kernel server gets its
    parent-death signal, which it cannot clear (seccomp)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: sandbox uids")
    agent, server = _agent_under_a_sleeping_kernel(cpu_cache, {})
    agent.kill()
    agent.wait()
    deadline = time.monotonic() + 5
    while _alive(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(server)


def test_an_orphaned_kernel_server_is_swept_at_the_next_agent_start(cpu_cache: Path) -> None:
    """With the wall down (it clears its parent-death signal) the server outlives its agent as an
    orphan of init; the next agent's start-up sweep kills it (its uid's lock is free)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: sandbox uids")
    from hardware_agents.sandbox.uids import _proc_ids

    agent, server = _agent_under_a_sleeping_kernel(cpu_cache, {"lock_pdeathsig": False})
    agent.kill()
    agent.wait()
    time.sleep(1.0)
    ids = _proc_ids(str(server))
    assert ids is not None and _alive(server), "the orphan died by itself: the wall was not down"
    if ids[1] != 1:
        pytest.skip(f"orphans here are adopted by pid {ids[1]} (a subreaper), which the sweep leaves alone")
    subprocess.run(
        [
            sys.executable,
            "-c",
            "from hardware_agents.cpu import CpuAgent; CpuAgent(calibrate_if_missing="
            f"False, cache_dir={str(cpu_cache)!r})",
        ],
        check=True,
        timeout=120,
    )
    assert not _alive(server)
