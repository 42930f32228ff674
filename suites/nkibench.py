"""Import an NKIBench folder into a suite (Definitions, Workloads, NKI baselines).

NKIBench (the paper's Trainium benchmark) is a folder with `summary.json` (problem -> seed
yaml and cases: shape values and implementations `{task: numpy reference module, kernel:
NKI kernel file}`), `seeds/<problem>.yaml`, `reference/*.py` and `kernels/*.py`. Each case
becomes one problem folder of a suite that `suites.load_suite` reads:

- definition.json: const axes at the case's values (the reference module and its layout
  transforms are written for those shapes), inputs in `get_inputs()` order with their
  shapes and init distributions read from the source (`normal(0, 0.05)` for mamba,
  `abs(normal(0, 1.0))` for adamw's v; a scalar such as add_rmsnorm_matmul's eps becomes a
  scalar input whose value is in the workload), outputs, `x_numpy_reference` = the whole
  reference module (so `forward`, `transform_to_nki_inputs` and `transform_nki_outputs`
  travel with the problem; `run` calls `forward`), relative-L2 tolerance 2e-5 (3e-5 for
  mamba), and for the 14 NKIBench problems the roofline expressions, op type, output names
  and adversarial cases of the CPU suite's definitions of the same operators (one set of
  expressions: FLOPs and minimal traffic as the paper counts them, fp32, every input read
  once, every output written once). An unknown problem gets a memory-only roofline (its
  FLOPs are not known) and its output shapes from running `forward` at small shapes.
- workload.json: the scalar inputs' values; baseline `kernel.py` with entry `kernel`.

    problems = read_nkibench(path)                       # [ImportedProblem]
    report = import_nkibench(path, out=None, name="nkibench", device="trn1")

The reference module is executed only for unknown problems (to learn their output shapes);
the agent executes it anyway when profiling, so it is trusted like a problem file.
"""

from __future__ import annotations

import ast
import json
import math
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from accelopt.problem import (
    AxisConst,
    Definition,
    ProblemFileError,
    RandomInput,
    ReferenceSlices,
    Roofline,
    ScalarInput,
    TensorSpec,
    Tolerance,
    Workload,
    definition_errors,
    load_definition,
    to_json,
    workload_errors,
)

NKIBENCH_PROBLEMS: tuple[str, ...] = (
    "adamw",
    "add_rmsnorm_matmul",
    "bmm",
    "bmm_softmax",
    "gqa_full",
    "lora",
    "mamba",
    "matmul",
    "matmul_add_rmsnorm",
    "rmsnorm_matmul",
    "rope_single_freq_apply",
    "silu",
    "swiglu",
    "transpose_matmul",
)
REL_TOL: dict[str, float] = {"mamba": 3e-5}  # the reference code's rel_tol per problem
DEFAULT_REL_TOL = 2e-5
# The axis along which each problem's reference is independent, the inputs cut along it (by
# their position in `get_inputs()`: the cases name them differently), how many positions a
# slice takes and the temporaries its formula holds per byte of a slice's float64 outputs
# (`Definition.x_reference_slices`: three of an output's size, gqa_full's attention scores
# N / D = 32 times its output, three of them; checked against the measured peaks, docs/neuron.md).
# Not mamba (a scan whose constants fix its channel count) nor rope_single_freq_apply (its
# only long axis is its output's last).
REFERENCE_SLICES: dict[str, tuple[str, tuple[int, ...], int, float]] = {
    "adamw": ("M", (0, 1, 2, 3), 2048, 4.0),
    "add_rmsnorm_matmul": ("M", (0, 3), 1024, 4.0),
    "bmm": ("B", (0, 1), 1, 4.0),
    "bmm_softmax": ("B", (0, 1), 1, 4.0),
    "gqa_full": ("N", (0,), 256, 100.0),
    "lora": ("M", (0,), 512, 4.0),
    "matmul": ("M", (0,), 512, 4.0),
    "matmul_add_rmsnorm": ("M", (0, 3), 1024, 4.0),
    "rmsnorm_matmul": ("M", (0,), 1024, 4.0),
    "silu": ("M", (0,), 1024, 4.0),
    "swiglu": ("M", (0,), 1024, 4.0),
    "transpose_matmul": ("M", (0,), 1024, 4.0),
}
# The temporaries of a reference computed whole, per byte of its float64 outputs, where they
# are more than the agent's default (`Definition.x_reference_work`): mamba's scan makes three
# (C, S, M) arrays, S = 16 times its output each, and a float32 one.
REFERENCE_WORK: dict[str, float] = {"mamba": 64.0}
TEMPLATE_SUITE = "cpu"  # the same 14 operators at CPU shapes: roofline, op type, output names
ENTRY_FILE = "kernel.py"
ENTRY = "kernel"
_RUN_WRAPPER = (
    "\n\n# AccelOpt: the definition's `run` is NKIBench's `forward`.\n"
    "def run(*inputs):\n    return forward(*inputs)\n"
)
_MAX_PROBE_ELEMENTS = 1 << 22
_DTYPES = {
    "float32": "float32",
    "float64": "float32",
    "int32": "int32",
    "int64": "int64",
    "float16": "float16",
    "int8": "int8",
    "int16": "int16",
    "bool_": "bool",
    "bool": "bool",
}


