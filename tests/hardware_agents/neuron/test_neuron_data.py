"""The Neuron agent's data: correctness inputs staged for the sandbox, references out of its
reach, fresh timing seeds; and the generic LRU (hardware_agents/datacache.py) it shares with
the CPU and Triton agents. No SDK is needed: nothing here runs a kernel."""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from accelopt.problem import Problem
from hardware_agents.datacache import DataCache
from hardware_agents.neuron import data as ndata
from hardware_agents.neuron.reference import ReferenceModule


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_inputs_readable_references_private_and_removed_on_close(
    small_suite: dict[str, Problem], tmp_path: Path
) -> None:
    p = small_suite["silu"]
    cache: DataCache[ndata.ProblemData] = DataCache(
        ndata.build_problem_data, capacity=1, base_dir=tmp_path, prefix="accelopt-nki-", mode=0o755
    )
    data = cache.get(p, (0, 21))
    root = cache.root
    assert root is not None and _mode(root) == 0o755 and data.dir.parent == root
    arg = Path(data.cases[0].args[0].path)
    assert _mode(arg) == 0o644 and arg.is_relative_to(root)
    # the references: 0700, outside the staged root (the sandbox's read list holds data.dir)
    assert _mode(data.private) == 0o700 and not data.private.is_relative_to(root)
    ref = data.cases[0].refs()["out"]
    assert ref.dtype == np.float64
    assert data.seeds >= {0, 21}
    assert cache.get(p, (0, 21)) is data  # cached
    other = cache.get(p, (1,))  # evicts the first: its files go
    assert not data.dir.exists() and not data.private.exists() and other.dir.exists()
    cache.close()
    assert not root.exists() and not other.private.exists()


def test_a_timing_round_keeps_its_references_and_sees_changed_inputs(
    small_suite: dict[str, Problem], tmp_path: Path
) -> None:
    p = small_suite["silu"]
    rnd = ndata.TimingRound(p, ReferenceModule(p), 0, 123456789)
    x = rnd.args[0]
    assert np.allclose(rnd.refs["out"], x / (1 + np.exp(-x.astype(np.float64))))
    specs = rnd.stage(tmp_path / "r0")
    assert rnd.changed_files() == []
    np.save(specs[0].path, np.zeros_like(x))
    assert rnd.changed_files() == ["arg0.npy"]
    with pytest.raises(FileExistsError):  # never staged into a directory that already exists
        rnd.stage(tmp_path / "r0")


def test_lookup_builds_once_per_key_and_tells_evicted_entries() -> None:
    removed: list[str] = []

    class Entry:
        def __init__(self, name: str) -> None:
            self.name = name

        def remove(self) -> None:
            removed.append(self.name)

    built: list[str] = []

    def build(name: str) -> Callable[[Path | None], Entry]:
        def make(root: Path | None) -> Entry:
            assert root is None  # no prefix: in-memory entries
            built.append(name)
            return Entry(name)

        return make

    cache: DataCache[Entry] = DataCache(lambda *_: Entry("unused"), capacity=2)
    a = cache.lookup(("a", 1), build("a"))
    assert cache.lookup(("a", 1), build("a-again")) is a and built == ["a"]
    cache.lookup("b", build("b"))
    cache.lookup("c", build("c"))
    assert removed == ["a"] and built == ["a", "b", "c"]
    cache.close()
    assert sorted(removed) == ["a", "b", "c"]
