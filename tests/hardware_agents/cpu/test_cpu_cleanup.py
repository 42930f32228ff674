"""Data never outlives its agent, and the CPU agent writes no data to disk at all."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

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
    code = ("import suites; from pathlib import Path; from hardware_agents.datacache import DataCache\n"
            "def build(p, s, root):\n    (root / 'x').write_text('x'); return root\n"
            f"c = DataCache(build, base_dir=Path({str(tmp_path)!r}), prefix='accelopt-data-')\n"
            "c.get(suites.get_problem('cpu/lora'), (0,))\n"
            f"print('made', list(Path({str(tmp_path)!r}).iterdir()))\n")
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

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    stale = tmp_path / f"accelopt-data-{dead}-abc123"
    (stale / "case").mkdir(parents=True)
    alive = tmp_path / f"accelopt-data-{os.getpid()}-def456"
    alive.mkdir()
    other = tmp_path / f"accelopt-cc-{dead}-xyz"  # another prefix: swept only by its own kind
    other.mkdir()
    unrelated = tmp_path / "something-else-1-2"
    unrelated.mkdir()
    new = sandbox.private_dir(tmp_path, "accelopt-data-")
    assert new.name.startswith(f"accelopt-data-{os.getpid()}-")
    assert not stale.exists() and alive.exists() and other.exists() and unrelated.exists()