class NkibenchError(ProblemFileError):
    """An NKIBench folder (or a file in it) that cannot be imported."""


class InputDecl(msgspec.Struct, kw_only=True):
    name: str
    dims: list[str] = []  # source of each dimension expression; [] for a scalar
    init: str = ""
    dtype: str = "float32"
    scalar: float | int | bool | None = None


class ImportedProblem(msgspec.Struct, kw_only=True):
    folder: str
    problem: str
    case: str
    definition: Definition
    workload: Workload
    kernel: str
    notes: list[str] = []


class ImportedSummary(msgspec.Struct, kw_only=True):
    folder: str
    problem: str
    case: str
    axes: dict[str, int]
    known: bool
    notes: list[str] = []


class ImportReport(msgspec.Struct, kw_only=True):
    source: str
    out: str
    suite: str
    device: str
    problems: list[ImportedSummary]


# --- small expression helpers ----------------------------------------------------------------------


def _int_eval(node: ast.AST, values: dict[str, int]) -> int:
    """An integer shape expression of the axes: names, ints, + - * // / (exact), parentheses."""
    if isinstance(node, ast.Expression):
        return _int_eval(node.body, values)
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return int(node.value)
    if isinstance(node, ast.Name):
        if node.id not in values:
            raise ValueError(f"unknown name {node.id!r}")
        return int(values[node.id])
    if isinstance(node, ast.BinOp):
        a, b = _int_eval(node.left, values), _int_eval(node.right, values)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        if isinstance(node.op, ast.FloorDiv | ast.Div):
            if b == 0 or (isinstance(node.op, ast.Div) and a % b):
                raise ValueError(f"{a} / {b} is not an integer")
            return a // b
    raise ValueError(f"`{ast.unparse(node)}` is not a shape expression")


def _names(expr: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Name)}


def _num(node: ast.AST) -> float | int:
    value = ast.literal_eval(node)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"`{ast.unparse(node)}` is not a number")
    return value


def _fmt(x: float | int) -> str:
    return repr(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))


# --- reading a reference module ----------------------------------------------------------------------


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _call_args(call: ast.Call, names: tuple[str, ...]) -> dict[str, ast.AST]:
    out: dict[str, ast.AST] = dict(zip(names, call.args, strict=False))
    out.update({k.arg: k.value for k in call.keywords if k.arg})
    return out


