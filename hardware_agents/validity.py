"""The validity layer every hardware agent uses (the field's known reward hacks: hardware_agents/README.md).

- Inputs: fresh and deterministic per (seed, input), from the definition's `x_input_init`
  expressions (default `normal(0, 1)`), plus adversarial cases: `x_adversarial` or, by
  default, every float input scaled by 1000 ("large": breaks a softmax without max
  subtraction, an unguarded exp, sums of squares in low precision).
- References: the numpy reference (`x_numpy_reference`, a `run(...)` with the axis values
  as globals) evaluated in float64, so the bar is the exact result, not another fp32 sum.
- Outputs: allocated by the harness and poisoned with NaN before every correctness call.
- Comparison: shape/dtype, non-finite values, relative L2 with float64 norms (NKIBench's
  rule) and an elementwise allclose whose atol scales with the reference's RMS when that
  is above 1 (so large-magnitude cases are judged relative to their size), in one fused
  pass per output. An agent may pass a float32 floor (`Fp32Floor`, `fp32_floor`): the bar
  widened by what the reference formula itself misses by in float32 on the same inputs,
  where float32 cannot meet the tolerance (the Neuron agent does, for an output that
  missed it; the Triton agent, for an adversarial case that missed it, with the floor its
  reference child measures: `hardware_agents/triton/reference.py`, `fp32_floor_of`).

Init expressions are a tiny whitelisted language: numbers, `normal(loc, scale)`,
`uniform(low, high)`, `randint(low, high)`, `abs(x)`, `exp(x)`, `+ - * /` and parentheses.
"""

from __future__ import annotations

import ast
import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple, TypeVar

import msgspec
import numpy as np

from accelopt.problem import Definition, Problem, ScalarInput, Tolerance
from accelopt.profile import SeedCheck

DEFAULT_INIT = "normal(0, 1)"
LARGE_SCALE = 1000.0
# Seeds of the adversarial cases are offset from the first correctness seed, so a re-verify
# with fresh seeds also draws fresh adversarial inputs.
_ADVERSARIAL_SEED_BASE = 1_000_003

_NP_DTYPES: dict[str, Any] = {
    "float32": np.float32,
    "float16": np.float16,
    "int64": np.int64,
    "int32": np.int32,
    "int16": np.int16,
    "int8": np.int8,
    "bool": np.bool_,
}


class InputCase(msgspec.Struct, frozen=True, kw_only=True):
    """One input set: a correctness seed or a named adversarial case."""

    name: str
    seed: int
    adversarial: bool = False
    inits: dict[str, str] = {}  # input name -> init expression (overrides x_input_init)


def numpy_dtype(dtype: str) -> Any:
    try:
        return _NP_DTYPES[dtype]
    except KeyError:
        raise NotImplementedError(f"dtype {dtype} has no numpy equivalent in the validity layer") from None


# --- input generation ------------------------------------------------------------------------


def _parse_init(expr: str) -> ast.Expression:
    tree = ast.parse(expr, mode="eval")
    for node in ast.walk(tree):
        ok = isinstance(
            node,
            ast.Expression
            | ast.BinOp
            | ast.UnaryOp
            | ast.Load
            | ast.USub
            | ast.UAdd
            | ast.Add
            | ast.Sub
            | ast.Mult
            | ast.Div,
        )
        ok = ok or (isinstance(node, ast.Constant) and type(node.value) in (int, float))
        ok = ok or (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _INIT_FUNCS
            and not node.keywords
        )
        ok = ok or (isinstance(node, ast.Name) and node.id in _INIT_FUNCS)
        if not ok:
            raise ValueError(f"init expression {expr!r}: {type(node).__name__} is not allowed")
    return tree


_INIT_FUNCS = {"normal", "uniform", "randint", "abs", "exp"}


