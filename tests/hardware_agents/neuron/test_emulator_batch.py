"""The emulator's executor on several cases at once (`execute_batch`, what the agent's execute
child runs) gives every case the bits `execute` gives it alone: the API test kernels (every
instruction kind, masks, block dimensions, constants, PSUM accumulation, scans, bf16 rounding)
and the 14 NKIBench operators' baselines at small shapes, on three distinct input sets each;
a one/zero flag is checked on each case's own data."""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import test_emulator_api as api
from neuron_helpers import nkibench14_problems
from nkibench_fixture import write_nkibench

import suites
from accelopt.problem import Problem
from hardware_agents.neuron.emulator import ArgSpec, compile_kernel, install
from hardware_agents.neuron.emulator import execute as execute_mod
from hardware_agents.neuron.emulator.analysis import analyze
from hardware_agents.neuron.emulator.errors import OneZeroFlagError
from hardware_agents.neuron.emulator.execute import execute, execute_batch
from hardware_agents.neuron.reference import ReferenceModule
from hardware_agents.pipeline import inputgen
from suites.nkibench import NKIBENCH_PROBLEMS, import_nkibench

install()

import neuronxcc.nki as nki  # noqa: E402  (the emulator's stand-in, installed above)
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _check(kernel: object, cases: list[list[np.ndarray | None]], scalars: list[Any]) -> None:
    specs = [
        ArgSpec.of(a) if a is not None else ArgSpec(scalar=s) for a, s in zip(cases[0], scalars, strict=True)
    ]
    prog = compile_kernel(kernel, specs)
    an = analyze(prog, check=False)
    alone = [execute(prog, c, an) for c in cases]
    together = execute_batch(prog, cases, an)
    assert len(together) == len(cases)
    for i, (one, many) in enumerate(zip(alone, together, strict=True)):
        assert len(one) == len(many)
        for j, (x, y) in enumerate(zip(one, many, strict=True)):
            assert _same_bits(x, y), f"case {i} output {j} differs in a batch"
    # the cases differ, so a batch that mixed them up could not pass
    assert not all(_same_bits(x, y) for x, y in zip(alone[0], alone[1], strict=True))


API_KERNELS = {  # the shapes of the API tests
    "elementwise": (api.elementwise, [(256, 64), (256, 64)]),
    "reductions": (api.reductions, [(128, 96)]),
    "softmax_rows": (api.softmax_rows, [(64, 200)]),
    "matmuls": (api.matmuls, [(96, 128), (128, 320), (128, 96)]),
    "transposes": (api.transposes, [(128, 96)]),
    "isa_ops": (api.isa_ops, [(64, 80), (64, 1)]),
    "scan_and_loop_reduce": (api.scan_and_loop_reduce, [(32, 64), (32, 64)]),
    "blocks_masks_constants": (api.blocks_masks_constants, [(200, 64)]),
    "static_and_python_loops": (api.static_and_python_loops, [(192, 16)]),
    "bf16_path": (api.bf16_path, [(64, 128), (128, 96)]),
}