def _random_init(expr: ast.AST, where: str) -> tuple[str, list[ast.AST], str]:
    """(init expression, shape nodes, dtype) of a get_inputs array expression."""
    dtype = "float32"
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "astype":
        dt = _dotted(expr.args[0]) if expr.args else ""
        if isinstance(expr.args[0], ast.Constant) and isinstance(expr.args[0].value, str):
            dt = expr.args[0].value
        dtype = _DTYPES.get(dt.rsplit(".", 1)[-1], "")
        if not dtype:
            raise NkibenchError(f"{where}: unsupported dtype `{dt}`")
        expr = expr.func.value
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult | ast.Add | ast.Sub | ast.Div):
        for const, other, left in ((expr.left, expr.right, True), (expr.right, expr.left, False)):
            try:
                c = _num(const)
            except (ValueError, SyntaxError):
                continue
            init, shape, _ = _random_init(other, where)
            op = {ast.Mult: "*", ast.Add: "+", ast.Sub: "-", ast.Div: "/"}[type(expr.op)]
            text = f"{_fmt(c)} {op} ({init})" if left else f"({init}) {op} {_fmt(c)}"
            return text, shape, dtype
    if not isinstance(expr, ast.Call):
        raise NkibenchError(f"{where}: cannot read `{ast.unparse(expr)}` (expected np.random.* or a number)")
    fn = _dotted(expr.func).removeprefix("numpy.").removeprefix("np.")
    if fn in ("abs", "exp", "absolute"):
        init, shape, _ = _random_init(expr.args[0], where)
        return f"{'exp' if fn == 'exp' else 'abs'}({init})", shape, dtype
    if fn in (
        "random.normal",
        "random.standard_normal",
        "random.randn",
        "random.uniform",
        "random.rand",
        "random.random",
        "random.random_sample",
        "random.randint",
    ):
        if fn == "random.randn" or fn == "random.rand":
            shape_nodes: list[ast.AST] = list(expr.args)
            init = "normal(0, 1)" if fn == "random.randn" else "uniform(0, 1)"
            return init, shape_nodes, dtype
        params = {
            "random.normal": ("loc", "scale", "size"),
            "random.standard_normal": ("size",),
            "random.uniform": ("low", "high", "size"),
            "random.random": ("size",),
            "random.random_sample": ("size",),
            "random.randint": ("low", "high", "size"),
        }[fn]
        a = _call_args(expr, params)
        size = a.get("size")
        if size is None:
            raise NkibenchError(f"{where}: `{ast.unparse(expr)}` has no size")
        shape_nodes = list(size.elts) if isinstance(size, ast.Tuple | ast.List) else [size]
        if fn == "random.normal":
            loc = _fmt(_num(a["loc"])) if "loc" in a else "0"
            scale = _fmt(_num(a["scale"])) if "scale" in a else "1"
            init = f"normal({loc}, {scale})"
        elif fn == "random.standard_normal":
            init = "normal(0, 1)"
        elif fn == "random.uniform":
            low = _fmt(_num(a["low"])) if "low" in a else "0"
            high_ = _fmt(_num(a["high"])) if "high" in a else "1"
            init = f"uniform({low}, {high_})"
        elif fn == "random.randint":
            high = a.get("high")
            lo, hi = (_num(a["low"]), _num(high)) if high is not None else (0, _num(a["low"]))
            init, dtype = f"randint({_fmt(lo)}, {_fmt(hi)})", "int64" if dtype == "float32" else dtype
        else:
            init = "uniform(0, 1)"
        return init, shape_nodes, dtype
    raise NkibenchError(f"{where}: cannot read `{ast.unparse(expr)}` (unsupported function {fn})")


def _is_default_init(init: str) -> bool:
    return re.fullmatch(r"normal\(0(\.0)?, 1(\.0)?\)", init) is not None


