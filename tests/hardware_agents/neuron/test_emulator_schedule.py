"""The trn1 cost model's schedule (hardware_agents/neuron/emulator/schedule.py, deps.py,
resources.py): dependences are exact however many accesses lie between the two ends of one (no
window of recent accesses), and a loop is priced by its dataflow, not by how it is spelled: an
`nl.affine_range` or `nl.sequential_range` loop, a Python `range` loop in the kernel, in a
helper function or in a closure, `range` under another name, `nl.static_range`, a list of
indices and the straight-line copy give one estimate."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import numpy as np
import pytest

from hardware_agents.neuron.emulator import ArgSpec, compile_kernel, install
from hardware_agents.neuron.emulator.cost import TRN1_COST, Estimate, estimate
from hardware_agents.neuron.emulator.deps import Acc, deltas, find_deps
from hardware_agents.neuron.emulator.resources import Memory, Timelines

install()
import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

S = TRN1_COST


def _estimate(kernel: object, *shapes: tuple[int, ...]) -> Estimate:
    return estimate(compile_kernel(kernel, [ArgSpec(shape=list(s)) for s in shapes]))


# --- exact dependences, however far apart ----------------------------------------------------


CHAIN = 12  # dependent exponentials after the load: longer than any copies' work below


def _hidden_load(copies: int) -> object:
    """A tile loaded, `copies` useless one-column copies of it (on the GpSimd Engine, out of the
    real reader's way), then its real reader: a chain of exponentials on the Scalar Engine."""

    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        junk = nl.ndarray((nl.par_dim(128), max(1, copies)), dtype=nl.float32, buffer=nl.sbuf)
        t = nl.load(x)
        for c in nl.static_range(copies):
            junk[:, c : c + 1] = nisa.tensor_copy(t[:, c : c + 1], engine=nisa.gpsimd_engine)
        e = t
        for _ in nl.static_range(CHAIN):
            e = nisa.activation(op=nl.exp, data=e)  # the first waits for the load
        nl.store(out, value=e)
        return out

    return kernel


@pytest.mark.parametrize("copies", [0, 63, 64, 65, 100])
def test_a_reader_waits_for_its_load_however_many_accesses_lie_between(copies: int) -> None:
    """A window of the last 64 accesses of a tensor lost the load behind 64 copies: the chain was
    priced as if its operand were already there (one load shorter), and the useless copies made
    the kernel faster. The copies run beside the chain and never set the path."""
    f = 512
    load = S.dma_transfer_s + (128 * f * 4 + 128 * S.dma_descriptor_bytes) / (16 * S.dma_engine_bw)
    exp = (f + S.dependent_cycles + S.access_cycles) / S.act_hz
    est = _estimate(_hidden_load(copies), (128, f))
    assert est.critical_path_s == pytest.approx(load + CHAIN * exp + load)


def test_find_deps_keeps_a_write_behind_more_than_64_reads() -> None:
    """At the level of deps.py: item 0 writes a tile, items 1..100 read one column each, item 101
    reads all of it and must wait for item 0; a window of 64 accesses would drop that edge."""
    whole = Acc(0, True, False, False, ((), ()), (0, 0), (127, 511), False, exact=True)
    columns = [Acc(0, False, True, False, ((), ()), (0, c), (127, c), False) for c in range(100)]
    reader = Acc(0, False, True, False, ((), ()), (0, 0), (127, 511), False)
    accs = [{0: [whole]}, *({0: [c]} for c in columns), {0: [reader]}]
    deps = find_deps(accs, -1, 1, {}, lambda i, j, a, b: None)
    assert [d.src for d in deps[-1]] == [0]
    assert all([d.src for d in deps[j]] == [0] for j in range(1, 101))


def test_find_deps_keeps_a_write_behind_more_than_64_other_writes() -> None:
    """Item 0 writes half of a tensor, items 1..100 write single columns of the other half, item 101
    reads the first half: it waits for item 0 (and only it), however many writes came between."""
    half = Acc(0, True, False, False, ((), ()), (0, 0), (127, 511), False, exact=True)
    columns = [
        Acc(0, True, False, False, ((), ()), (0, c), (127, c), False, exact=True) for c in range(512, 612)
    ]
    reader = Acc(0, False, True, False, ((), ()), (0, 0), (127, 511), False)
    accs = [{0: [half]}, *({0: [c]} for c in columns), {0: [reader]}]
    deps = find_deps(accs, -1, 1, {}, lambda i, j, a, b: None)
    assert [d.src for d in deps[-1]] == [0]
    assert all(deps[j] == [] for j in range(1, 101))


def test_find_deps_makes_a_write_wait_for_every_earlier_reader() -> None:
    """100 reads of single columns, then a write of the whole tile: it waits for all of them
    (write after read), not only the most recent ones."""
    columns = [Acc(0, False, True, False, ((), ()), (0, c), (127, c), False) for c in range(100)]
    whole = Acc(0, True, False, False, ((), ()), (0, 0), (127, 511), False, exact=True)
    deps = find_deps([*({0: [c]} for c in columns), {0: [whole]}], -1, 1, {}, lambda i, j, a, b: None)
    assert sorted(d.src for d in deps[-1]) == list(range(100))


def _random_accesses(
    rng: random.Random, items: int, var: int, writes: float = 0.35
) -> list[dict[int, list[Acc]]]:
    out = []
    for _ in range(items):
        by: dict[int, list[Acc]] = {}
        for _ in range(rng.randint(1, 2)):
            tensor = rng.randint(0, 2)
            k = rng.choice([0, 0, 1, 2])  # how the first dimension moves with the loop counter
            lo0, lo1 = rng.randint(0, 6), rng.randint(0, 40)
            hi0, hi1 = lo0 + rng.randint(0, 2), lo1 + rng.choice([0, 0, 3, 40])
            write = rng.random() < writes
            coef = (((var, k),) if k else (), ())
            a = Acc(tensor, write, not write, False, coef, (lo0, lo1), (hi0, hi1), False, exact=write)
            by.setdefault(tensor, []).append(a)
        out.append(by)
    return out


def _closure(edges: set[tuple[tuple[int, int], tuple[int, int]]]) -> dict[tuple[int, int], set]:
    """Nodes (iteration, item) each edge points into -> everything reaching them."""
    into: dict[tuple[int, int], set] = {}
    for src, dst in edges:
        into.setdefault(dst, set()).add(src)
    reach: dict[tuple[int, int], set] = {}
    for node in sorted(into):  # program order: an edge never points backwards
        got = set()
        for src in into[node]:
            got.add(src)
            got |= reach.get(src, set())
        reach[node] = got
    return reach


@pytest.mark.parametrize(("seed", "writes"), [(s, 0.35) for s in range(4)] + [(s, 0.8) for s in range(4, 7)])
def test_find_deps_implies_every_conflict_of_the_unrolled_program(seed: int, writes: float) -> None:
    """Random blocks of 150 items (more reads, or more writes, per tensor than any window) over 3
    iterations: every pair of item instances that touch the same memory, one writing, is ordered
    by the dependences found (directly or through others), and every dependence found is such a
    pair. Tensor 2 is fresh memory each iteration (a tile declared in the loop): nothing carried."""
    rng = random.Random(seed)
    var, trip, items = 5, 3, 150
    accs = _random_accesses(rng, items, var, writes)
    deps = find_deps(accs, var, trip, {}, lambda i, j, a, b: None, fresh=[2])
    found = {
        ((n - d, x), (n, y))
        for y, ds in enumerate(deps)
        for x, lo, hi, _ in ds
        for n in range(trip)
        for d in range(lo, hi + 1)
        if n - d >= 0
    }
    want = set()
    nodes = [(n, j) for n in range(trip) for j in range(items)]
    for (m, x), (n, y) in itertools.combinations(nodes, 2):
        for tensor, xs in accs[x].items():
            if tensor == 2 and m != n:
                continue
            for a, b in itertools.product(xs, accs[y].get(tensor, ())):
                got = (a.write or b.write) and deltas(a, b, var, trip, {})
                if got and got[0] <= n - m <= got[1]:
                    want.add(((m, x), (n, y)))
    assert found <= want  # nothing that is not a conflict
    reach = _closure(found)
    missing = [(src, dst) for src, dst in want if src not in reach.get(dst, set())]
    assert not missing, missing[:5]
    assert len(want) > len(found)  # and implied conflicts were not repeated


# --- one estimate whatever the loop's spelling -----------------------------------------------


def _tile(x, out, i):
    t = nl.load(x[i * 128 : (i + 1) * 128, :])
    nl.store(out[i * 128 : (i + 1) * 128, :], value=nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0)))


