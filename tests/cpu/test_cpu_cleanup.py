"""Temporary data never outlives its agent, even when nobody calls close()."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import suites
from hardware_agents.cpu.data import DataCache


def test_data_dir_is_removed_on_close_and_on_garbage_collection(tmp_path: Path) -> None:
    p = suites.get_problem("cpu/lora")
    cache = DataCache(capacity=1, base_dir=tmp_path)
    root = cache.get(p, (0,)).dir.parent
    assert any(root.iterdir())
    cache.close()
    assert not root.exists()
    cache2 = DataCache(capacity=1, base_dir=tmp_path)
    root2 = cache2.get(p, (1,)).dir.parent
    del cache2
    gc.collect()
    assert not root2.exists()


def test_data_dir_is_removed_at_interpreter_exit(tmp_path: Path) -> None:
    code = (f"import suites; from hardware_agents.cpu.data import DataCache; from pathlib import Path\n"
            f"c = DataCache(base_dir=Path({str(tmp_path)!r})); c.get(suites.get_problem('cpu/lora'), (0,))\n"
            f"print('made', list(Path({str(tmp_path)!r}).iterdir()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "made [" in out.stdout and "accelopt-data-" in out.stdout, out.stderr
    assert list(tmp_path.iterdir()) == []


def test_no_directory_until_used(tmp_path: Path) -> None:
    DataCache(base_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


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