class ReferenceSource:
    """What AccelOpt needs from an NKIBench reference module, read from its syntax tree."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.source = path.read_text()
        except OSError as e:
            raise NkibenchError(f"{path}: cannot read ({e.strerror})") from e
        try:
            tree = ast.parse(self.source, filename=str(path))
        except SyntaxError as e:
            raise NkibenchError(f"{path}: not valid Python ({e.msg}, line {e.lineno})") from e
        self.constants: dict[str, int] = {}
        funcs: dict[str, ast.FunctionDef] = {}
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                try:
                    value = _num(node.value)
                except (ValueError, SyntaxError):
                    continue
                if isinstance(value, int):
                    self.constants[node.targets[0].id] = value
            elif isinstance(node, ast.FunctionDef):
                funcs[node.name] = node
        for required in ("get_inputs", "forward"):
            if required not in funcs:
                raise NkibenchError(f"{path}: defines no `{required}`")
        self.functions = set(funcs)
        self.inputs = self._inputs(funcs["get_inputs"])
        params = [a.arg for a in funcs["forward"].args.args]
        if funcs["forward"].args.vararg is None and len(params) != len(self.inputs):
            raise NkibenchError(
                f"{path}: forward takes {len(params)} arguments, get_inputs returns {len(self.inputs)}"
            )

    def _inputs(self, fn: ast.FunctionDef) -> list[InputDecl]:
        assigned: dict[str, ast.AST] = {}
        order: list[str] | None = None
        for stmt in fn.body:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
            ):
                assigned[stmt.targets[0].id] = stmt.value
            elif isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.List | ast.Tuple):
                order = []
                for elt in stmt.value.elts:
                    if not isinstance(elt, ast.Name):
                        raise NkibenchError(
                            f"{self.path}: get_inputs must return a list of names, got `{ast.unparse(elt)}`"
                        )
                    order.append(elt.id)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # docstring
            elif not isinstance(stmt, ast.Pass):
                raise NkibenchError(f"{self.path}: get_inputs: unsupported statement `{ast.unparse(stmt)}`")
        if not order:
            raise NkibenchError(f"{self.path}: get_inputs does not return a list of its inputs")
        decls = []
        for name in order:
            if name not in assigned:
                raise NkibenchError(f"{self.path}: get_inputs returns `{name}` without assigning it")
            expr = assigned[name]
            where = f"{self.path}: get_inputs: {name}"
            try:
                decls.append(InputDecl(name=name, scalar=_num(expr), dtype="float32"))
                continue
            except (ValueError, SyntaxError):
                pass
            init, shape, dtype = _random_init(expr, where)
            decls.append(InputDecl(name=name, dims=[ast.unparse(d) for d in shape], init=init, dtype=dtype))
        return decls


# --- templates (the CPU suite's definitions of the same operators) --------------------------------------


def _template(problem: str) -> Definition | None:
    if problem not in NKIBENCH_PROBLEMS:
        return None
    path = Path(__file__).resolve().parent / TEMPLATE_SUITE / problem / "definition.json"
    return load_definition(path) if path.is_file() else None


def _template_aliases(t: Definition | None) -> list[tuple[str, str]]:
    """(axis name, expression) of the template's derived axes, from constraints "X == expr"."""
    out = []
    for c in t.constraints if t else []:
        lhs, sep, rhs = c.partition("==")
        if sep and lhs.strip().isidentifier():
            out.append((lhs.strip(), rhs.strip()))
    return out


def _derived_name(expr: str, taken: Iterable[str]) -> str:
    base = re.sub(r"\W+", "_", expr.replace("//", "_div_").replace("*", "x")).strip("_") or "dim"
    if not base[0].isalpha():
        base = f"n{base}"
    name, i = base, 2
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    return name


# --- one case -----------------------------------------------------------------------------------------


def _case_name(problem: str, values: dict[str, int]) -> str:
    return problem + "_" + "_".join(f"{k}{values[k]}" for k in sorted(values))


def _kernel_source(path: Path) -> tuple[str, list[str]]:
    try:
        src = path.read_text()
    except OSError as e:
        raise NkibenchError(f"{path}: cannot read ({e.strerror})") from e
    try:
        tree = ast.parse(src, filename=str(path))
    except SyntaxError as e:
        raise NkibenchError(f"{path}: not valid Python ({e.msg}, line {e.lineno})") from e
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    names = [f.name for f in funcs]
    if ENTRY in names:
        return src, []
    jitted = [f.name for f in funcs if any("jit" in ast.unparse(d) for d in f.decorator_list)]
    entry = "optimized_kernel" if "optimized_kernel" in names else (jitted[0] if jitted else "")
    if not entry:
        raise NkibenchError(f"{path}: no `kernel` (or @nki.jit) function")
    return src.rstrip() + f"\n\n\n{ENTRY} = {entry}  # AccelOpt's entry point\n", [
        f"entry `{entry}` aliased as `kernel`"
    ]