@nki.jit
def seq_loop(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.sequential_range(x.shape[0] // 128):
        _tile(x, out, i)
    return out


@nki.jit
def affine_loop(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        _tile(x, out, i)
    return out


@nki.jit
def python_loop(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in range(x.shape[0] // 128):  # compiled as nl.sequential_range
        _tile(x, out, i)
    return out


def _rows(x, out):
    for i in range(x.shape[0] // 128):  # a Python loop outside the kernel function: unrolled
        _tile(x, out, i)


@nki.jit
def helper_loop(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    _rows(x, out)
    return out


def _closure_kernel() -> object:
    rows = 128

    @nki.jit
    def closure_loop(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        for i in range(x.shape[0] // rows):  # a closure is not rewritten: unrolled
            _tile(x, out, i)
        return out

    return closure_loop


_r = range


@nki.jit
def aliased_loop(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in _r(x.shape[0] // 128):  # `range` under another name: unrolled
        _tile(x, out, i)
    return out


@nki.jit
def static_loop(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.static_range(x.shape[0] // 128):
        _tile(x, out, i)
    return out


@nki.jit
def list_loop(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in list(range(x.shape[0] // 128)):  # a loop over a Python list: unrolled
        _tile(x, out, i)
    return out


@nki.jit
def straight_line(x):  # two row tiles, written out
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    _tile(x, out, 0)
    _tile(x, out, 1)
    return out


SPELLINGS: dict[str, Callable[[], object]] = {
    "sequential_range": lambda: seq_loop,
    "affine_range": lambda: affine_loop,
    "python range": lambda: python_loop,
    "helper function": lambda: helper_loop,
    "closure": _closure_kernel,
    "aliased range": lambda: aliased_loop,
    "static_range": lambda: static_loop,
    "list": lambda: list_loop,
}


@pytest.mark.parametrize("rows", [256, 1024, 4096, 16384])
def test_every_spelling_of_a_loop_gets_one_estimate(rows: int) -> None:
    shape = (rows, 512)
    got = {name: _estimate(make(), shape) for name, make in SPELLINGS.items()}
    if rows == 256:
        got["straight line"] = _estimate(straight_line, shape)
    ref = got["sequential_range"]
    assert [e.loops for e in got.values()].count([]) >= 4  # the unrolled ones have no loop
    for name, est in got.items():
        assert est.latency_s == pytest.approx(ref.latency_s, rel=1e-9), name
        assert est.resource_s == pytest.approx(ref.resource_s, rel=1e-9), name
    # the schedule is no perfect overlap: iterations queue for the DMA bandwidth they share
    assert ref.critical_path_s > ref.resource_s


def _block(x, w, out, m):  # one 128-row block of x @ w
    acc = nl.zeros((128, w.shape[1]), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(x.shape[1] // 128):
        xt = nl.copy(nisa.nc_transpose(nl.load(x[m * 128 : (m + 1) * 128, k * 128 : (k + 1) * 128])))
        acc += nisa.nc_matmul(xt, nl.load(w[k * 128 : (k + 1) * 128, :]))
    nl.store(out[m * 128 : (m + 1) * 128, :], value=nl.copy(acc))


@nki.jit
def blocks_in_a_loop(x, w):
    out = nl.ndarray((x.shape[0], w.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.sequential_range(x.shape[0] // 128):
        _block(x, w, out, m)
    return out


def _blocks(x, w, out):
    for m in range(x.shape[0] // 128):
        _block(x, w, out, m)


@nki.jit
def blocks_in_a_helper(x, w):
    out = nl.ndarray((x.shape[0], w.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    _blocks(x, w, out)
    return out


def test_an_unrolled_outer_loop_of_inner_loops_gets_the_loops_estimate() -> None:
    shapes = ((1024, 512), (512, 512))
    loop, helper = (_estimate(k, *shapes) for k in (blocks_in_a_loop, blocks_in_a_helper))
    assert len(loop.loops) == 2 and len(helper.loops) == 8  # 8 runs of the inner loop, unrolled
    assert helper.latency_s == pytest.approx(loop.latency_s, rel=1e-9)


def test_a_long_loop_extrapolated_agrees_with_its_unrolled_copy() -> None:
    """Past `SIMULATED` placements a loop's steady state is extrapolated; its static_range copy,
    straight-line code, is scheduled instance by instance. Both within 1 % (how long each takes
    is a benchmark's figure, benchmarks/nki_emulator_bench.py, not a timed assertion here)."""
    shape = (128 * 3000, 64)
    loop = _estimate(seq_loop, shape)
    unrolled = _estimate(static_loop, shape)
    assert unrolled.latency_s == pytest.approx(loop.latency_s, rel=0.01)


# --- resources ------------------------------------------------------------------------------


def test_work_takes_the_free_time_of_its_engine_piecewise() -> None:
    lines = Timelines()
    lines.best((({"dve": 1.0}, 1.0),), 0.0)  # [0, 1)
    lines.best((({"dve": 1.0}, 1.0),), 2.0)  # [2, 3)
    # 2 s of Vector time ready at 0: [1, 2) and [3, 4); complete its latency's extra after that
    occ, lat, start = lines.best((({"dve": 2.0}, 2.5),), 0.0)
    assert (start, start + lat) == (1.0, 4.5)
    # two engines: the one on which it completes sooner (Scalar, free now), though slower
    occ, lat, start = lines.best((({"dve": 1.0}, 1.0), ({"act": 1.5}, 1.5)), 0.0)
    assert occ == {"act": 1.5} and start == 0.0
    # an engine and its port at once: only where both are free
    lines.best((({"port": 1.0}, 1.0),), 5.0)  # port busy [5, 6)
    occ, lat, start = lines.best((({"dve": 1.0, "port": 1.0}, 1.0),), 4.5)
    assert start == 4.5 and start + lat == 6.5  # [4.5, 5) then [6, 6.5)


def test_a_tile_waits_until_it_fits_beside_live_and_unreleased_dead_tiles() -> None:
    mem = Memory({"sbuf": 100})
    mem.take("sbuf", 60)
    mem.dead("sbuf", 60, 5.0)  # released at 5
    mem.take("sbuf", 30)
    mem.dead("sbuf", 30, 10.0)  # released at 10
    assert mem.ready({"sbuf": 10}, 0.0) == 0.0  # 60 + 30 + 10 fit
    assert mem.ready({"sbuf": 20}, 0.0) == 5.0  # 110: the first must be released
    assert mem.ready({"sbuf": 80}, 0.0) == 10.0  # both
    assert mem.ready({"sbuf": 20}, 7.0) == 7.0
    mem.take("sbuf", 75)  # live: 75 + 30 unreleased + 20 do not fit until 10
    assert mem.ready({"sbuf": 20}, 0.0) == 10.0
    mem.take("sbuf", 50)  # live tiles alone overflow: spilled; the new tile waits for every dead one
    assert mem.ready({"sbuf": 1}, 0.0) == 10.0


def test_on_chip_memory_limits_a_straight_line_copy_as_it_limits_the_loop() -> None:
    """Row tiles of 40 KiB per partition (t, its exp, and the reciprocal's operand): the memory,
    not the engines, sets how many overlap, in the loop and in its static_range copy alike."""

    @nki.jit
    def wide(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.sequential_range(x.shape[0] // 128):
            t = nl.load(x[i * 128 : (i + 1) * 128, :])
            nl.store(out[i * 128 : (i + 1) * 128, :], value=nl.multiply(t, nl.exp(t)))
        return out

    @nki.jit
    def wide_static(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.static_range(x.shape[0] // 128):
            t = nl.load(x[i * 128 : (i + 1) * 128, :])
            nl.store(out[i * 128 : (i + 1) * 128, :], value=nl.multiply(t, nl.exp(t)))
        return out

    shape = (128 * 8, 10240)
    loop, copy = _estimate(wide, shape), _estimate(wide_static, shape)
    assert loop.loops[0].limit == "on-chip memory" and loop.loops[0].in_flight < 8
    assert copy.latency_s == pytest.approx(loop.latency_s, rel=1e-9)
    assert np.isfinite(copy.latency_s)
