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
  is above 1 (so large-magnitude cases are judged relative to their size).

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
from typing import Any, TypeVar

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
) -> dict[str, np.ndarray]:
    """Run the numpy reference on `inputs` upcast to `precision`; outputs in definition order."""
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
    shapes = problem.output_shapes()
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

# Comparisons of large outputs run in chunks that stay in cache (several passes over a 16 MB
# output are 3-5x faster so), spread over threads: numpy releases the GIL in its loops, and a
# GPU host's idle cores judge a production-size output (33M elements) in a fraction of a second.
_CHUNK = 1 << 16
_THREADS = max(1, min(8, (os.cpu_count() or 1)))
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _spans(n: int) -> list[tuple[int, int]]:
    """[lo, hi) spans of whole chunks, one per thread (a single span for small arrays)."""
    if n < 16 * _CHUNK or _THREADS == 1:
        return [(0, n)]
    per = -(-n // _THREADS // _CHUNK) * _CHUNK
    return [(lo, min(n, lo + per)) for lo in range(0, n, per)]


def _map_spans(fn: Callable[[int, int], T], n: int) -> list[T]:
    global _pool
    spans = _spans(n)
    if len(spans) == 1:
        return [fn(*spans[0])]
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_THREADS, thread_name_prefix="accelopt-compare")
    return list(_pool.map(lambda sp: fn(*sp), spans))


class RefStats:
    """Per-reference quantities reused across many comparisons against the same reference."""

    def __init__(self, ref: np.ndarray, tol: Tolerance) -> None:
        r = np.asarray(ref, dtype=np.float64).reshape(-1)
        self.finite = bool(all(_map_spans(lambda lo, hi: bool(np.all(np.isfinite(r[lo:hi]))), r.size)))
        fin = r if self.finite else r[np.isfinite(r)]
        self.norm = math.sqrt(sum(_map_spans(lambda lo, hi: float(np.dot(fin[lo:hi], fin[lo:hi])), fin.size)))
        self.rms = self.norm / math.sqrt(fin.size) if fin.size else 0.0
        self.atol = tol.atol * max(1.0, self.rms)
        # elementwise allclose bound, kept in float32 to halve its memory
        bound = np.empty(r.size, dtype=np.float32)

        def fill(lo: int, hi: int) -> None:
            for a in range(lo, hi, _CHUNK):
                b = min(hi, a + _CHUNK)
                bound[a:b] = self.atol + tol.rtol * np.abs(r[a:b])

        _map_spans(fill, r.size)
        self.bound = bound.reshape(np.shape(ref))


def compare_output(
    got: np.ndarray,
    ref: np.ndarray,
    tol: Tolerance,
    stats: RefStats | None = None,
) -> tuple[bool, float, float, str]:
    """(passed, rel_l2, max_abs_err, note) for one output tensor against a float64 reference."""
    if tuple(got.shape) != tuple(ref.shape):
        return False, math.inf, math.inf, f"shape {tuple(got.shape)} != expected {tuple(ref.shape)}"
    st = stats or RefStats(ref, tol)
    got_finite_all = bool(np.all(np.isfinite(got)))
    if not (st.finite and got_finite_all):
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
            return False, math.inf, math.inf, note
        got, ref = g64[ref_finite], r64[ref_finite]
        st = RefStats(ref, tol)
    if got.size == 0:
        return True, 0.0, 0.0, ""
    g, r, b = got.reshape(-1), np.asarray(ref).reshape(-1), st.bound.reshape(-1)

    def span(lo: int, hi: int) -> tuple[float, float, int, int]:
        err2, max_abs, outside, first = 0.0, 0.0, 0, -1
        for a in range(lo, hi, _CHUNK):
            z = min(hi, a + _CHUNK)
            diff = np.subtract(g[a:z], r[a:z], dtype=np.float64)
            err2 += float(np.dot(diff, diff))
            np.abs(diff, out=diff)
            max_abs = max(max_abs, float(diff.max()))
            over = diff > b[a:z]
            n_over = int(np.count_nonzero(over))
            if n_over and first < 0:
                first = a + int(np.argmax(over))
            outside += n_over
        return err2, max_abs, outside, first

    parts = _map_spans(span, g.size)
    err2 = sum(p[0] for p in parts)
    max_abs = max(p[1] for p in parts)
    outside = sum(p[2] for p in parts)
    first = next((p[3] for p in parts if p[3] >= 0), -1)
    err = math.sqrt(err2)
    rel = err / st.norm if st.norm > 0 else err
    notes = []
    if rel > tol.rel_l2:
        notes.append(f"relative L2 error {_fmt(rel)} > {_fmt(tol.rel_l2)}")
    if outside:
        notes.append(
            f"{outside} of {got.size} elements outside allclose(atol={_fmt(st.atol)}, "
            f"rtol={_fmt(tol.rtol)}); first at flat index {first}: got {_fmt(float(g[first]))} "
            f"expected {_fmt(float(r[first]))}"
        )
    return not notes, rel, max_abs, "; ".join(notes)


def compare_outputs(
    case: str,
    outputs: dict[str, np.ndarray],
    reference: dict[str, np.ndarray],
    tol: Tolerance,
    *,
    expected_dtypes: dict[str, str] | None = None,
    stats: dict[str, RefStats] | None = None,
) -> SeedCheck:
    """One SeedCheck for a case: every output must pass."""
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
        passed, rel, mabs, note = compare_output(got, ref, tol, (stats or {}).get(name))
        worst_rel, worst_abs = max(worst_rel, rel), max(worst_abs, mabs)
        worst_elem = max(worst_elem, max_relative_error(got, ref))
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