def _probe_outputs(ref: ReferenceSource, values: dict[str, int]) -> list[tuple[int, ...]]:
    """Output shapes of an unknown problem: its `forward` on its own `get_inputs()`."""
    import numpy as np

    n = 0
    for d in ref.inputs:
        if d.dims:
            n += math.prod(_int_eval(ast.parse(x, mode="eval"), values) for x in d.dims)
    if n > _MAX_PROBE_ELEMENTS:
        raise NkibenchError(
            f"{ref.path}: not one of the 14 NKIBench problems and too large ({n} input elements) "
            "to learn its output shapes by running forward"
        )
    ns: dict[str, Any] = {"np": np, "numpy": np}
    exec(compile(ref.source, str(ref.path), "exec"), ns)
    np.random.seed(0)
    with np.errstate(all="ignore"):
        out = ns["forward"](*ns["get_inputs"]())
    outs = list(out) if isinstance(out, tuple | list) else [out]
    return [tuple(int(s) for s in np.shape(o)) for o in outs]


class _Axes:
    """A case's axes: its parameters first, then dimensions derived from them (`of`)."""

    def __init__(
        self, ref: ReferenceSource, seed: dict[str, Any], values: dict[str, int], template: Definition | None
    ):
        self.ref = ref
        self.values = values
        params = [str(p) for p in seed.get("parameters") or []] or list(values)
        self.axes: dict[str, int] = {p: values[p] for p in params if p in values}
        self.axes.update({k: v for k, v in values.items() if k not in self.axes})
        self.descriptions: dict[str, str] = {}
        self.constraints: list[str] = []
        self.aliases = _template_aliases(template)

    def of(self, dim: str) -> str:
        """The axis of shape dimension `dim` (a parameter, or an expression of them): a
        parameter itself, the template's name for the same derived dimension, `n<size>` for a
        constant, else a new derived axis with its constraint."""
        axes, values = self.axes, self.values
        node = ast.parse(dim, mode="eval")
        if isinstance(node.body, ast.Name) and node.body.id in axes:
            return node.body.id
        try:
            value = _int_eval(node, values)
        except ValueError as e:
            raise NkibenchError(f"{self.ref.path}: shape dimension `{dim}`: {e}") from None
        for name, expr in self.aliases:  # the template's name for the same derived dimension
            try:
                same = (
                    _names(expr) == _names(dim) and _int_eval(ast.parse(expr, mode="eval"), values) == value
                )
            except (ValueError, SyntaxError):
                same = False
            if same:
                axes.setdefault(name, value)
                self.descriptions.setdefault(name, f"{dim} (derived)")
                if f"{name} == {dim}" not in self.constraints:
                    self.constraints.append(f"{name} == {dim}")
                return name
        if isinstance(node.body, ast.Constant):
            name = f"n{value}"
            axes.setdefault(name, value)
            return name
        for name, desc in self.descriptions.items():
            if desc == f"{dim} (derived)":
                return name
        name = _derived_name(dim, axes)
        axes[name] = value
        self.descriptions[name] = f"{dim} (derived)"
        self.constraints.append(f"{name} == {dim}")
        return name


def _case_inputs(
    ref: ReferenceSource, axes: _Axes
) -> tuple[dict[str, TensorSpec], dict[str, str], dict[str, float | int | bool]]:
    """The reference's inputs as tensors (a scalar argument as a shapeless one), their
    non-default initializations, and the scalars' values."""
    inputs: dict[str, TensorSpec] = {}
    inits: dict[str, str] = {}
    scalars: dict[str, float | int | bool] = {}
    for d in ref.inputs:
        if not d.dims:
            inputs[d.name] = TensorSpec(
                shape=None,
                dtype="int64" if isinstance(d.scalar, int) else "float32",
                description="scalar argument",
            )
            scalars[d.name] = d.scalar  # type: ignore[assignment]
            continue
        inputs[d.name] = TensorSpec(shape=[axes.of(x) for x in d.dims], dtype=d.dtype)  # type: ignore[arg-type]
        if not _is_default_init(d.init):
            inits[d.name] = d.init
    return inputs, inits, scalars


