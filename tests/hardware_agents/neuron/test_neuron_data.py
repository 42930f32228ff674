"""The Neuron agent's data: correctness inputs staged for the sandbox, references out of its
reach, fresh timing seeds; and the generic LRU (hardware_agents/datacache.py) it shares with
the CPU and Triton agents. No SDK is needed: nothing here runs a kernel."""

from __future__ import annotations

import stat
import threading
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
    for t in other._threads:  # (its reference thread may still be saving: it cleans up as it ends)
        t.join(30)
    assert not root.exists() and not other.private.exists()


def test_a_reference_saved_while_the_data_is_removed_leaves_nothing(
    small_suite: dict[str, Problem], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An eviction while a reference thread computes: `remove` empties the private dir, but a
    reference saved into it at that moment made its rmdir fail, and the dir (hundreds of MB of
    float64 at NKIBench's sizes) stayed in the temp dir (seen as a flaky test). That interleaving
    inside `shutil.rmtree` cannot be timed from a test, so its outcome is staged here: the case
    finishes after `remove`, with the private dir back and holding a file. The last reference
    thread out removes it."""
    from hardware_agents.neuron import slices

    p = small_suite["silu"]
    computing, removed = threading.Event(), threading.Event()
    real = slices.ReferenceFiles

    def late(problem: Problem, inputs: dict[str, object], directory: Path, stem: str) -> object:
        out = real(problem, inputs, directory, stem)
        computing.set()
        assert removed.wait(30)
        data.private.mkdir(exist_ok=True)  # what the failed rmdir left: the dir, a saved reference
        (data.private / "seed0-out.npy").write_bytes(b"\x93NUMPY")
        return out

    monkeypatch.setattr(slices, "ReferenceFiles", late)
    data = ndata.ProblemData(p, (0, 21), tmp_path)
    assert computing.wait(30)  # the first case is being computed
    data.remove()
    assert not data.private.exists()
    removed.set()
    for t in data._threads:
        t.join(30)
        assert not t.is_alive()
    assert not data.private.exists() and not data.dir.exists()
    for cd in data.cases:  # the cases say why they have no references
        with pytest.raises((OSError, RuntimeError)):
            cd.refs()


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


def test_the_reference_store_serves_a_later_process_and_keeps_out_everyone_else(
    small_suite: dict[str, Problem], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hardware_agents.neuron.refstore import ReferenceStore
    from hardware_agents.pipeline import numpy_ref

    p = small_suite["silu"]
    store = ReferenceStore(tmp_path / "store")
    monkeypatch.setattr(store, "worth_keeping", lambda seconds, nbytes: True)  # small refs: keep them anyway
    first = ndata.ProblemData(p, (0, 21), tmp_path, store)
    want = [c.refs()["out"].copy() for c in first.cases]
    floor = first.cases[0].floor(p)
    first.remove()
    assert _mode(store.root) == 0o700 and len(list(store.root.iterdir())) == len(first.cases)

    def no_reference(*_a: object, **_k: object) -> None:
        raise AssertionError("a stored reference was computed again")

    monkeypatch.setattr(numpy_ref, "reference_outputs", no_reference)
    second = ndata.ProblemData(p, (0, 21), tmp_path, store)  # a later process: a new ProblemData
    try:
        assert all(c.entry is not None for c in second.cases)
        for c, ref in zip(second.cases, want, strict=True):
            assert np.array_equal(c.refs()["out"], ref)
            assert c.stats["out"].norm == pytest.approx(float(np.linalg.norm(ref)))
        again = second.cases[0].floor(p)  # the floor too comes from the store
        assert np.array_equal(again["out"].rows, floor["out"].rows)
    finally:
        second.remove()
    # an entry whose file no longer matches its manifest is not served
    (entry,) = [d for d in store.root.iterdir() if d.name == second.cases[0].key]
    with open(entry / "out.npy", "ab") as f:
        f.write(b"x")
    assert store.get(second.cases[0].key) is None


def test_a_stored_case_is_staged_from_the_store_without_drawing_its_inputs(
    small_suite: dict[str, Problem], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The staged arguments are kept with the references: a later process stages the same
    bytes, world-readable in its own data dir, and draws nothing; an entry whose argument
    file no longer matches its manifest is drawn again (and its reference computed again)."""
    from hardware_agents.neuron.refstore import ARG_FILE, ReferenceStore
    from hardware_agents.pipeline import inputgen

    p = small_suite["silu"]
    store = ReferenceStore(tmp_path / "store")
    monkeypatch.setattr(store, "worth_keeping", lambda seconds, nbytes: True)
    first = ndata.ProblemData(p, (0, 21), tmp_path, store)
    first.wait_references()
    staged = [np.load(c.args[0].path) for c in first.cases]
    first.remove()

    def no_draw(*_a: object, **_k: object) -> None:
        raise AssertionError("a stored case's inputs were drawn again")

    real_draw = inputgen.make_inputs
    monkeypatch.setattr(inputgen, "make_inputs", no_draw)
    second = ndata.ProblemData(p, (0, 21), tmp_path, store)
    try:
        for c, want in zip(second.cases, staged, strict=True):
            path = Path(c.args[0].path)
            assert path.is_relative_to(second.dir) and _mode(path) == 0o644
            assert np.array_equal(np.load(path), want)
            assert c.entry is not None
    finally:
        second.remove()
    monkeypatch.setattr(inputgen, "make_inputs", real_draw)
    # a truncated argument file: not served; the case is drawn (and judged) as without a store
    (entry,) = [d for d in store.root.iterdir() if d.name == second.cases[0].key]
    with open(entry / ARG_FILE.format(0), "r+b") as f:
        f.truncate(64)
    third = ndata.ProblemData(p, (0, 21), tmp_path, store)
    try:
        assert np.array_equal(np.load(third.cases[0].args[0].path), staged[0])
    finally:
        third.remove()


def test_the_reference_store_keeps_what_pays_and_evicts_the_least_recently_used(tmp_path: Path) -> None:
    from hardware_agents.neuron.refstore import ReferenceStore

    big = ReferenceStore(tmp_path / "big", budget_bytes=16 << 30)
    assert big.worth_keeping(10.0, 1 << 30)  # 1 GiB that took 10 s: reading it back is faster
    assert not big.worth_keeping(3.0, 1 << 30)  # 1 GiB that took 3 s: recomputing is
    assert not big.worth_keeping(600.0, 8 << 30)  # more than a quarter of the budget
    store = ReferenceStore(tmp_path / "store", budget_bytes=(3 << 20) + (64 << 10))  # three entries
    arr = np.zeros(1 << 17)  # 1 MiB
    np.save(tmp_path / "out.npy", arr)
    ref = {"out": str(tmp_path / "out.npy")}  # a case's reference file, as a profile wrote it
    from accelopt.problem import Tolerance
    from hardware_agents.pipeline.compare import RefStats

    stats = {"out": RefStats(arr, Tolerance(), bound=False)}
    for key in ("a", "b", "c"):
        assert store.put(key, ref, stats, seconds=5.0) is not None
    assert store.get("a") is not None  # a used again: b is now the least recently used
    store.put("d", ref, stats, seconds=5.0)
    assert store.get("b") is None and all(store.get(k) is not None for k in ("a", "c", "d"))
    # what saves the least computing time per byte goes first, however recently it was used
    store.put("cheap", ref, stats, seconds=0.5)
    assert store.get("cheap") is None and all(store.get(k) is not None for k in ("a", "c", "d"))
    store.put("dear", ref, stats, seconds=50.0)
    assert store.get("a") is None and store.get("dear") is not None  # a: the least recently used 5 s one


def test_kept_arguments_count_their_drawing_time_in_what_an_entry_saves(tmp_path: Path) -> None:
    """An entry that also keeps its arguments is worth its refs' and its draw's time: with
    both, it outlives a denser-looking entry of references alone; without the draw's time
    (its bytes doubled, its worth not) it would go first."""
    from accelopt.problem import Tolerance
    from hardware_agents.neuron.protocol import KernelArg
    from hardware_agents.neuron.refstore import ReferenceStore
    from hardware_agents.pipeline.compare import RefStats

    store = ReferenceStore(tmp_path / "store", budget_bytes=(3 << 20) + (64 << 10))  # three MiB
    arr = np.zeros(1 << 17)  # 1 MiB
    np.save(tmp_path / "out.npy", arr)
    ref = {"out": str(tmp_path / "out.npy")}  # a case's reference file, as a profile wrote it
    stats = {"out": RefStats(arr, Tolerance(), bound=False)}
    arg = tmp_path / "arg0.npy"
    np.save(arg, np.ones(1 << 18, dtype=np.float32))  # 1 MiB of staged input
    kept = store.put("kept", ref, stats, seconds=5.0)
    assert kept is not None
    store.put_args(kept, [KernelArg(path=str(arg)), KernelArg(scalar=2.0)], seconds=50.0)
    assert store.put("plain", ref, stats, seconds=5.0) is not None
    store.put("later", ref, stats, seconds=20.0)  # over the budget: the least worth per byte goes
    assert store.get("plain") is None and store.get("later") is not None
    entry = store.get("kept")
    assert entry is not None
    (tmp_path / "stage").mkdir()
    args = entry.args(tmp_path / "stage")
    assert args is not None and args[1].scalar == 2.0
    assert np.array_equal(np.load(args[0].path), np.ones(1 << 18, dtype=np.float32))


def test_a_helper_thread_takes_the_pending_references(
    small_suite: dict[str, Problem], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ProblemData.help_references`: a second reference thread takes the next pending cases
    (each case computed once, by one of the two, with the references one thread gives)."""
    from hardware_agents.neuron import slices

    p = small_suite["silu"]
    seeds = (0, 21, 42, 63, 84)
    alone = ndata.ProblemData(p, seeds, tmp_path)
    alone.wait_references()
    computed: list[tuple[str, str]] = []
    real = slices.ReferenceFiles
    helper_started = threading.Event()

    def counted(problem: Problem, inputs: dict[str, object], directory: Path, stem: str) -> object:
        # the first thread holds its first case until the helper exists
        if not computed:
            assert helper_started.wait(30)
        computed.append((stem, threading.current_thread().name))
        return real(problem, inputs, directory, stem)

    monkeypatch.setattr(slices, "ReferenceFiles", counted)
    helped = ndata.ProblemData(p, seeds, tmp_path)
    assert helped.help_references()
    helper_started.set()
    helped.wait_references()
    assert sorted(n for n, _ in computed) == sorted(c.case.name for c in helped.cases)  # each once
    assert {t for _, t in computed} == {"nki-refs-silu", "nki-refs-help-silu"}
    for a, b in zip(alone.cases, helped.cases, strict=True):
        assert np.array_equal(a.refs()["out"], b.refs()["out"])
    helped.remove()
    alone.remove()