def generate(expr: str, shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Evaluate an init expression into an array of `shape` and `dtype`."""
    tree = _parse_init(expr)
    size = math.prod(shape)
    # Draw in float32 for float32 tensors (twice as fast, and what the kernel sees anyway).
    work = np.float32 if dtype == "float32" else np.float64

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return work(node.value)
        if isinstance(node, ast.UnaryOp):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            op = type(node.op)
            return a + b if op is ast.Add else a - b if op is ast.Sub else a * b if op is ast.Mult else a / b
        if isinstance(node, ast.Call):
            fn = node.func.id  # type: ignore[attr-defined]
            args = [ev(a) for a in node.args]
            if fn == "normal":
                loc, scale = (args + [0.0, 1.0][len(args) :])[:2]
                x = rng.standard_normal(size, dtype=work)
                x *= work(scale)
                x += work(loc)
                return x
            if fn == "uniform":
                lo, hi = (args + [0.0, 1.0][len(args) :])[:2]
                x = rng.random(size, dtype=work)
                x *= work(hi - lo)
                x += work(lo)
                return x
            if fn == "randint":
                lo, hi = args[0], args[1]
                return rng.integers(int(lo), int(hi), size).astype(np.float64)
            if fn == "abs":
                return np.abs(args[0])
            if fn == "exp":
                return np.exp(args[0])
        raise ValueError(f"init expression {expr!r}: cannot evaluate {type(node).__name__}")

    with np.errstate(over="ignore"):
        value = ev(tree)
    arr = np.asarray(value)
    if arr.shape != (size,):
        arr = np.broadcast_to(arr, (size,))
    return np.ascontiguousarray(arr, dtype=numpy_dtype(dtype)).reshape(shape)


def input_cases(definition: Definition, seeds: Sequence[int]) -> list[InputCase]:
    """The correctness seeds, then the adversarial cases."""
    cases = [InputCase(name=f"seed{s}", seed=int(s)) for s in seeds]
    base = _ADVERSARIAL_SEED_BASE + (int(seeds[0]) if seeds else 0)
    for i, (name, inits) in enumerate(adversarial_cases(definition).items()):
        cases.append(InputCase(name=name, seed=base + i, adversarial=True, inits=inits))
    return cases


def adversarial_cases(definition: Definition) -> dict[str, dict[str, str]]:
    if definition.x_adversarial is not None:
        return definition.x_adversarial
    large = {
        name: f"{LARGE_SCALE:g} * ({definition.x_input_init.get(name, DEFAULT_INIT)})"
        for name, spec in definition.inputs.items()
        if spec.shape is not None and spec.dtype.startswith(("float", "bfloat"))
    }
    return {"large": large} if large else {}


def make_inputs(problem: Problem, case: InputCase) -> dict[str, Any]:
    """Fresh inputs for one case, in the definition's order (scalars from the workload)."""
    d = problem.definition
    axes = problem.axis_values()
    out: dict[str, Any] = {}
    for i, (name, spec) in enumerate(d.inputs.items()):
        if spec.shape is None:
            src = problem.workload.inputs.get(name)
            if not isinstance(src, ScalarInput):
                raise ValueError(
                    f"{problem.name}: scalar input {name!r} needs a scalar value in the workload"
                )
            out[name] = src.value
            continue
        expr = case.inits.get(name) or d.x_input_init.get(name, DEFAULT_INIT)
        rng = np.random.default_rng([case.seed, i])
        out[name] = generate(expr, d.shape_of(name, axes) or (), spec.dtype, rng)
    return out


# --- references ------------------------------------------------------------------------------


def numpy_reference(problem: Problem) -> Callable[..., Any]:
    """The definition's numpy `run`, with numpy as `np` and the axis values as globals.

    x_numpy_reference is part of the problem definition (trusted like the configuration),
    and it runs in the agent process, never inside the kernel sandbox.
    """
    src = problem.definition.x_numpy_reference
    if not src:
        raise ValueError(f"{problem.name}: definition has no x_numpy_reference")
    ns: dict[str, Any] = {"np": np, "numpy": np, "math": math, **problem.axis_values()}
    exec(compile(src, f"<x_numpy_reference of {problem.name}>", "exec"), ns)
    return ns["run"]


def reference_outputs(
    problem: Problem,
    inputs: dict[str, Any],
    *,
    precision: Any = np.float64,
    shapes: dict[str, tuple[int, ...] | None] | None = None,
) -> dict[str, np.ndarray]:
    """Run the numpy reference on `inputs` upcast to `precision`; outputs in definition order,
    each of the definition's shape (`shapes`: of these, for inputs that are a slice of the
    problem's, hardware_agents/neuron/slices.py)."""
    run = numpy_reference(problem)
    args = [
        np.asarray(v, dtype=precision) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v
        for v in inputs.values()
    ]
    with np.errstate(all="ignore"):
        result = run(*args)
    names = list(problem.definition.outputs)
    values = list(result) if isinstance(result, tuple | list) else [result]
    if len(values) != len(names):
        raise ValueError(
            f"{problem.name}: reference returned {len(values)} outputs, definition has {len(names)}"
        )
    shapes = problem.output_shapes() if shapes is None else shapes
    out: dict[str, np.ndarray] = {}
    for name, v in zip(names, values, strict=True):
        arr = np.asarray(v)
        if shapes[name] is not None and tuple(arr.shape) != shapes[name]:
            raise ValueError(
                f"{problem.name}: reference output {name} has shape {arr.shape}, "
                f"definition says {shapes[name]}"
            )
        out[name] = arr
    return out


# --- output buffers and mutation -------------------------------------------------------------


def aligned_empty(shape: Sequence[int], dtype: Any, align: int = 64) -> np.ndarray:
    """An uninitialised C-contiguous array whose data pointer is `align`-byte aligned."""
    dt = np.dtype(dtype)
    n = math.prod(shape)
    raw = np.empty(n * dt.itemsize + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off : off + n * dt.itemsize].view(dt).reshape(tuple(shape))


def poison(arr: np.ndarray) -> np.ndarray:
    """Fill with NaN (floats) or an unlikely sentinel (integers); returns the array."""
    if arr.dtype.kind == "f":
        arr.fill(np.nan)
    elif arr.dtype.kind in "iu":
        arr.fill(np.iinfo(arr.dtype).min)
    else:
        arr.fill(True)
    return arr


def alloc_outputs(problem: Problem, align: int = 64) -> dict[str, np.ndarray]:
    """Harness-owned, poisoned output buffers in definition order."""
    shapes = problem.output_shapes()
    return {
        name: poison(aligned_empty(shapes[name] or (), numpy_dtype(spec.dtype), align))
        for name, spec in problem.definition.outputs.items()
    }


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Bitwise equality (NaN-safe), for mutation checks."""
    return (
        a.shape == b.shape
        and a.dtype == b.dtype
        and np.array_equal(np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8))
    )


# --- comparison ------------------------------------------------------------------------------


def tolerance_of(definition: Definition) -> Tolerance:
    return definition.x_tolerance or Tolerance()


def _fmt(x: float) -> str:
    return f"{x:.3g}"


T = TypeVar("T")

# Comparisons run in chunks that stay in the core's cache (16 K elements: four 128 KiB
# buffers), into buffers allocated once: several passes over a large output are several times
# faster so, and no pass allocates (fresh pages cost a fault each). A large output (from 64
# chunks) may also be spread over threads, one span of whole chunks each: numpy releases the
# GIL in its loops, and a GPU host's idle cores judge a production-size output (33M elements)
# in a fraction of a second. Where the other cores are busy (the Neuron agent's execute
# children run beside its judge) a caller passes `threads=1`: two threads taking turns at the
# GIL for every short numpy call, with no core free to wake on, were ten times slower than one
# (measured on a 2-core machine).
_CHUNK = 1 << 14
COMPARE_THREADS = max(1, min(8, (os.cpu_count() or 1)))
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _spans(n: int, threads: int) -> list[tuple[int, int]]:
    """[lo, hi) spans of whole chunks, one per thread (a single span for small arrays)."""
    if n < 64 * _CHUNK or threads <= 1:
        return [(0, n)]
    per = -(-n // threads // _CHUNK) * _CHUNK
    return [(lo, min(n, lo + per)) for lo in range(0, n, per)]


def _map_spans(fn: Callable[[int, int], T], n: int, threads: int | None) -> list[T]:
    """fn over the spans of n elements, on up to `threads` threads (None: COMPARE_THREADS)."""
    global _pool
    spans = _spans(n, min(COMPARE_THREADS, COMPARE_THREADS if threads is None else threads))
    if len(spans) == 1:
        return [fn(*spans[0])]
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(COMPARE_THREADS, thread_name_prefix="accelopt-compare")
    return list(_pool.map(lambda sp: fn(*sp), spans))


class RefStats:
    """Per-reference quantities reused across many comparisons against the same reference
    (`bound=False`: not the elementwise bound array, which a comparison then computes chunk
    by chunk; for a reference compared once, that is one pass less and no copy of it;
    `threads`: see `_map_spans`)."""

    def __init__(
        self, ref: np.ndarray, tol: Tolerance, *, bound: bool = True, threads: int | None = None
    ) -> None:
        r = np.asarray(ref)
        flat = r.reshape(-1)

        def squares(lo: int, hi: int) -> float | None:
            """The span's sum of squares in float64 (None: it holds a non-finite value), in
            chunks: no float64 copy of the reference."""
            sq = 0.0
            for a in range(lo, hi, 16 * _CHUNK):
                c = flat[a : min(hi, a + 16 * _CHUNK)].astype(np.float64)
                if not np.all(np.isfinite(c)):
                    return None
                sq += float(np.einsum("i,i->", c, c))  # (not BLAS's dot: see _compare_span)
            return sq

        parts = _map_spans(squares, flat.size, threads)
        self.finite = all(p is not None for p in parts)
        if self.finite:
            self.norm = math.sqrt(sum(p for p in parts if p is not None))
            size = flat.size
        else:
            r64 = r.astype(np.float64)
            fin = r64[np.isfinite(r64)]
            self.norm = float(np.linalg.norm(fin))
            size = fin.size
        self.rms = self.norm / math.sqrt(size) if size else 0.0
        self.atol = tol.atol * max(1.0, self.rms)
        # elementwise allclose bound, kept in float32 to halve its memory
        self.bound = self._bound(flat, tol, threads).reshape(r.shape) if bound else None

    def _bound(self, flat: np.ndarray, tol: Tolerance, threads: int | None) -> np.ndarray:
        out = np.empty(flat.size, dtype=np.float32)

        def fill(lo: int, hi: int) -> None:
            for a in range(lo, hi, _CHUNK):
                z = min(hi, a + _CHUNK)
                out[a:z] = self.atol + tol.rtol * np.abs(flat[a:z].astype(np.float64))

        _map_spans(fill, flat.size, threads)
        return out

    @classmethod
    def of_norm(cls, norm: float, rms: float, finite: bool, tol: Tolerance) -> RefStats:
        """The stats of a reference known by its norm and RMS (no bound array)."""
        st = cls.__new__(cls)
        st.finite, st.norm, st.rms = finite, norm, rms
        st.atol = tol.atol * max(1.0, rms)
        st.bound = None
        return st


# How many times the error of the reference formula's own float32 evaluation a kernel may make
# (see `Fp32Floor`).
FP32_FLOOR_FACTOR = 4.0


class Fp32Floor(msgspec.Struct, kw_only=True):
    """What float32 arithmetic cannot resolve on one case's inputs: the error, against the
    float64 reference, of the reference formula itself evaluated in float32 (the larger of
    two evaluations: on the inputs, and on the inputs moved by one unit in the last place in
    random directions), per row of the output (`rows`: the largest error along the last
    axis, one value per row) and overall (`rel_l2`).

    Why: the tolerance is a bar for float32 kernels, and float32 accumulation error grows with
    the reduction length and with the magnitude of the summands, not of the result: a sum
    of n products has error up to ~n u sum|a_i b_i| (u = 2^-24; typically sqrt(n) u sum|a_i b_i|),
    far above `rtol * |result|` where the summands cancel, and a nonlinear stage amplifies it
    further (a softmax over scores of 1e6 whose top two differ by a few units of the scores'
    last place has no float32 answer closer than a few units of the output). The
    adversarial `large` case puts kernels exactly there: NKIBench's own gqa_full baseline
    misses 85 of 8.4 M elements (one query whose two best keys are 13 ulps apart: ten honest
    float32 summation orders give 4.4 to 76 there, numpy's float32 evaluation 36) and mamba
    one of 1.8 M (a 7168-step scan: every float32 evaluation carries the rounding of its
    decay factors; the kernel is within 7 % of numpy's float32 result everywhere).

    Measuring the floor by evaluating the reference in float32 covers every formula without
    knowing its reduction lengths. Where the error is random rather than systematic (the
    tie above: which summation order lands where is chance), one evaluation's error at one
    element says little about another's: two evaluations, and the largest error of the
    element's row (the elements that share every index but the last: in the 14 NKIBench
    outputs, one row of features computed from the same row of inputs) make the scale
    robust. A kernel may miss by FP32_FLOOR_FACTOR times the floor (4: the ten orders above
    spread over 2.1x of numpy's error). Where float32 is accurate (every seed case of the 14
    NKIBench problems) the floor is ~u|ref| and the bar is the tolerance's; reduced precision
    (bf16, tf32: 2^-8, 2^-11 relative) stays hundreds of times above it."""

    rows: Any  # np.ndarray, float32, one value per row (the output's size / its last dimension)
    rel_l2: float

    def per_element(self, shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
        """The floor of the flat elements [lo, hi) of an output of `shape`."""
        row = shape[-1] if shape and shape[-1] > 0 else 1
        rows = np.asarray(self.rows).reshape(-1)
        first, last = lo // row, (hi - 1) // row
        return np.repeat(rows[first : last + 1], row)[lo - first * row : hi - first * row]


def moved_twin(inputs: dict[str, Any], seed: int) -> dict[str, Any]:
    """The inputs moved one unit in the last place, each float32 element in a random direction
    (`Fp32Floor`'s second evaluation), drawn in blocks: the same numbers as one draw of each
    input's size, without a float64 array of it."""
    rng = np.random.default_rng([seed, 0xF10])
    moved: dict[str, Any] = {}
    for name, v in inputs.items():
        if not (isinstance(v, np.ndarray) and v.dtype == np.float32):
            moved[name] = v
            continue
        src = np.ascontiguousarray(v).reshape(-1)
        dst = np.empty_like(src)
        for a in range(0, src.size, _MOVE_BLOCK):
            z = min(src.size, a + _MOVE_BLOCK)
            away = np.where(rng.random(z - a) < 0.5, np.float32(-np.inf), np.float32(np.inf))
            dst[a:z] = np.nextafter(src[a:z], away)
        moved[name] = dst.reshape(v.shape)
    return moved


_MOVE_BLOCK = 1 << 22


def fp32_floor(
    problem: Problem, inputs: dict[str, Any], reference: dict[str, np.ndarray], seed: int
) -> dict[str, Fp32Floor]:
    """The `Fp32Floor` of each output on these inputs (`reference`: their float64 outputs)."""
    out: dict[str, Fp32Floor] = {}
    for twin in (inputs, moved_twin(inputs, seed)):
        got = reference_outputs(problem, twin, precision=np.float32)
        for name, ref in reference.items():
            r = np.asarray(ref, dtype=np.float64)
            with np.errstate(all="ignore"):
                e = np.abs(np.asarray(got[name], dtype=np.float64) - r)
            e[~np.isfinite(e)] = 0.0  # non-finite twins say nothing (the finite check stays as it is)
            norm = float(np.linalg.norm(r[np.isfinite(r)]))
            rel = float(np.linalg.norm(e)) / norm if norm > 0 else 0.0
            rows = (e.reshape(-1, r.shape[-1]).max(axis=1) if r.ndim and r.size else e.reshape(-1)).astype(
                np.float32
            )
            prev = out.get(name)
            if prev is None:
                out[name] = Fp32Floor(rows=rows, rel_l2=rel)
            else:
                np.maximum(prev.rows, rows, out=prev.rows)
                prev.rel_l2 = max(prev.rel_l2, rel)
    return out


def compare_output(
    got: np.ndarray,
    ref: np.ndarray,
    tol: Tolerance,
    stats: RefStats | None = None,
    *,
    threads: int | None = None,
) -> tuple[bool, float, float, str]:
    """(passed, rel_l2, max_abs_err, note) for one output tensor against a float64 reference."""
    passed, rel, max_abs, note, _ = _compare(got, ref, tol, stats, None, threads)
    return passed, rel, max_abs, note


def _compare(
    got: np.ndarray,
    ref: np.ndarray,
    tol: Tolerance,
    stats: RefStats | None,
    floor: Fp32Floor | None,
    threads: int | None,
) -> tuple[bool, float, float, str, float]:
    """compare_output's verdict plus the max relative error (FlashInfer-Bench's), in one pass
    over the elements; with `floor`, each element may also miss by FP32_FLOOR_FACTOR times
    float32's own error there, and the relative L2 by that factor times float32's."""
    if tuple(got.shape) != tuple(ref.shape):
        return False, math.inf, math.inf, f"shape {tuple(got.shape)} != expected {tuple(ref.shape)}", math.inf
    st = stats or RefStats(ref, tol, bound=False, threads=threads)
    got_finite_all = bool(np.all(np.isfinite(got)))
    if not (st.finite and got_finite_all):
        max_rel = max_relative_error(got, ref)
        g64, r64 = got.astype(np.float64), np.asarray(ref, dtype=np.float64)
        ref_finite, got_finite = np.isfinite(r64), np.isfinite(g64)
        if not np.array_equal(ref_finite, got_finite) or not np.array_equal(
            g64[~ref_finite], r64[~ref_finite]
        ):
            bad = int(np.count_nonzero(~got_finite & ref_finite))
            nans = int(np.count_nonzero(np.isnan(g64) & ref_finite))
            note = (
                f"{bad} non-finite values where the reference is finite ({nans} NaN; outputs are "
                "poisoned with NaN, so NaN can mean an element was never written)"
            )
            return False, math.inf, math.inf, note, max_rel
        fe = None
        if floor is not None:  # the finite elements' floors, one by one
            fe = floor.per_element(tuple(r64.shape), 0, r64.size).reshape(r64.shape)[ref_finite]
        got, ref = g64[ref_finite], r64[ref_finite]
        st = RefStats(ref, tol, bound=False, threads=threads)
        passed, rel, max_abs, note, _ = _compare_finite(got, ref, tol, st, floor, fe, threads)
        return passed, rel, max_abs, note, max_rel
    return _compare_finite(got, ref, tol, st, floor, None, threads)


class _SpanSums(NamedTuple):
    """One span's part of a comparison."""

    err2: float  # sum of squared differences
    max_abs: float
    max_rel: float  # FlashInfer-Bench's |got - ref| / (|ref| + 1e-8)
    outside: int  # elements outside the allclose bound
    first: int  # the first of them (flat index), -1 if none


def _compare_span(
    g: np.ndarray,
    r: np.ndarray,
    b: np.ndarray | None,
    tol: Tolerance,
    st: RefStats,
    floor: Fp32Floor | None,
    floor_elems: np.ndarray | None,
    shape: tuple[int, ...],
    lo: int,
    hi: int,
) -> _SpanSums:
    """The flat elements [lo, hi) of a comparison, chunk by chunk (see `_CHUNK`)."""
    k = np.float64(FP32_FLOOR_FACTOR)
    err2, max_abs, max_rel, outside, first = 0.0, 0.0, 0.0, 0, -1
    n0 = min(_CHUNK, hi - lo)
    diff, absr, lim = np.empty(n0), np.empty(n0), np.empty(n0)
    bnd32 = np.empty(n0, dtype=np.float32)
    for c0 in range(lo, hi, _CHUNK):
        c1 = min(c0 + _CHUNK, hi)
        n = c1 - c0
        d, a, lm = diff[:n], absr[:n], lim[:n]
        rs = r[c0:c1]
        np.subtract(g[c0:c1], rs, out=d, dtype=np.float64)
        # numpy's own loop, not BLAS's ddot: a multi-threaded BLAS wakes its threads for every
        # chunk, and with the machine's other core busy each call took 1 ms instead of 2 us
        # (bmm_softmax's six cases: 16 s of a 21 s judge, measured)
        err2 += float(np.einsum("i,i->", d, d))
        np.abs(d, out=d)
        max_abs = max(max_abs, float(d.max()))
        np.abs(rs, out=a, dtype=np.float64)
        if b is None:  # RefStats' bound, chunk by chunk (rounded to float32 as it rounds it)
            np.multiply(a, tol.rtol, out=lm)
            np.add(lm, st.atol, out=lm)
            bnd32[:n] = lm
            lm[:] = bnd32[:n]
        else:
            lm[:] = b[c0:c1]
        if floor_elems is not None:
            lm += k * floor_elems[c0:c1]
        elif floor is not None:
            lm += k * floor.per_element(shape, c0, c1)
        over = d > lm
        n_over = int(np.count_nonzero(over))
        if n_over and first < 0:
            first = c0 + int(np.argmax(over))
        outside += n_over
        a += 1e-8  # FlashInfer-Bench's max relative error: |got - ref| / (|ref| + 1e-8)
        np.divide(d, a, out=a)
        max_rel = max(max_rel, float(a.max()))
    return _SpanSums(err2, max_abs, max_rel, outside, first)


def _compare_finite(
    got: np.ndarray,
    ref: np.ndarray,
    tol: Tolerance,
    st: RefStats,
    floor: Fp32Floor | None,
    floor_elems: np.ndarray | None,
    threads: int | None,
) -> tuple[bool, float, float, str, float]:
    if got.size == 0:
        return True, 0.0, 0.0, "", 0.0
    g, r = got.reshape(-1), np.asarray(ref).reshape(-1)
    b = st.bound.reshape(-1) if st.bound is not None else None
    shape = tuple(ref.shape)
    parts = _map_spans(
        lambda lo, hi: _compare_span(g, r, b, tol, st, floor, floor_elems, shape, lo, hi), g.size, threads
    )
    err2 = sum(p.err2 for p in parts)
    max_abs = max(p.max_abs for p in parts)
    max_rel = max(p.max_rel for p in parts)
    outside = sum(p.outside for p in parts)
    first = next((p.first for p in parts if p.first >= 0), -1)
    err = math.sqrt(err2)
    rel = err / st.norm if st.norm > 0 else err
    rel_bar = tol.rel_l2 if floor is None else max(tol.rel_l2, FP32_FLOOR_FACTOR * floor.rel_l2)
    widened = "" if floor is None else f" (with {FP32_FLOOR_FACTOR:g}x float32's own error)"
    notes = []
    if rel > rel_bar:
        notes.append(f"relative L2 error {_fmt(rel)} > {_fmt(rel_bar)}{widened}")
    if outside:
        notes.append(
            f"{outside} of {got.size} elements outside allclose(atol={_fmt(st.atol)}, "
            f"rtol={_fmt(tol.rtol)}){widened}; first at flat index {first}: got {_fmt(float(g[first]))} "
            f"expected {_fmt(float(r[first]))}"
        )
    return not notes, rel, max_abs, "; ".join(notes), max_rel


def compare_outputs(
    case: str,
    outputs: dict[str, np.ndarray],
    reference: dict[str, np.ndarray],
    tol: Tolerance,
    *,
    expected_dtypes: dict[str, str] | None = None,
    stats: dict[str, RefStats] | None = None,
    floor: dict[str, Fp32Floor] | None = None,
    threads: int | None = None,
) -> SeedCheck:
    """One SeedCheck for a case: every output must pass (with `floor`: within the bar widened
    by float32's own error on these inputs, see `Fp32Floor`; `threads`: see `_map_spans`)."""
    worst_rel, worst_abs, worst_elem, notes, ok = 0.0, 0.0, 0.0, [], True
    for name, ref in reference.items():
        got = outputs.get(name)
        if got is None:
            return SeedCheck(case=case, passed=False, note=f"output {name} missing")
        if expected_dtypes and np.dtype(numpy_dtype(expected_dtypes[name])) != got.dtype:
            return SeedCheck(
                case=case,
                passed=False,
                note=f"output {name} has dtype {got.dtype}, expected {expected_dtypes[name]}",
            )
        passed, rel, mabs, note, mrel = _compare(
            got, ref, tol, (stats or {}).get(name), (floor or {}).get(name), threads
        )
        worst_rel, worst_abs = max(worst_rel, rel), max(worst_abs, mabs)
        worst_elem = max(worst_elem, mrel)
        if not passed:
            ok = False
            notes.append(f"{name}: {note}")
    return SeedCheck(
        case=case,
        passed=ok,
        rel_l2=_finite_or_none(worst_rel),
        max_abs_err=_finite_or_none(worst_abs),
        max_rel_err=_finite_or_none(worst_elem),
        note="; ".join(notes),
    )


def max_relative_error(got: np.ndarray, ref: np.ndarray) -> float:
    """FlashInfer-Bench's max_relative_error: the largest |got - ref| / (|ref| + 1e-8) over the
    elements (inf when shapes differ or a value is non-finite where the reference is finite)."""
    if tuple(got.shape) != tuple(ref.shape):
        return math.inf
    g, r = np.asarray(got).reshape(-1), np.asarray(ref).reshape(-1)
    worst, step = 0.0, 1 << 16
    with np.errstate(invalid="ignore", over="ignore"):
        for lo in range(0, g.size, step):
            chunk = _elem_rel(g[lo : lo + step], r[lo : lo + step])
            if not math.isfinite(chunk):
                return math.inf
            worst = max(worst, chunk)
    return worst


def _elem_rel(g: np.ndarray, r: np.ndarray) -> float:
    r64 = r.astype(np.float64)
    d = np.abs(np.subtract(g, r64, dtype=np.float64))
    d[(g == r64) | (np.isnan(g) & np.isnan(r64))] = 0.0  # equal infinities, NaN where the reference is NaN
    if not np.all(np.isfinite(d)):
        return math.inf
    return float(np.max(d / (np.abs(r64) + 1e-8))) if d.size else 0.0


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


def sampled_agreement(got: np.ndarray, ref: np.ndarray, ref_rms: np.ndarray, tol: Tolerance) -> np.ndarray:
    """Per sampled element of many calls (`got`, `ref`: [calls, samples]; `ref_rms`: [calls],
    each call's reference RMS), whether it passes the allclose rule of `compare_output`:
    within atol x max(1, rms) + rtol x |ref| where the reference is finite, the same value
    (or NaN) where it is not."""
    g = np.asarray(got, dtype=np.float64)
    r = np.asarray(ref, dtype=np.float64)
    atol = tol.atol * np.maximum(1.0, np.asarray(ref_rms, dtype=np.float64))[:, None]
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.abs(g - r) <= atol + tol.rtol * np.abs(r)
    same = (g == r) | (np.isnan(g) & np.isnan(r))
    return np.where(np.isfinite(r), np.isfinite(g) & close, same)