def _case_outputs(
    ref: ReferenceSource, problem: str, axes: _Axes, template: Definition | None, notes: list[str]
) -> dict[str, TensorSpec]:
    """The template's outputs, or else those the reference returns when run (their dimensions
    matched to the axes by size)."""
    if template is not None:
        outputs = {n: TensorSpec(shape=s.shape, dtype=s.dtype) for n, s in template.outputs.items()}
        missing = {a for s in outputs.values() for a in s.shape or [] if a not in axes.axes}
        if missing:
            raise NkibenchError(
                f"{ref.path}: the {problem} outputs need axes {sorted(missing)} the case lacks"
            )
        return outputs
    shapes = _probe_outputs(ref, axes.values)
    outputs = {}
    for i, shape in enumerate(shapes):
        dims = []
        for size in shape:
            match = [a for a, v in axes.axes.items() if v == size]
            if len(match) > 1:
                notes.append(f"output dimension of size {size} matched axes {match}; took {match[0]}")
            dims.append(match[0] if match else axes.of(str(size)))
        outputs["out" if len(shapes) == 1 else f"out{i}"] = TensorSpec(shape=dims, dtype="float32")
    return outputs


def _case_roofline(template: Definition | None, tensors: Iterable[TensorSpec], notes: list[str]) -> Roofline:
    """The template's roofline; for a problem without one, its memory traffic only."""
    if template is not None and template.x_roofline is not None:
        return template.x_roofline
    terms = [("*".join(s.shape) if s.shape else "1") for s in tensors if s.shape is not None]
    notes.append("not one of the 14 NKIBench problems: roofline counts memory traffic only (FLOPs unknown)")
    return Roofline(bytes_min=f"4 * ({' + '.join(terms)})")


def _case_checks(
    problem: str, template: Definition | None, inputs: dict[str, TensorSpec]
) -> tuple[Tolerance, dict[str, dict[str, str]] | None]:
    """The tolerance (the problem's relative L2 bound) and the template's adversarial inputs,
    where the case has every input they name."""
    rel_tol = REL_TOL.get(problem, DEFAULT_REL_TOL)
    tolerance = (
        template.x_tolerance if template is not None and template.x_tolerance is not None else Tolerance()
    )
    if tolerance.rel_l2 != rel_tol:
        tolerance = msgspec.structs.replace(tolerance, rel_l2=rel_tol)
    adversarial = None
    if (
        template is not None
        and template.x_adversarial is not None
        and all(n in inputs for inits_ in template.x_adversarial.values() for n in inits_)
    ):
        adversarial = template.x_adversarial
    return tolerance, adversarial


def _case_description(
    problem: str, template: Definition | None, seed: dict[str, Any], case_id: str, ref: ReferenceSource
) -> str:
    desc = (template.description if template and template.description else problem).strip()
    comments = seed.get("comments")
    if comments:
        desc += f"\n{str(comments).strip()}"
    return desc + f"\n(NKIBench {problem}, case {case_id}: {ref.path.name})"


def _with_slices(definition: Definition, problem: str, notes: list[str]) -> Definition:
    """The definition with its reference's slices (`REFERENCE_SLICES`), where its case has
    what they name, or the working memory of its whole reference (`REFERENCE_WORK`)."""
    spec = REFERENCE_SLICES.get(problem)
    if spec is None:
        work = REFERENCE_WORK.get(problem)
        return definition if work is None else msgspec.structs.replace(definition, x_reference_work=work)
    axis, positions, size, work = spec
    names = list(definition.inputs)
    inputs = [names[i] for i in positions if i < len(names)]
    sliced = msgspec.structs.replace(
        definition, x_reference_slices=ReferenceSlices(axis=axis, inputs=inputs, size=size, work=work)
    )
    if definition_errors(sliced):
        notes.append(f"the reference is computed whole: this case lacks the slices of {problem}")
        return definition
    return sliced


