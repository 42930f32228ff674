"""AccelOpt's NKI emulator (hardware_agents/neuron/emulator), API by API: NKI kernels written
from the NKI docs' semantics, run in-process (`simulate_kernel`) and checked against numpy;
the errors the NKI compiler raises, by their documented names; the program validation the
agent relies on; the cost model's formulas. No Neuron SDK exists here: the emulator is the
system under test, not a stand-in."""

from __future__ import annotations

import math

import ml_dtypes
import msgspec
import numpy as np
import pytest

from hardware_agents.neuron.emulator import ArgSpec, NKICompileError, NotEmulated, compile_kernel, install
from hardware_agents.neuron.emulator.analysis import analyze
from hardware_agents.neuron.emulator.cost import TRN1_COST, TRN1_COST_V1, Estimate, estimate
from hardware_agents.neuron.emulator.program import decode, encode
from hardware_agents.neuron.emulator.validate import check_program

install()
import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

RNG = np.random.default_rng(7)


def rand(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def close(got: np.ndarray, want: np.ndarray, tol: float = 2e-6) -> None:
    got64, want64 = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got64.shape == want64.shape
    assert np.linalg.norm(got64 - want64) <= tol * max(float(np.linalg.norm(want64)), 1e-30), (got64, want64)


def error_of(kernel: object, *args: np.ndarray) -> NKICompileError:
    with pytest.raises(NKICompileError) as err:
        compile_kernel(kernel, [ArgSpec.of(a) for a in args])
    return err.value


# --- nki.language ------------------------------------------------------------------------------


@nki.jit
def elementwise(x, y):
    out = nl.ndarray((12, *x.shape), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        a = nl.load(x[i * 128 : (i + 1) * 128, :])
        b = nl.load(y[i * 128 : (i + 1) * 128, :])
        pos = nl.add(nl.abs(b), 0.5)
        rows = nl.ds(i * 128, 128)
        for j, r in enumerate(
            (
                nl.add(a, b),
                nl.subtract(a, b),
                a * b,
                nl.divide(a, pos),
                nl.maximum(a, b),
                nl.exp(a),
                nl.log(pos),
                nl.sqrt(pos),
                nl.rsqrt(pos),
                nl.tanh(a),
                nl.sigmoid(a),
                nl.silu(a),
            )
        ):
            nl.store(out[j, rows, :], value=r)
    return out


def test_load_store_and_elementwise_ops() -> None:
    x, y = rand(256, 64), rand(256, 64)
    got = elementwise(x, y)
    pos = np.abs(y) + 0.5
    sig = 1 / (1 + np.exp(-x))
    for j, want in enumerate(
        (
            x + y,
            x - y,
            x * y,
            x / pos,
            np.maximum(x, y),
            np.exp(x),
            np.log(pos),
            np.sqrt(pos),
            1 / np.sqrt(pos),
            np.tanh(x),
            sig,
            x * sig,
        )
    ):
        close(got[j], want, 1e-6)


@nki.jit
def reductions(x):
    out = nl.ndarray((4, x.shape[0]), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out[0], value=nl.sum(t, axis=[1]))
    nl.store(out[1], value=nl.max(t, axis=1))
    nl.store(out[2], value=nl.mean(t, axis=[1], keepdims=True))
    nl.store(out[3], value=nisa.tensor_reduce(nl.min, data=t, axis=[1], negate=True))
    return out


def test_reductions_over_the_free_axis() -> None:
    x = rand(128, 96)
    got = reductions(x)
    close(got[0], x.sum(1))
    close(got[1], x.max(1))
    close(got[2], x.mean(1))
    close(got[3], -x.min(1))


@nki.jit
def softmax_rows(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nl.softmax(nl.load(x), axis=[1]))
    return out


def test_softmax() -> None:
    x = rand(64, 200, scale=4.0)
    e = np.exp(x - x.max(1, keepdims=True))
    close(softmax_rows(x), e / e.sum(1, keepdims=True), 1e-6)


@nki.jit
def matmuls(a, b, at):
    M, K = a.shape
    N = b.shape[1]
    out = nl.ndarray((3, M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    bt = nl.load(b)
    nl.store(out[0], value=nl.matmul(nl.load(a), bt))  # x @ y: a Tensor Engine transpose, then nc_matmul
    nl.store(out[1], value=nl.matmul(nl.load(at), bt, transpose_x=True))
    acc = nl.zeros((M, N), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // 32):  # PSUM accumulation over the contraction
        acc += nisa.nc_matmul(nl.load(at[k * 32 : (k + 1) * 32, :]), nl.load(b[k * 32 : (k + 1) * 32, :]))
    nl.store(out[2], value=nl.copy(acc))
    return out


def test_matmul_and_nc_matmul_accumulate_in_psum() -> None:
    a, b = rand(96, 128), rand(128, 320)
    got = matmuls(a, b, np.ascontiguousarray(a.T))
    for j in range(3):
        close(got[j], a @ b, 1e-6)


@nki.jit
def transposes(x):
    out = nl.ndarray((2, x.shape[1], x.shape[0]), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out[0], value=nl.transpose(t))
    nl.store(out[1], value=nisa.nc_transpose(t))  # Tensor Engine: SBUF -> PSUM, stored via a copy
    return out


def test_transposes() -> None:
    x = rand(128, 96)
    got = transposes(x)
    close(got[0], x.T, 0)
    close(got[1], x.T, 0)


@nki.jit
def isa_ops(x, s):
    P, F = x.shape
    out = nl.ndarray((9, P, F), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    v = nl.load(s)  # (P, 1): one value per partition
    nl.store(out[0], value=nisa.activation(op=nl.exp, data=t, bias=v, scale=0.5))
    nl.store(out[1], value=nisa.activation(op=nl.tanh, data=t, scale=v))
    nl.store(
        out[2],
        value=nisa.tensor_scalar(
            data=t, op0=nl.subtract, operand0=2.0, reverse0=True, op1=nl.multiply, operand1=v
        ),
    )
    nl.store(out[3], value=nisa.tensor_tensor(t, nl.exp(t), op=nl.multiply))
    nl.store(out[4], value=nisa.reciprocal(data=nl.add(nl.abs(t), 1.0)))
    nl.store(out[5], value=nisa.memset(shape=(P, F), value=3.5, dtype=nl.float32))
    nl.store(out[6], value=nisa.iota(nl.arange(P)[:, None] * F + nl.arange(F)[None, :], dtype=nl.float32))
    nl.store(out[7], value=nisa.tensor_copy(t))
    i_p, i_f = nl.mgrid[0:P, 0:F]
    nl.store(out[8], value=nisa.affine_select(i_p - i_f >= 0, t, -9.0))
    return out


def test_isa_ops() -> None:
    x, s = rand(64, 80), rand(64, 1)
    got = isa_ops(x, s)
    close(got[0], np.exp(0.5 * x + s), 1e-6)
    close(got[1], np.tanh(x * s), 1e-6)
    close(got[2], (2.0 - x) * s)
    close(got[3], x * np.exp(x), 1e-6)
    close(got[4], 1 / (np.abs(x) + 1))
    close(got[5], np.full_like(x, 3.5))
    close(got[6], np.arange(64 * 80, dtype=np.float32).reshape(64, 80))
    close(got[7], x)
    close(got[8], np.where(np.arange(64)[:, None] >= np.arange(80)[None, :], x, -9.0))


@nki.jit
def scan_and_loop_reduce(a, b):
    P, F = a.shape
    out = nl.ndarray((2, P, F), dtype=nl.float32, buffer=nl.shared_hbm)
    state = nl.zeros((P, 1), dtype=nl.float32)
    half = F // 2
    for c in nl.sequential_range(2):  # a scan in two chunks: the carried state crosses iterations
        seg = nisa.tensor_tensor_scan(
            nl.load(a[:, c * half : (c + 1) * half]),
            nl.load(b[:, c * half : (c + 1) * half]),
            initial=state,
            op0=np.multiply,
            op1=np.add,
        )
        nl.store(out[0, :, c * half : (c + 1) * half], value=seg)
        state[...] = nl.copy(seg[:, half - 1 : half])
    best = nl.ndarray((P, 1), dtype=nl.float32)
    for c in nl.affine_range(4):
        best[...] = nl.loop_reduce(
            nl.max(nl.load(b[:, c * (F // 4) : (c + 1) * (F // 4)]), axis=[1], keepdims=True),
            op=np.max,
            loop_indices=[c],
        )
    nl.store(out[1], value=best.broadcast_to((P, F)))
    return out


def test_scan_sequential_range_and_loop_reduce() -> None:
    a, b = rand(32, 64, scale=0.5), rand(32, 64)
    got = scan_and_loop_reduce(a, b)
    want = np.zeros_like(a)
    prev = np.zeros(32, np.float32)
    for i in range(64):
        prev = a[:, i] * prev + b[:, i]
        want[:, i] = prev
    close(got[0], want, 1e-6)
    close(got[1], np.broadcast_to(b.max(1, keepdims=True), b.shape))


@nki.jit
def blocks_masks_constants(x):
    M, N = x.shape
    T = (M + 127) // 128
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    buf = nl.ndarray((T, nl.par_dim(128), N), dtype=nl.float32, buffer=nl.sbuf)  # a block dimension
    eye = nl.load(nl.shared_constant(np.identity(128, dtype=np.float32)))
    for i in nl.affine_range(T):
        rows = i * 128 + nl.arange(128)[:, None]
        cols = nl.arange(N)[None, :]
        ok = rows < M  # the last tile is ragged: a mask keeps it in bounds
        buf[i, nl.arange(128)[:, None], cols] = nl.load(x[rows, cols], mask=ok)
        tt = nl.multiply(buf[i, nl.arange(128)[:, None], cols], 2.0, mask=ok)
        nl.store(out[rows, cols], value=nl.add(tt, eye[:, 0:N], mask=ok), mask=ok)
    return out


def test_block_dimensions_masks_and_shared_constants() -> None:
    x = rand(200, 64)
    want = 2 * x + np.vstack([np.eye(128, 64, dtype=np.float32), np.eye(128, 64, dtype=np.float32)])[:200]
    close(blocks_masks_constants(x), want)


@nki.jit
def static_and_python_loops(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.static_range(x.shape[0] // 64):  # unrolled: `i` is a Python int
        t = nl.load(x[i * 64 : (i + 1) * 64, :])
        nl.store(out[i * 64 : (i + 1) * 64, :], value=nl.multiply(t, float(i + 1)))
    return out


def test_static_range_unrolls() -> None:
    x = rand(192, 16)
    close(static_and_python_loops(x), x * np.repeat([1.0, 2.0, 3.0], 64)[:, None].astype(np.float32))


@nki.jit
def bf16_path(x, w):
    rounded = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    prod = nl.ndarray((x.shape[0], w.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    xb = nl.load(x, dtype=nl.bfloat16)  # the DMA casts to bfloat16 (round to nearest even)
    wb = nl.load(w, dtype=nl.bfloat16)
    nl.store(rounded, value=nl.copy(xb, dtype=nl.float32))
    nl.store(prod, value=nl.matmul(xb, wb))  # bf16 inputs, fp32 accumulation in PSUM
    return rounded, prod


def test_bf16_rounds_where_the_hardware_rounds() -> None:
    x, w = rand(64, 128), rand(128, 96)
    rounded, prod = bf16_path(x, w)
    xb = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    wb = w.astype(ml_dtypes.bfloat16).astype(np.float32)
    assert np.array_equal(rounded, xb) and not np.array_equal(rounded, x)
    close(prod, xb.astype(np.float64) @ wb.astype(np.float64), 1e-6)


# --- errors the compiler raises ------------------------------------------------------------------


@nki.jit
def too_many_partitions(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nl.exp(nl.load(x)))  # 256 rows in one tile
    return out


@nki.jit
def stationary_too_wide(x, w):
    out = nl.ndarray((256, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out[0:128, :], value=nl.copy(nisa.nc_matmul(nl.load(x), nl.load(w))))  # stationary free 256
    return out


@nki.jit
def moving_too_wide(x, w):
    out = nl.ndarray((64, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nl.copy(nisa.nc_matmul(nl.load(x), nl.load(w))))  # moving free 1024 > one PSUM bank
    return out


@nki.jit
def sbuf_overflow(x):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    big = nl.ndarray((128, 60000), dtype=nl.float32, buffer=nl.sbuf)  # 240,000 bytes per partition
    big[...] = 0.0
    nl.store(out, value=nl.copy(big[:, 0:1]))
    return out


@nki.jit
def psum_overflow(x, w):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t, m = nl.load(x), nl.load(w)
    tiles = [nisa.nc_matmul(t, m) for _ in range(9)]
    acc = nl.copy(tiles[0])
    for tl in tiles[1:]:  # nine 2 KiB PSUM tiles live at once: 18 KiB > 16 KiB per partition
        acc = nl.add(acc, tl)
    nl.store(out, value=acc)
    return out


@nki.jit
def loop_carried_write(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), dtype=nl.float32)
    for i in nl.affine_range(4):
        acc[...] = nl.add(acc, nl.load(x[i * 128 : (i + 1) * 128, :]))  # every iteration writes all of acc
    nl.store(out, value=acc)
    return out


@nki.jit
def loop_carried_sequential(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), dtype=nl.float32)
    for i in nl.sequential_range(4):  # the same write is legal in a sequential loop
        acc[...] = nl.add(acc, nl.load(x[i * 128 : (i + 1) * 128, :]))
    nl.store(out, value=acc)
    return out


@nki.jit
def out_of_bounds(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        nl.store(out, value=nl.load(x[i * 100 : i * 100 + 128, :]))
    return out


@nki.jit
def writes_its_input(x):
    nl.store(x, value=nl.exp(nl.load(x)))
    return x


@nki.jit
def branches_on_data(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    if t:  # tile values do not exist while the kernel is traced
        nl.store(out, value=t)
    return out


@nki.jit
def tile_out_of_scope(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), dtype=nl.float32)
    for i in nl.sequential_range(2):
        acc = nl.add(acc, nl.load(x[i * 128 : (i + 1) * 128, :]))  # rebinds to a tile of the loop body
    nl.store(out, value=acc)
    return out


@nki.jit
def mixes_indexing(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(x[nl.arange(128)[:, None], 0:64]))
    return out


@nki.jit
def not_emulated(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nl.gather_flattened(nl.load(x), nl.load(x)))
    return out


@pytest.mark.parametrize(
    ("kernel", "shapes", "name", "text"),
    [
        (
            too_many_partitions,
            [(256, 64)],
            "err_num_partition_exceed_arch_limit",
            "exceed architecture limitation of 128",
        ),
        (stationary_too_wide, [(128, 256), (128, 64)], "err_size_of_dimension_exceed_arch_limit", "of 128."),
        (moving_too_wide, [(128, 64), (128, 1024)], "err_size_of_dimension_exceed_arch_limit", "of 512."),
        (sbuf_overflow, [(128, 64)], "err_out_of_memory", "SBUF overflow"),
        (psum_overflow, [(128, 128), (128, 512)], "err_out_of_memory", "PSUM overflow"),
        (loop_carried_write, [(512, 64)], "err_unexpected_output_dependencies", "nl.sequential_range"),
        (out_of_bounds, [(200, 64)], "err_tensor_access_out_of_bound", "exceed dimension size of 200"),
        (
            writes_its_input,
            [(128, 64)],
            "err_cannot_update_immutable_parameter",
            "Cannot update immutable parameter",
        ),
        (branches_on_data, [(128, 64)], "err_dynamic_control_flow_not_supported", "tensor value"),
        (
            tile_out_of_scope,
            [(256, 64)],
            "err_local_variable_used_out_of_scope",
            "outside of its parent scope",
        ),
        (
            mixes_indexing,
            [(128, 64)],
            "err_unsupported_mixing_basic_advanced_tensor_indexing",
            "Mixing basic",
        ),
    ],
)
def test_the_compiler_rejects_it_with_the_nki_error(
    kernel: object, shapes: list[tuple[int, ...]], name: str, text: str
) -> None:
    err = error_of(kernel, *(rand(*s) for s in shapes))
    assert err.name == name, str(err)
    assert text in str(err) and name in str(err)


def test_legal_variants_of_the_rejected_kernels_run() -> None:
    x = rand(512, 64)
    close(loop_carried_sequential(x), x.reshape(4, 128, 64).sum(0), 1e-6)


def test_an_api_that_is_not_emulated_is_named() -> None:
    with pytest.raises(NotEmulated, match=r"nki\.language\.gather_flattened is not emulated"):
        compile_kernel(not_emulated, [ArgSpec.of(rand(128, 64))])


# --- the compiled program, its validation and its price ---------------------------------------------


def _program(kernel: object, *args: np.ndarray):
    return compile_kernel(kernel, [ArgSpec.of(a) for a in args])


def test_programs_round_trip_and_forged_ones_are_rejected() -> None:
    prog = _program(elementwise, rand(256, 64), rand(256, 64))
    same = decode(encode(prog))
    check_program(same)
    assert same == prog
    # a program from a tampered compiler: one instruction now streams 256 partitions
    raw = msgspec.to_builtins(prog)
    for node in raw["body"]:
        if node[0] == "l":  # the loop over row tiles
            instr = next(n for n in node[4] if n[0] == "i")
            instr[3][3] = [256, 64]  # the load's destination tile
            break
    forged = msgspec.convert(raw, type(prog))
    with pytest.raises(NKICompileError):
        check_program(forged)


def test_cost_model_formulas() -> None:
    """One nc_matmul of fp32 128x128 @ 128x512: 4 * max(min(64, 128), 512) Tensor Engine cycles
    at 2.8 GHz (NKI ISA cost table); the loads are contiguous 2 KiB rows per partition."""

    @nki.jit
    def one_matmul(at, b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.copy(nisa.nc_matmul(nl.load(at), nl.load(b))))
        return out

    est = estimate(_program(one_matmul, rand(128, 128), rand(128, 512)))
    assert est.engines_s["pe"] == pytest.approx(4 * 512 / TRN1_COST.pe_hz)
    # copy PSUM -> SBUF: 512 elements per partition on the Scalar or Vector Engine
    assert max(est.engines_s["act"], est.engines_s["dve"]) == pytest.approx(512 / TRN1_COST.act_hz)
    nbytes = 4 * (128 * 128 + 2 * 128 * 512)
    descriptors = 128 + 128 + 128
    # three DMAs over all 16 engines (8 partitions each), each engine paying one transfer's fixed time
    assert est.engines_s["dma"] == pytest.approx(
        (nbytes + descriptors * TRN1_COST.dma_descriptor_bytes) / (16 * TRN1_COST.dma_engine_bw)
        + 3 * TRN1_COST.dma_transfer_s
    )
    assert est.resource_s == pytest.approx(max(est.engines_s.values()))
    # the loads, the matmul, the copy and the store wait for each other: the chain sets the estimate
    assert est.critical_path_s > est.resource_s and est.bound == "dependencies"
    assert est.latency_s == pytest.approx(est.critical_path_s + 2 * TRN1_COST.dma_latency_s)


def test_cost_model_prefers_large_tiles_and_fewer_instructions() -> None:
    def silu(tile: int):
        @nki.jit
        def k(x):
            out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
            for i in nl.affine_range(x.shape[0] // 128):
                for j in nl.affine_range(x.shape[1] // tile):
                    t = nl.load(x[i * 128 : (i + 1) * 128, j * tile : (j + 1) * tile])
                    nl.store(
                        out[i * 128 : (i + 1) * 128, j * tile : (j + 1) * tile],
                        value=nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0)),
                    )
            return out

        return k

    x = rand(256, 2048)
    small, large = (estimate(_program(silu(t), x)).latency_s for t in (64, 1024))
    assert large < small / 2  # 64-column tiles: 256-byte DMA rows and 64-cycle instruction minimums


def test_analysis_frees_dead_blocks() -> None:
    prog = _program(blocks_masks_constants, rand(300, 64))
    an = analyze(prog)
    # at the peak: the identity (128 fp32 per partition) and one iteration's two temporaries (64
    # fp32 each: `tt` and the sum it feeds); that iteration's block of `buf` died with `tt`'s
    # multiply, and each iteration's temporaries are fresh tiles, dead when the iteration is done
    assert an.peak_sbuf == 128 * 4 + 2 * 64 * 4
    assert math.isfinite(estimate(prog, analysis=an).latency_s)


# --- cost model 2: dependences, latencies, buffers --------------------------------------------
# Each expected figure below is written out from the published constants (docs/neuron.md, "The
# trn1 cost model"), not from the model's own helpers.

S = TRN1_COST
P, F = 128, 512  # one fp32 tile: 2 KiB per partition


def dma_lat(p: int = P, f: int = F) -> float:
    """A contiguous [p, f] fp32 load or store: one descriptor per partition row, ceil(p / 8)
    engines in parallel, one transfer's fixed time."""
    payload = p * f * 4 + p * S.dma_descriptor_bytes
    return S.dma_transfer_s + payload / (min(16, -(-p // 8)) * S.dma_engine_bw)


def dma_occ(p: int = P, f: int = F) -> float:
    engines = min(16, -(-p // 8))
    return (p * f * 4 + p * S.dma_descriptor_bytes) / (16 * S.dma_engine_bw) + engines * S.dma_transfer_s / 16


EXP_OCC = max(64, F) / S.act_hz  # activation: max(MIN_II, N) Scalar cycles
EXP_LAT = EXP_OCC + (S.dependent_cycles + S.access_cycles) / S.act_hz
MUL_OCC = max(64, 2 * F) / S.dve_hz  # tensor_tensor, two SBUF inputs: 2N Vector cycles
MUL_LAT = MUL_OCC + (S.dependent_cycles + S.access_cycles) / S.dve_hz


@nki.jit
def chain_two_engines(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    e = nisa.activation(op=nl.exp, data=t)  # Scalar Engine
    nl.store(out, value=nisa.tensor_tensor(e, e, op=nl.multiply))  # Vector Engine, waits for e
    return out


@nki.jit
def independent_two_engines(x):
    out = nl.ndarray((2, *x.shape), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out[0], value=nisa.activation(op=nl.exp, data=t))  # Scalar Engine
    nl.store(out[1], value=nisa.tensor_tensor(t, t, op=nl.multiply))  # Vector Engine, independent
    return out


def test_a_dependent_chain_costs_the_sum_and_independent_work_the_max() -> None:
    x = rand(P, F)
    chain = estimate(_program(chain_two_engines, x))
    assert chain.critical_path_s == pytest.approx(dma_lat() + EXP_LAT + MUL_LAT + dma_lat())
    both = estimate(_program(independent_two_engines, x))
    # the exp and the product overlap on their two engines; their two stores share the DMA queues'
    # bandwidth: the product's store, ready before the exp's has finished, takes what is left after it
    assert dma_lat() + EXP_LAT + dma_occ() > dma_lat() + MUL_LAT
    assert both.critical_path_s == pytest.approx(dma_lat() + EXP_LAT + dma_occ() + dma_lat())
    assert both.critical_path_s < chain.critical_path_s
    for est in (chain, both):  # neither is engine-bound: the chain sets the estimate
        assert est.bound == "dependencies"
        assert est.latency_s == pytest.approx(est.critical_path_s + est.fixed_s)
        assert (
            est.dependency_s == pytest.approx(est.latency_s - est.resource_s - est.fixed_s)
            and est.dependency_s > 0
        )


@nki.jit
def carried_product(x):
    out = nl.ndarray(x.shape[1:], dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray(x.shape[1:], dtype=nl.float32, buffer=nl.sbuf)
    acc[...] = nl.load(x[0])
    for i in nl.sequential_range(x.shape[0]):
        t = nl.load(x[i])
        e = nisa.activation(op=nl.exp, data=acc)  # reads the previous iteration's acc
        acc[...] = nisa.tensor_tensor(e, t, op=nl.multiply)
    nl.store(out, value=acc)
    return out


@nki.jit
def uncarried_product(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray((x.shape[0], nl.par_dim(x.shape[1]), x.shape[2]), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(x.shape[0]):  # the same instructions, each iteration on its own block
        t = nl.load(x[i])
        res[i] = nisa.tensor_tensor(nisa.activation(op=nl.exp, data=t), t, op=nl.multiply)
    for i in nl.affine_range(x.shape[0]):
        nl.store(out[i], value=res[i])
    return out


def test_a_sequential_range_carried_dependence_serializes() -> None:
    n = 6
    x = rand(n, P, F, scale=0.01)
    est = estimate(_program(carried_product, x))
    (loop,) = est.loops
    # exp(acc) of iteration i+1 waits for acc = e * t of iteration i: nothing of the chain overlaps
    assert loop.limit == "carried dependence" and loop.ii_s == pytest.approx(EXP_LAT + MUL_LAT)
    # one iteration: the product waits for the load (longer than the exp)
    assert loop.iteration_s == pytest.approx(max(dma_lat(), EXP_LAT) + MUL_LAT)
    assert loop.total_s == pytest.approx(loop.iteration_s + (n - 1) * (EXP_LAT + MUL_LAT))
    # the first load, the loop, the store of acc
    assert est.critical_path_s == pytest.approx(dma_lat() + loop.total_s + dma_lat())
    assert loop.ii_s > loop.engines_ii_s
    # without the carried value iterations overlap as far as their engines allow: t is fresh memory
    # each iteration, and the on-chip memory holds many iterations' tiles
    free = estimate(_program(uncarried_product, x)).loops[0]
    assert free.limit == "engines" and free.ii_s == pytest.approx(max(dma_occ(), EXP_OCC, MUL_OCC))
    assert free.ii_s < loop.ii_s


@nki.jit
def long_lived_tile(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0]):
        t = nl.load(x[i])  # allocated in the loop: NKI rotates a few physical buffers
        e1 = nisa.activation(op=nl.exp, data=t)
        r1 = nisa.tensor_tensor(e1, e1, op=nl.multiply)
        e2 = nisa.activation(op=nl.exp, data=r1)
        nl.store(out[i], value=nisa.tensor_tensor(e2, t, op=nl.multiply))  # t is read again at the end
    return out


@pytest.mark.parametrize("buffers", [1, 2, 4, 0])
def test_an_affine_range_overlaps_iterations_up_to_the_buffer_count(buffers: int) -> None:
    """`loop_buffers` caps the physical buffers of a tile allocated in a loop; 0 (the default)
    lets the on-chip memory decide, as it does for the loop's unrolled copy."""
    n = 8
    prog = _program(long_lived_tile, rand(n, P, F, scale=0.01))
    spec = msgspec.structs.replace(TRN1_COST, loop_buffers=buffers)
    (loop,) = estimate(prog, spec=spec).loops
    # t lives from its load to the last product: iteration i + buffers reuses its buffer after that
    span = dma_lat() + EXP_LAT + MUL_LAT + EXP_LAT + MUL_LAT
    engines = max(2 * dma_occ(), 2 * MUL_OCC)  # per iteration: DMA (load + store), Vector (2 products)
    assert loop.iteration_s == pytest.approx(span + dma_lat())
    assert loop.engines_ii_s == pytest.approx(engines)
    # one buffer: the next load waits for the last product, then for the DMA share of this
    # iteration's store, which became ready at the same time
    serial = span + dma_occ()
    if buffers == 1:
        assert loop.limit == "buffers" and loop.ii_s == pytest.approx(serial)
    elif buffers == 2:  # pairs of iterations overlap
        assert loop.limit == "buffers" and max(engines, serial / 2) <= loop.ii_s < serial
    else:  # four buffers, or the 176 usable KiB of SBUF (t is 2 KiB): the Vector Engine sets the pace
        assert loop.limit == "engines" and loop.ii_s == pytest.approx(engines)


@nki.jit
def producer_consumer_loops(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    mid = nl.ndarray((x.shape[0], nl.par_dim(x.shape[1]), x.shape[2]), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(x.shape[0]):  # writes mid part by part
        mid[i] = nisa.activation(op=nl.exp, data=nl.load(x[i]))
    for i in nl.affine_range(x.shape[0]):  # reads it part by part: each part waits for its own producer
        nl.store(out[i], value=nisa.tensor_tensor(mid[i], mid[i], op=nl.multiply))
    return out


def test_a_loop_consuming_another_part_by_part_overlaps_it() -> None:
    est = estimate(_program(producer_consumer_loops, rand(8, P, F, scale=0.01)))
    first, second = est.loops
    # the consumer cannot start before the first part exists, nor end before its last part's product
    start = max(EXP_LAT, first.total_s - second.total_s + MUL_LAT)
    assert est.critical_path_s == pytest.approx(start + second.total_s)
    assert est.critical_path_s < first.total_s + second.total_s  # not one loop after the other


@nki.jit
def big_iterations(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0]):
        t = nl.load(x[i])  # 4 x f bytes per partition
        nl.store(out[i], value=nisa.activation(op=nl.exp, data=t))  # as many again while t is live
    return out


def test_iterations_overlap_only_as_far_as_the_on_chip_memory_holds_them() -> None:
    # t and exp(t) take 80 KiB per partition each: the next iteration's load fits (176 usable KiB)
    # only once this one's t is released by its exp, and then waits for the DMA share of this
    # iteration's store, ready at the same time: one iteration at a time
    f = 20480
    (loop,) = estimate(_program(big_iterations, rand(4, P, f, scale=0.01))).loops
    assert loop.in_flight == 1 and loop.limit == "on-chip memory"
    assert loop.ii_s == pytest.approx(loop.iteration_s) and loop.ii_s > loop.engines_ii_s
    (half,) = estimate(_program(big_iterations, rand(4, P, f // 2, scale=0.01))).loops
    assert half.limit == "engines" and half.ii_s == pytest.approx(half.engines_ii_s)  # two fit


@nki.jit
def two_overflowing_phases(x, y):
    out = nl.ndarray((2, 128, x.shape[2]), dtype=nl.float32, buffer=nl.shared_hbm)
    for k, src in enumerate((x, y)):  # two phases, each holding 4 x 64 KiB per partition at once
        buf = nl.ndarray((4, nl.par_dim(128), src.shape[2]), dtype=nl.float32, buffer=nl.sbuf)
        for b in nl.static_range(4):
            buf[b] = nl.load(src[b])
        acc = nl.add(nl.add(buf[0], buf[1]), nl.add(buf[2], buf[3]))
        nl.store(out[k], value=acc)
    return out


def test_spill_is_paid_by_every_stretch_that_overflows_the_sbuf() -> None:
    x = np.zeros((4, 128, 16384), np.float32)
    prog = _program(two_overflowing_phases, x, x)
    an = analyze(prog)
    once = estimate(prog, analysis=an, spec=TRN1_COST_V1)
    twice = estimate(prog, analysis=an)
    excess = an.peak_sbuf - 192 * 1024
    assert excess > 0
    assert once.spill_bytes == 2 * excess * 128  # model 1: the peak, saved and reloaded once
    assert twice.spill_bytes == 2 * once.spill_bytes  # each phase overflows by as much


# model 1's estimates of the kernels of this file (commit af3a6c6), to show model 2 only adds time
MODEL_1_S = {
    "elementwise": 8.924705882352942e-06,
    "reductions": 3.470588235294118e-06,
    "softmax_rows": 3.3142857142857146e-06,
    "matmuls": 5.5929411764705875e-06,
    "transposes": 3.315294117647059e-06,
    "isa_ops": 3.899411764705882e-06,
    "scan_and_loop_reduce": 3.171428571428572e-06,
    "blocks_masks_constants": 3.804705882352941e-06,
    "static_and_python_loops": 3.108235294117647e-06,
    "bf16_path": 3.296470588235294e-06,
}


def _model_1_programs():
    z = np.zeros
    return {
        "elementwise": (elementwise, [z((256, 64)), z((256, 64))]),
        "reductions": (reductions, [z((128, 96))]),
        "softmax_rows": (softmax_rows, [z((64, 200))]),
        "matmuls": (matmuls, [z((96, 128)), z((128, 320)), z((128, 96))]),
        "transposes": (transposes, [z((128, 96))]),
        "isa_ops": (isa_ops, [z((64, 80)), z((64, 1))]),
        "scan_and_loop_reduce": (scan_and_loop_reduce, [z((32, 64)), z((32, 64))]),
        "blocks_masks_constants": (blocks_masks_constants, [z((200, 64))]),
        "static_and_python_loops": (static_and_python_loops, [z((192, 16))]),
        "bf16_path": (bf16_path, [z((64, 128)), z((128, 96))]),
    }


def test_model_2_only_adds_time_to_model_1() -> None:
    for name, (kernel, args) in _model_1_programs().items():
        prog = _program(kernel, *[a.astype(np.float32) for a in args])
        an = analyze(prog)
        old = estimate(prog, analysis=an, spec=TRN1_COST_V1)
        assert old.latency_s == pytest.approx(MODEL_1_S[name], rel=1e-12), name  # model 1, reproduced
        new = estimate(prog, analysis=an)
        assert new.latency_s >= old.latency_s, name
        assert new.resource_s >= old.resource_s and new.latency_s >= new.resource_s + new.fixed_s, name
        assert 0 < new.overlap <= 5


def test_model_1_estimates_still_decode() -> None:
    old = (
        b'{"model":"accelopt-trn1-cost-model/1","device":"trn1","latency_s":0.001,"engines_s":{"pe":0.001},'
        b'"bound":"pe","instructions":3,"hbm_bytes":100.0}'
    )
    est = msgspec.json.decode(old, type=Estimate)
    assert est.latency_s == 0.001 and est.critical_path_s == 0.0 and est.loops == []
    new = estimate(_program(carried_product, rand(3, P, F, scale=0.01)))
    assert msgspec.json.decode(msgspec.json.encode(new), type=Estimate) == new
