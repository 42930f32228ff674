"""The inputs a kernel is judged on (the field's known reward hacks: hardware_agents/README.md):
fresh and deterministic per (seed, input), from the definition's `x_input_init` expressions
(default `normal(0, 1)`), plus adversarial cases: `x_adversarial` or, by default, every float
input scaled by 1000 ("large": breaks a softmax without max subtraction, an unguarded exp, sums
of squares in low precision).

Init expressions are a tiny whitelisted language: numbers, `normal(loc, scale)`,
`uniform(low, high)`, `randint(low, high)`, `abs(x)`, `exp(x)`, `+ - * /` and parentheses.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from accelopt.problem import Definition, Problem, ScalarInput

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