def import_case(
    root: Path, problem: str, seed: dict[str, Any], case_id: str, case: dict[str, Any], folder: str
) -> ImportedProblem:
    values = {str(k): int(v) for k, v in (case.get("values") or {}).items()}
    impls = case.get("impls") or []
    if not impls:
        raise NkibenchError(f"{root / 'summary.json'}: {problem} case {case_id} has no implementation")
    notes = [f"{len(impls) - 1} more implementation(s) of the case ignored"] if len(impls) > 1 else []
    ref = ReferenceSource(root / impls[0]["task"])
    for k, v in ref.constants.items():
        if k in values and v != values[k]:
            raise NkibenchError(f"{ref.path}: {k} = {v}, but summary.json says {k} = {values[k]}")
    template = _template(problem)
    axes = _Axes(ref, seed, values, template)
    inputs, inits, scalars = _case_inputs(ref, axes)
    outputs = _case_outputs(ref, problem, axes, template, notes)
    roofline = _case_roofline(template, (*inputs.values(), *outputs.values()), notes)
    tolerance, adversarial = _case_checks(problem, template, inputs)
    source = ref.source.rstrip() + "\n" + _RUN_WRAPPER
    definition = Definition(
        name=folder,
        op_type=template.op_type if template else problem,
        axes={k: AxisConst(value=v, description=axes.descriptions.get(k)) for k, v in axes.axes.items()},
        inputs=inputs,
        outputs=outputs,
        reference=source,
        tags=[
            "origin:nkibench",
            f"nkibench:problem:{problem}",
            f"nkibench:case:{case_id}",
            "status:imported",
        ],
        description=_case_description(problem, template, seed, case_id, ref),
        constraints=axes.constraints,
        x_numpy_reference=source,
        x_tolerance=tolerance,
        x_roofline=roofline,
        x_input_init=inits,
        x_adversarial=adversarial,
    )
    definition = _with_slices(definition, problem, notes)
    errs = definition_errors(definition)
    if errs:
        raise NkibenchError(f"{ref.path}: the imported definition is invalid: {'; '.join(errs)}")
    workload = Workload(
        uuid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"nkibench/{folder}/{json.dumps(values, sort_keys=True)}")),
        inputs={
            n: (ScalarInput(value=scalars[n]) if s.shape is None else RandomInput())
            for n, s in inputs.items()
        },
        x_label=f"nkibench case {case_id}",
    )
    errs = workload_errors(workload, definition)
    if errs:
        raise NkibenchError(f"{ref.path}: the imported workload is invalid: {'; '.join(errs)}")
    kernel, knotes = _kernel_source(root / impls[0]["kernel"])
    return ImportedProblem(
        folder=folder,
        problem=problem,
        case=case_id,
        definition=definition,
        workload=workload,
        kernel=kernel,
        notes=notes + knotes,
    )


# --- a whole folder -----------------------------------------------------------------------------------


def _read_summary(root: Path) -> dict[str, Any]:
    path = root / "summary.json"
    try:
        doc = json.loads(path.read_text())
    except OSError as e:
        raise NkibenchError(f"{path}: cannot read ({e.strerror}); is {root} an NKIBench folder?") from e
    except json.JSONDecodeError as e:
        raise NkibenchError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(doc, dict) or not doc:
        raise NkibenchError(f"{path}: expected an object mapping problem names to their seed and cases")
    return doc


def _read_seed(root: Path, problem: str, entry: dict[str, Any]) -> dict[str, Any]:
    rel = entry.get("seed")
    if not rel:
        return {}
    path = root / rel
    if not path.is_file():
        raise NkibenchError(f"{path}: seed file of {problem} is missing")
    import yaml

    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise NkibenchError(f"{path}: not valid YAML ({e})") from e
    return doc if isinstance(doc, dict) else {}