@pytest.mark.parametrize("name", sorted(API_KERNELS))
def test_a_batch_gives_each_case_its_own_bits_api_kernels(name: str) -> None:
    kernel, shapes = API_KERNELS[name]
    rng = np.random.default_rng(11)
    cases: list[list[np.ndarray | None]] = [
        [rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(3)
    ]
    _check(kernel, cases, [None] * len(shapes))


@pytest.fixture(scope="module")
def nkb14(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Problem]:
    root = tmp_path_factory.mktemp("nkibench14-batch")
    write_nkibench(root / "src", nkibench14_problems())
    report = import_nkibench(root / "src", root / "suite", name="nkb14-batch")
    return {p.name: p for p in suites.load_suite(report.out)}


def _load(problem: Problem) -> object:
    path = Path(tempfile.mkdtemp(prefix="nki-batch-")) / "kernel.py"
    path.write_text(problem.baseline.sources[0].content)
    spec = importlib.util.spec_from_file_location(f"batch_{problem.name}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return getattr(mod, problem.baseline.entry_symbol)


@pytest.mark.parametrize("name", sorted(NKIBENCH_PROBLEMS))
def test_a_batch_gives_each_case_its_own_bits_nkibench(name: str, nkb14: dict[str, Problem]) -> None:
    p = nkb14[name]
    ref_mod = ReferenceModule(p)
    cases, scalars = [], []
    for case in inputgen.input_cases(p.definition, (0, 21))[:3]:  # two seeds and an adversarial case
        args = ref_mod.kernel_args(inputgen.make_inputs(p, case))
        cases.append([a if isinstance(a, np.ndarray) else None for a in args])
        scalars = [None if isinstance(a, np.ndarray) else a for a in args]
    _check(_load(p), cases, scalars)


@nki.jit
def _transpose_flagged(s, m):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nl.copy(nisa.nc_matmul(nl.load(s), nl.load(m), is_transpose=True)))
    return out


def test_a_batch_checks_each_cases_one_zero_flags_on_its_own_data() -> None:
    """is_transpose claims an identity on either side, per case: a batch whose cases keep it on
    different sides is honest (each case alone is), and one case that breaks it fails the batch
    as it fails alone (`OneZeroFlagError`, the agent's `incorrect`)."""
    rng = np.random.default_rng(5)
    x, y, z = (rng.standard_normal((128, 128)).astype(np.float32) for _ in range(3))
    eye = np.identity(128, dtype=np.float32)
    _check(_transpose_flagged, [[eye, x], [y, eye]], [None, None])
    prog = compile_kernel(_transpose_flagged, [ArgSpec.of(eye), ArgSpec.of(x)])
    with pytest.raises(OneZeroFlagError, match="err_false_onezero_flag"):
        execute(prog, [y, z])
    with pytest.raises(OneZeroFlagError, match="err_false_onezero_flag"):
        execute_batch(prog, [[eye, x], [y, z], [z, eye]])


def _fast_and_general(kernel: object, cases: list[list[np.ndarray | None]], scalars: list[Any]) -> None:
    """The executor's fast paths (`execute.FAST_PATHS`: views on a block's own buffer, matmul
    operands read in place by BLAS, float32 results stored in place) give the general path's
    bits on every case."""
    specs = [
        ArgSpec.of(a) if a is not None else ArgSpec(scalar=s) for a, s in zip(cases[0], scalars, strict=True)
    ]
    prog = compile_kernel(kernel, specs)
    an = analyze(prog, check=False)
    fast = execute_batch(prog, cases, an)
    assert execute_mod.FAST_PATHS
    try:
        execute_mod.FAST_PATHS = False
        general = execute_batch(prog, cases, an)
    finally:
        execute_mod.FAST_PATHS = True
    for i, (f, g) in enumerate(zip(fast, general, strict=True)):
        for j, (x, y) in enumerate(zip(f, g, strict=True)):
            assert _same_bits(np.ascontiguousarray(x), np.ascontiguousarray(y)), f"case {i} output {j}"


@pytest.mark.parametrize("name", sorted(API_KERNELS))
def test_the_fast_paths_give_the_general_paths_bits_api_kernels(name: str) -> None:
    kernel, shapes = API_KERNELS[name]
    rng = np.random.default_rng(12)
    cases: list[list[np.ndarray | None]] = [
        [rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(2)
    ]
    _fast_and_general(kernel, cases, [None] * len(shapes))


@pytest.mark.parametrize("name", sorted(NKIBENCH_PROBLEMS))
def test_the_fast_paths_give_the_general_paths_bits_nkibench(name: str, nkb14: dict[str, Problem]) -> None:
    p = nkb14[name]
    ref_mod = ReferenceModule(p)
    cases, scalars = [], []
    for case in inputgen.input_cases(p.definition, (3,))[:1]:
        args = ref_mod.kernel_args(inputgen.make_inputs(p, case))
        cases.append([a if isinstance(a, np.ndarray) else None for a in args])
        scalars = [None if isinstance(a, np.ndarray) else a for a in args]
    _fast_and_general(_load(p), cases, scalars)


@pytest.mark.parametrize("k", [2, 3, 17, 128])
def test_blas_reads_a_strided_operand_as_it_reads_a_packed_copy(k: int) -> None:
    """What `_blas_operand` relies on: a matmul whose operands are row-strided views of wider
    tiles gives the bits of the same matmul on packed copies (single rows and columns, which
    go to a layout-dependent matrix-vector kernel, are always packed)."""
    rng = np.random.default_rng(k)
    for m, n, pad in [
        (2, 2, 1),
        (7, 512, 3),
        (128, 128, 900),
        (100, 3, 0),
        (128, 512, 512),
        (1, 64, 2),
        (64, 1, 5),
    ]:
        wide_s = rng.standard_normal((2, k, m + pad + 1)).astype(np.float32)
        wide_m = rng.standard_normal((2, k, n + pad + 2)).astype(np.float32)
        s, mv = wide_s[:, :, 1 : 1 + m], wide_m[:, :, 2 : 2 + n]
        s_op, m_op = execute_mod._blas_operand(s), execute_mod._blas_operand(mv)
        if m == 1 or n == 1:
            assert (s_op.flags.c_contiguous and m == 1) or (m_op.flags.c_contiguous and n == 1)
        for c in range(2):
            packed = np.matmul(np.ascontiguousarray(s[c]).T, np.ascontiguousarray(mv[c]))
            assert _same_bits(np.matmul(s_op[c].T, m_op[c]), packed), (k, m, n, pad)


def test_cases_run_one_at_a_time_where_a_batch_would_not_pay(monkeypatch: pytest.MonkeyPatch) -> None:
    """`children._batches`: the cases of a program whose walk is short for its inputs' size run
    one at a time (a batch would copy their inputs for little saved); the others together, as
    many as `batch_bytes` holds, counting each case's device memory and on-chip tiles."""
    from hardware_agents.neuron.emulator import children

    prog = compile_kernel(api.elementwise, [ArgSpec(shape=[256, 64]), ArgSpec(shape=[256, 64])])
    per_mib = children._instances(prog.body) / (children._input_bytes(prog) / (1 << 20))
    assert per_mib > 0
    cases = [children.ExecCase(name=f"c{i}", program="p", args=[]) for i in range(3)]
    req = children.ExecRequest(cases=cases, batch_bytes=1 << 30)
    monkeypatch.setattr(children, "BATCH_MIN_INSTANCES_PER_MIB", per_mib * 0.9)
    assert [len(b) for b in children._batches(req, {"p": prog})] == [3]
    monkeypatch.setattr(children, "BATCH_MIN_INSTANCES_PER_MIB", per_mib * 1.1)
    assert [len(b) for b in children._batches(req, {"p": prog})] == [1, 1, 1]
    per_case = children._hbm_bytes(prog) + children._on_chip_bytes(prog)
    assert children._on_chip_bytes(prog) > 0
    tight = children.ExecRequest(cases=cases, batch_bytes=2 * per_case)
    monkeypatch.setattr(children, "BATCH_MIN_INSTANCES_PER_MIB", 0)
    assert [len(b) for b in children._batches(tight, {"p": prog})] == [2, 1]
    # room for two cases' device memory but not their on-chip tiles: one at a time (a batch
    # holds every case's tiles: gqa_full's baseline declares 8.5 MB of SBUF a partition)
    no_tiles = children.ExecRequest(cases=cases, batch_bytes=2 * children._hbm_bytes(prog))
    assert [len(b) for b in children._batches(no_tiles, {"p": prog})] == [1, 1, 1]
