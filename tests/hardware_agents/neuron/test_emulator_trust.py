"""What the trusted side believes of a program from the kernel's process (hardware_agents/neuron/
emulator/validate.py, the executor's checks on the data, the estimate's gate): every field the
cost model prices by is checked against what the executor does, forged programs are refused
before any strided view exists, and the honest kernels of the emulator's tests pass all of it.
The agent-level hacks are in tests/hardware_agents/adversarial/neuron_emulated/."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np
import pytest
from test_emulator_api import _model_1_programs, _program, rand

from hardware_agents.neuron.emulator import ArgSpec, NKICompileError, compile_kernel, install
from hardware_agents.neuron.emulator.cost import TRN1_COST, estimate
from hardware_agents.neuron.emulator.errors import OneZeroFlagError
from hardware_agents.neuron.emulator.execute import execute
from hardware_agents.neuron.emulator.program import Access, Alloc, Instr, Loop, Node, Program
from hardware_agents.neuron.emulator.validate import check_program
from hardware_agents.neuron.estimate_gate import hard_limits
from hardware_agents.neuron.specs import TRN1
from hardware_agents.pipeline.roofline import implausible

install()
import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

# --- a program of each instruction kind the forgeries edit -------------------------------------


@nki.jit
def mixed(x, w, s):
    """Loads (one of a constant), an activation (Scalar Engine) with its pipelined reduce,
    tensor_tensors, an iota, a transpose against an identity (one/zero flags) and a matmul into
    PSUM, in a loop with a tile declared in its body."""
    out = nl.ndarray((2, 128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    wt = nl.load(w)
    eye = nl.load(nl.shared_constant(np.identity(128, dtype=np.float32)))
    for i in nl.affine_range(2):
        t = nl.load(x[i])
        sums = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf, name="sums")
        e = nisa.activation_reduce(op=nl.exp, data=t, reduce_op=nl.add, reduce_res=sums)
        p = nisa.tensor_tensor(e, t, op=nl.multiply)
        rows, cols = nl.mgrid[0:128, 0:128]
        ids = nisa.iota(rows * 0 + cols + i, dtype=nl.float32)
        q = nisa.tensor_tensor(p, ids, op=nl.add)
        qt = nl.copy(nisa.nc_matmul(q, eye, is_moving_onezero=True, is_transpose=True))
        acc = nl.zeros((128, 128), dtype=nl.float32, buffer=nl.psum)
        acc += nisa.nc_matmul(qt, wt)
        nl.store(out[i], value=nl.add(nl.copy(acc), sums))
    return out


ARGS = [rand(2, 128, 128, scale=0.1), rand(128, 128, scale=0.1), rand(128, 1)]


def _mixed() -> Program:
    return compile_kernel(mixed, [ArgSpec.of(a) for a in ARGS])


def _edit(nodes: list[Node], pick: Callable[[Instr], bool], change: Callable[[Instr], Node]) -> list[Node]:
    out: list[Node] = []
    for n in nodes:
        if isinstance(n, Loop):
            n = msgspec.structs.replace(n, body=_edit(n.body, pick, change))
        elif isinstance(n, Instr) and pick(n):
            n = change(n)
        out.append(n)
    return out


def _instrs(prog: Program, op: str) -> Callable[[Instr], bool]:
    return lambda n: n.op == op


def _with_instr(kind: str, **changes: Any) -> Callable[[Program], None]:
    def forge(prog: Program) -> None:
        prog.body = _edit(prog.body, _instrs(prog, kind), lambda n: msgspec.structs.replace(n, **changes))

    return forge


def _swap_matmul_operands(prog: Program) -> None:
    """The stationary and moving operands in each other's place, their roles too: the executor
    binds by role (the same product), the cost model read the stationary by position."""
    prog.body = _edit(
        prog.body,
        _instrs(prog, "matmul"),
        lambda n: msgspec.structs.replace(n, srcs=n.srcs[::-1], roles=n.roles[::-1]),
    )


def _duplicate_role(prog: Program) -> None:
    prog.body = _edit(
        prog.body,
        lambda n: n.op == "tensor_tensor" and n.args.get("op") == "multiply",
        lambda n: msgspec.structs.replace(n, roles=["data1", "data1"]),
    )


def _alias_on_chip(prog: Program) -> None:
    """An SBUF tile (the weights' load) declared a view of the weights in HBM (the same size):
    its load vanishes from the price."""
    sbuf = next(t for t in prog.tensors if t.buffer == "sbuf" and t.shape == [128, 128])
    prog.tensors[sbuf.id] = msgspec.structs.replace(sbuf, alias=prog.args[1])


def _alias_shape(prog: Program) -> None:
    """An HBM alias of another size than its base: the executor's reshape would fail, a view
    of it would read beyond the base."""
    base = prog.tensors[prog.args[0]]
    fake = msgspec.structs.replace(
        base, id=len(prog.tensors), name="fake", shape=[4, 128, 128], alias=base.id
    )
    prog.tensors.append(fake)


def _constant_shape(prog: Program) -> None:
    const = next(t for t in prog.tensors if t.buffer == "const")
    prog.tensors[const.id] = msgspec.structs.replace(const, shape=[256, 128])


def _input_dtype(prog: Program) -> None:
    """The input declared as bfloat16: the executor would convert the data (loads priced at half
    the bytes); the signature the trusted side asked for says float32."""
    x = prog.tensors[prog.args[0]]
    prog.tensors[x.id] = msgspec.structs.replace(x, dtype="bfloat16")


def _extra_loop(prog: Program) -> None:
    prog.loop_trips = {**prog.loop_trips, 1 << 30: 1}


def _unlisted_input(prog: Program) -> None:
    x = prog.tensors[prog.args[0]]
    prog.tensors.append(msgspec.structs.replace(x, id=len(prog.tensors), name="ghost"))


def _drop_allocs(prog: Program) -> None:
    """A tile declared in the loop body without its allocation: the executor would keep its
    values across iterations, while the schedule rotates it as fresh memory each iteration."""

    def strip(nodes: list[Node]) -> list[Node]:
        out: list[Node] = []
        for n in nodes:
            if isinstance(n, Loop):
                n = msgspec.structs.replace(n, body=strip(n.body))
            elif isinstance(n, Alloc) and prog.tensors[n.tensor].name == "sums":
                continue
            out.append(n)
        return out

    prog.body = strip(prog.body)


def _alloc_moved_out(prog: Program) -> None:
    """The allocation of a loop body's tile moved before the loop: declared in the loop, allocated
    once."""
    loop = next(n for n in prog.body if isinstance(n, Loop))
    alloc = next(n for n in loop.body if isinstance(n, Alloc) and prog.tensors[n.tensor].name == "sums")
    i = prog.body.index(loop)
    prog.body = [
        *prog.body[:i],
        alloc,
        msgspec.structs.replace(loop, body=[n for n in loop.body if n is not alloc]),
        *prog.body[i + 1 :],
    ]


def _pipelined_alone(prog: Program) -> None:
    """The reduce of activation_reduce moved after the multiply: priced as a 64-cycle tail of an
    instruction it no longer follows."""

    def move(nodes: list[Node]) -> list[Node]:
        out: list[Node] = []
        held = None
        for n in nodes:
            if isinstance(n, Loop):
                n = msgspec.structs.replace(n, body=move(n.body))
            if isinstance(n, Instr) and n.op == "reduce":
                held = n
                continue
            out.append(n)
            if held is not None and isinstance(n, Instr) and n.op == "tensor_tensor":
                out.append(held)
                held = None
        return out

    prog.body = move(prog.body)


def _dst(n: Instr) -> Access:
    assert n.dst is not None
    return n.dst


def _matmul_result(prog: Program) -> None:
    prog.body = _edit(
        prog.body,
        _instrs(prog, "matmul"),
        lambda n: msgspec.structs.replace(n, dst=msgspec.structs.replace(_dst(n), shape=[1, 1])),
    )


def _iota_outer_loop(prog: Program) -> None:
    prog.body = _edit(
        prog.body,
        _instrs(prog, "iota"),
        lambda n: msgspec.structs.replace(n, args={**n.args, "loops": [[7, 1]]}),
    )


def _dma_from_psum(prog: Program) -> None:
    """The store reads the matmul's PSUM tile: DMA engines do not reach PSUM."""
    acc = next(t for t in prog.tensors if t.buffer == "psum" and t.init == "zeros")
    prog.body = _edit(
        prog.body,
        lambda n: n.op == "dma" and prog.tensors[_dst(n).tensor].buffer == "shared_hbm",
        lambda n: msgspec.structs.replace(n, srcs=[msgspec.structs.replace(n.srcs[0], tensor=acc.id)]),
    )


def _output_index(prog: Program) -> None:
    prog.outputs = [-1]


FORGERIES: dict[str, tuple[Callable[[Program], None], str]] = {
    "exp labelled on the Vector Engine": (_with_instr("act", engine="dve"), "err_unsupported_engine"),
    "exp on any engine": (_with_instr("act", engine="any:act,dve,pool"), "err_unsupported_engine"),
    "matmul labelled on the Scalar Engine": (_with_instr("matmul", engine="act"), "err_unsupported_engine"),
    "multiply on GpSimd": (_with_instr("tensor_tensor", engine="pool"), "err_unsupported_engine"),
    "a DMA on the Vector Engine": (_with_instr("dma", engine="dve"), "err_unsupported_engine"),
    "matmul operands swapped": (_swap_matmul_operands, "err_invalid_program"),
    "a role twice": (_duplicate_role, "err_invalid_program"),
    "an unknown instruction": (_with_instr("tensor_tensor", op="fused_magic"), "err_invalid_program"),
    "a Vector Engine add that accumulates": (_with_instr("tensor_tensor", acc=True), "err_invalid_program"),
    "a pipelined reduce after another instruction": (_pipelined_alone, "err_invalid_program"),
    "a matmul's result tile": (_matmul_result, "err_invalid_program"),
    "an iota indexed by a loop it is not in": (_iota_outer_loop, "err_invalid_program"),
    "a DMA from PSUM": (_dma_from_psum, "err_unsupported_memory"),
    "SBUF aliasing an input": (_alias_on_chip, "err_invalid_alias"),
    "an HBM alias of another size": (_alias_shape, "err_invalid_alias"),
    "a constant of another shape than its data": (_constant_shape, "err_invalid_program"),
    "an input of another dtype than compiled": (_input_dtype, "err_invalid_program"),
    "a loop that does not exist": (_extra_loop, "err_invalid_program"),
    "an input that is no argument": (_unlisted_input, "err_invalid_program"),
    "a loop tile never allocated": (_drop_allocs, "err_local_variable_used_out_of_scope"),
    "a loop tile allocated outside its loop": (_alloc_moved_out, "err_invalid_program"),
    "an output that is no tensor": (_output_index, "err_invalid_program"),
}


def test_the_honest_program_passes_and_runs() -> None:
    prog = _mixed()
    check_program(prog, [ArgSpec.of(a) for a in ARGS])
    (got,) = execute(prog, ARGS)
    x, w, _ = ARGS
    for i in range(2):
        e = np.exp(x[i].astype(np.float64))
        q = e * x[i] + (np.arange(128) + i)[None, :]
        want = q @ w + e.sum(axis=1, keepdims=True)
        assert np.allclose(got[i], want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_forged_field_is_refused_before_anything_runs(name: str) -> None:
    forge, error = FORGERIES[name]
    prog = _mixed()
    forge(prog)
    forged = msgspec.msgpack.decode(msgspec.msgpack.encode(prog), type=Program)  # as the agent reads it
    with pytest.raises(NKICompileError) as err:
        check_program(forged, [ArgSpec.of(a) for a in ARGS])
    assert err.value.name == error, err.value


def test_a_constant_budget_is_a_compile_error() -> None:
    @nki.jit
    def big_table(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.shared_constant(np.ones((128, 9000), dtype=np.float32))  # 4.4 MiB computed on the host
        nl.store(out, value=nl.load(x))
        return out

    prog = compile_kernel(big_table, [ArgSpec(shape=[128, 64])])
    with pytest.raises(NKICompileError, match="err_constant_too_large"):
        check_program(prog)


# --- what the executor makes true -------------------------------------------------------------


@nki.jit
def carries_a_loop_tile(x):
    """Loads into a tile declared in the loop body only in the first iteration, then reads it in
    every one: on the hardware the second iteration's tile is fresh memory, not the first's."""
    out = nl.ndarray((2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.sequential_range(2):
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        t[...] = nl.load(x, mask=(i < 1))
        nl.store(out[i], value=nl.copy(t))
    return out


def test_a_tile_declared_in_a_loop_is_fresh_each_iteration() -> None:
    x = rand(128, 64)
    got = carries_a_loop_tile(x)
    assert np.array_equal(got[0], x) and np.isnan(got[1]).all()


@nki.jit
def flagged_matmul(x, m):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nl.copy(nisa.nc_matmul(nl.load(x), nl.load(m), is_moving_onezero=True)))
    return out


@nki.jit
def transpose_flagged(s, m):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nl.copy(nisa.nc_matmul(nl.load(s), nl.load(m), is_transpose=True)))
    return out


def test_a_one_zero_flag_is_checked_on_the_data() -> None:
    x = rand(128, 128)
    eye = np.identity(128, dtype=np.float32)
    assert np.allclose(flagged_matmul(x, eye), x.T)  # an identity: the flag is true
    with pytest.raises(OneZeroFlagError, match="err_false_onezero_flag"):
        flagged_matmul(x, rand(128, 128))
    # the flag halves the price: only a flag the data bears out is priced so
    flagged = estimate(_program(flagged_matmul, x, eye))
    assert flagged.engines_s["pe"] == pytest.approx(2 * 128 / TRN1_COST.pe_hz)  # fp32 x4, halved
    # is_transpose: an identity on either side
    assert np.allclose(transpose_flagged(eye, x), x) and np.allclose(transpose_flagged(x, eye), x.T)
    with pytest.raises(OneZeroFlagError):
        transpose_flagged(x, rand(128, 128))


# --- Python range loops --------------------------------------------------------------------------


@nki.jit
def python_range(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in range(x.shape[0] // 128):
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nl.exp(nl.load(x[i * 128 : (i + 1) * 128, :])))
    return out


@nki.jit
def sequential(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.sequential_range(x.shape[0] // 128):
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nl.exp(nl.load(x[i * 128 : (i + 1) * 128, :])))
    return out


def test_a_python_range_loop_is_the_compilers_sequential_loop() -> None:
    x = rand(512, 256)
    prog = _program(python_range, x)
    (loop,) = [n for n in prog.body if isinstance(n, Loop)]
    assert loop.kind == "sequential" and loop.trip == 4
    assert estimate(prog).latency_s == estimate(_program(sequential, x)).latency_s
    assert np.allclose(python_range(x), np.exp(x), rtol=1e-6)


@nki.jit
def python_range_on_host_values(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    scales = [1.0, 2.0]
    for i in range(2):
        nl.store(
            out[i * 128 : (i + 1) * 128, :],
            value=nl.multiply(nl.load(x[i * 128 : (i + 1) * 128, :]), scales[i]),
        )
    return out


def test_a_python_range_index_is_symbolic_as_in_nki() -> None:
    with pytest.raises(NKICompileError) as err:
        compile_kernel(python_range_on_host_values, [ArgSpec(shape=[256, 8])])
    assert err.value.name == "err_dynamic_control_flow_not_supported" and "static_range" in str(err.value)


# --- pricing by what the executor writes --------------------------------------------------------


@nki.jit
def broadcast_copy(x):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    wide = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    wide[...] = nl.load(x)  # a [128, 1] column written over 512 columns
    nl.store(out, value=wide)
    return out


def test_a_broadcast_is_priced_by_what_it_writes() -> None:
    x = rand(128, 1)
    assert np.array_equal(broadcast_copy(x), np.broadcast_to(x, (128, 512)))
    est = estimate(_program(broadcast_copy, x))
    copy_s = sum(est.engines_s[e] for e in ("act", "dve", "pool"))
    assert copy_s >= 512 / max(TRN1_COST.act_hz, TRN1_COST.dve_hz, TRN1_COST.pool_hz)


# --- the gate's roofline, on the emulator's own kernels -----------------------------------------


def test_the_hard_limits_are_the_published_figures() -> None:
    hard = hard_limits(TRN1, TRN1_COST)
    assert hard.peak_bw_bytes_s == TRN1.peak_bw_bytes_s == 410 * 2**30
    assert hard.peak_matmul_flops == TRN1.peak_matmul_flops  # 23.75 TFLOP/s > the model's 22.9
    assert hard.peak_vector_flops == pytest.approx(128 * (1.4e9 * 6 + 1.12e9 * 2 + 1.4e9 * 2))
    assert hard.peak_vector_flops / TRN1.peak_vector_flops == pytest.approx(6.0, rel=1e-3)


@pytest.mark.parametrize("name", sorted(_model_1_programs()))
def test_no_honest_kernel_beats_its_bytes_at_hbm_bandwidth(name: str) -> None:
    """The gate's memory roof needs no problem definition: a program's arguments read once and
    its outputs written once, at HBM bandwidth. Every emulator test kernel's estimate is slower."""
    kernel, args = _model_1_programs()[name]
    prog = _program(kernel, *[a.astype(np.float32) for a in args])
    io = sum(a.size * 4 for a in args) + sum(int(np.prod(prog.tensors[t].shape)) * 4 for t in prog.outputs)
    t_io = io / hard_limits(TRN1, TRN1_COST).peak_bw_bytes_s
    assert implausible(estimate(prog).latency_s, t_io, 1.0) is None


def _suite_kernels() -> dict[str, tuple[Any, str]]:
    """(problem, kernel source) of the 14 NKIBench-style baselines (the tests' small shapes) and
    of every point of the `nki_tune` suite's tuning spaces (`NAME = v  # tune: NAME in {...}`)."""
    import itertools
    import re
    import tempfile
    from pathlib import Path

    from neuron_helpers import nkibench14_problems
    from nkibench_fixture import write_nkibench

    import suites
    from suites.nkibench import import_nkibench

    root = Path(tempfile.mkdtemp(prefix="nkb14-gate-"))
    write_nkibench(root / "src", nkibench14_problems())
    report = import_nkibench(root / "src", root / "suite", name="nkb14")
    out = {f"nkb14/{p.name}": (p, p.baseline.sources[0].content) for p in suites.load_suite(str(report.out))}
    knob = re.compile(r"^(\w+) = \d+  # tune: \1 in \{([^}]*)\}", re.M)
    for p in suites.load_suite("nki_tune"):
        src = p.baseline.sources[0].content
        space = [(m.group(1), [int(v) for v in m.group(2).split(",")]) for m in knob.finditer(src)]
        assert space, p.name
        for values in itertools.product(*(vals for _, vals in space)):
            text = src
            for (name, _), v in zip(space, values, strict=True):
                text = re.sub(rf"^{name} = \d+", f"{name} = {v}", text, flags=re.M)
            label = ",".join(f"{name}={v}" for (name, _), v in zip(space, values, strict=True))
            out[f"nki_tune/{p.name}/{label}"] = (p, text)
    return out


SUITE_KERNELS = _suite_kernels()


@pytest.mark.parametrize("name", sorted(SUITE_KERNELS))
def test_no_honest_suite_kernel_beats_the_hard_roofline(name: str, tmp_path: Any) -> None:
    """The gate accepts every honest kernel: each NKIBench baseline and each `nki_tune` variant,
    traced and priced as the agent does, is estimated slower than what no program can beat."""
    import importlib.util

    from hardware_agents.neuron.estimate_gate import implausible_estimate
    from hardware_agents.neuron.reference import ReferenceModule
    from hardware_agents.pipeline import inputgen

    problem, src = SUITE_KERNELS[name]
    (tmp_path / "kernel.py").write_text(src)
    spec = importlib.util.spec_from_file_location("gate_kernel", tmp_path / "kernel.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    inputs = inputgen.make_inputs(problem, inputgen.input_cases(problem.definition, (0,))[0])
    args = ReferenceModule(problem).kernel_args(inputs)
    prog = compile_kernel(mod.kernel, [ArgSpec.of(a) for a in args])
    check_program(prog, [ArgSpec.of(a) for a in args])
    t = estimate(prog).latency_s
    assert implausible_estimate(problem, TRN1, TRN1_COST, t) is None