def read_nkibench(src: str | Path) -> list[ImportedProblem]:
    """Every case of an NKIBench folder as an ImportedProblem (nothing written)."""
    root = Path(src).expanduser().resolve()
    summary = _read_summary(root)
    out = []
    for problem in sorted(summary):
        entry = summary[problem]
        if not isinstance(entry, dict) or not isinstance(entry.get("cases"), dict) or not entry["cases"]:
            raise NkibenchError(f"{root / 'summary.json'}: {problem!r} has no cases")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", problem):
            raise NkibenchError(f"{root / 'summary.json'}: problem name {problem!r} is not an identifier")
        seed = _read_seed(root, problem, entry)
        cases = entry["cases"]
        for case_id in sorted(cases, key=str):
            case = cases[case_id]
            values = {str(k): int(v) for k, v in (case.get("values") or {}).items()}
            folder = problem if len(cases) == 1 else _case_name(problem, values)
            out.append(import_case(root, problem, seed, str(case_id), case, folder))
    return out


def write_suite(
    problems: list[ImportedProblem],
    out: Path,
    *,
    name: str,
    device: str,
    source: str,
    overwrite: bool = False,
) -> Path:
    """Write the problems as a suite folder (replacing an earlier import when `overwrite`)."""
    out = out.expanduser().resolve()
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise NkibenchError(f"{out} exists and is not empty (use --force to replace an earlier import)")
        if not (out / "suite.json").is_file():
            raise NkibenchError(f"{out} is not a suite folder; refusing to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        info = {
            "name": name,
            "description": f"NKIBench ({len(problems)} fp32 NKI problems), imported from {source}",
            "device": device,
            "language": "nki",
            "entry_point": f"{ENTRY_FILE}::{ENTRY}",
            "origin": {
                "format": "nkibench",
                "source": source,
                "imported": time.strftime("%Y-%m-%dT%H:%M:%S"),
            },
        }
        (tmp / "suite.json").write_text(json.dumps(info, indent=2) + "\n")
        for p in problems:
            d = tmp / p.folder
            d.mkdir()
            (d / "definition.json").write_bytes(to_json(p.definition) + b"\n")
            (d / "workload.json").write_bytes(to_json(p.workload) + b"\n")
            (d / ENTRY_FILE).write_text(p.kernel)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def import_nkibench(
    src: str | Path,
    out: str | Path | None = None,
    *,
    name: str = "nkibench",
    device: str = "trn1",
    overwrite: bool = False,
) -> ImportReport:
    """Read an NKIBench folder and write it as the suite `name` (default: in the user suite dir)."""
    import suites

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise NkibenchError(f"suite name {name!r}: use letters, digits, '_', '.', '-'")
    problems = read_nkibench(src)
    target = Path(out) if out is not None else suites.user_suites_dir() / name
    written = write_suite(
        problems,
        target,
        name=name,
        device=device,
        source=str(Path(src).expanduser().resolve()),
        overwrite=overwrite,
    )
    loaded = {p.name for p in suites.load_suite(str(written))}  # what `accelopt run --suite` will read
    if loaded != {p.folder for p in problems}:
        raise NkibenchError(f"{written}: the written suite does not load back ({sorted(loaded)})")
    return ImportReport(
        source=str(src),
        out=str(written),
        suite=name,
        device=device,
        problems=[
            ImportedSummary(
                folder=p.folder,
                problem=p.problem,
                case=p.case,
                axes={k: a.value for k, a in p.definition.axes.items() if isinstance(a, AxisConst)},
                known=p.problem in NKIBENCH_PROBLEMS,
                notes=p.notes,
            )
            for p in problems
        ],
    )


__all__ = [
    "DEFAULT_REL_TOL",
    "NKIBENCH_PROBLEMS",
    "REL_TOL",
    "ImportReport",
    "ImportedProblem",
    "NkibenchError",
    "ReferenceSource",
    "import_case",
    "import_nkibench",
    "read_nkibench",
    "write_suite",
]
