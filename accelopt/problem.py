"""The problem schema: a field-compatible superset of the FlashInfer Trace format.

Definition / Workload / Solution / Trace keep FlashInfer-Bench's field names and JSON shape,
so its loaders accept what we export (they ignore unknown fields). Our extensions are the
`x_` fields: numpy reference, tolerances, roofline expressions, input initialisation and
adversarial cases, and kernel languages beyond FlashInfer-Bench's (`c`, `nki`, any registered one).

Loading checks more than the JSON shape: axes named in shapes exist, references define
`run`, roofline expressions are whitelisted arithmetic of the axes (`parse_expression`).
Every failure is a `ProblemFileError` naming the file and the field.
"""

from __future__ import annotations

import ast
import hashlib
import math
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

DType = Literal[
    "float32",
    "float16",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float4_e2m1",
    "int64",
    "int32",
    "int16",
    "int8",
    "bool",
]
LANGUAGE_NAME = r"[a-z][a-z0-9_+-]{0,31}"
Language = Annotated[str, msgspec.Meta(pattern=f"^{LANGUAGE_NAME}$")]
FLASHINFER_LANGUAGES = ("python", "triton", "cpp", "cuda", "tilelang")
# Names a solution file may use: FlashInfer-Bench's, AccelOpt's built-in ones (here too, so
# loading a problem does not depend on what was imported before), and every language of a
# registered device family (`hardware_agents.families.register_family` calls `add_language_name`).
_language_names = {*FLASHINFER_LANGUAGES, "c", "nki"}
_plugins_loaded = False


def add_language_name(name: str) -> None:
    """Let solution files name the kernel language `name` (see `known_language`)."""
    _language_names.add(name)


def known_language(name: str) -> bool:
    """Is `name` a kernel language a solution file may use? On a miss the installed device
    plugins (`accelopt/plugins.py`) are loaded once, since a plugin registers its language."""
    global _plugins_loaded
    if name not in _language_names and not _plugins_loaded:
        from accelopt.plugins import DEVICE_GROUP, load_plugins, use_device_plugin

        _plugins_loaded = True
        load_plugins(DEVICE_GROUP, use_device_plugin)
    return name in _language_names


class ProblemFileError(ValueError):
    """A problem, workload or solution file that does not match the schema."""


class _Base(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=False):
    pass


class AxisConst(_Base, tag="const", tag_field="type"):
    value: int
    description: str | None = None


class AxisVar(_Base, tag="var", tag_field="type"):
    description: str | None = None


Axis = AxisConst | AxisVar


class TensorSpec(_Base):
    shape: list[str] | None
    dtype: DType
    description: str | None = None


class Tolerance(_Base):
    """Correctness bar: relative L2 error (NKIBench style) and elementwise allclose."""

    rel_l2: float = 2e-5
    atol: float = 1e-4
    rtol: float = 1e-3


class Roofline(_Base):
    """FLOPs and minimal bytes as Python expressions of the axes (e.g. "2*M*N*K")."""

    flops_matmul: str = "0"
    flops_vector: str = "0"
    bytes_min: str = "0"


class ReferenceSlices(_Base):
    """The reference may be computed a slice at a time (hardware_agents/neuron/slices.py): the
    named `inputs` cut along their dimension `axis`, `size` positions at a time, the other
    inputs whole, and every output's dimension `axis` holding the slices side by side (never
    its last: a row of an output stays whole). Where the reference is independent along
    `axis` for those inputs (a batch, the rows of a matmul's lhs, a query block of attention),
    its float64 evaluation then holds one slice's temporaries instead of the whole problem's.
    `work`: the temporaries the reference's formula holds at once, per byte of a slice's
    float64 outputs (its inputs are counted once besides), what the agent declares before a
    profile (hardware_agents/neuron/memory.py)."""

    axis: str
    inputs: list[str]
    size: int
    work: float = 4.0


class Definition(_Base):
    name: str
    op_type: str
    axes: dict[str, Axis]
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    reference: str
    tags: list[str] = []
    description: str | None = None
    constraints: list[str] = []
    # Python source defining `run(*inputs)` with numpy as `np` and the axis values as globals;
    # returns the outputs (a tuple when several). The agents' ground truth, run in float64.
    x_numpy_reference: str | None = None
    x_tolerance: Tolerance | None = None
    x_roofline: Roofline | None = None
    # Input name -> init expression (hardware_agents/pipeline/inputgen.py: "normal(0, 0.05)",
    # "abs(normal(0, 1))", "uniform(-1, 1)", ...); unnamed inputs are normal(0, 1).
    x_input_init: dict[str, str] = {}
    # Adversarial input cases: case name -> {input name -> init expression}; inputs a case
    # does not name keep their x_input_init. None = the default cases of the validity layer
    # (large magnitudes); {} = none.
    x_adversarial: dict[str, dict[str, str]] | None = None
    x_reference_slices: ReferenceSlices | None = None
    # the temporaries the reference's formula holds at once per byte of its float64 outputs,
    # where it is computed whole (a sliced one carries its own `work`): what the agent declares
    # (hardware_agents/neuron/memory.py); None: the agent's default
    x_reference_work: float | None = None

    def shape_of(self, name: str, axes: dict[str, int]) -> tuple[int, ...] | None:
        """Concrete shape of an input or output (None for a scalar) at these axis values."""
        spec = self.inputs.get(name) or self.outputs.get(name)
        if spec is None:
            raise KeyError(name)
        if spec.shape is None:
            return None
        return tuple(int(axes[a]) for a in spec.shape)


class RandomInput(_Base, tag="random", tag_field="type"):
    pass


class ScalarInput(_Base, tag="scalar", tag_field="type"):
    value: int | float | bool


class SafetensorsInput(_Base, tag="safetensors", tag_field="type"):
    path: str
    tensor_key: str


InputSpec = RandomInput | ScalarInput | SafetensorsInput


class Workload(_Base):
    uuid: str
    axes: dict[str, int] = {}
    inputs: dict[str, InputSpec] = {}
    x_label: str | None = None


class SourceFile(_Base):
    path: str
    content: str


class BuildSpec(_Base):
    language: Language
    target_hardware: list[str]
    entry_point: str
    dependencies: list[str] = []
    destination_passing_style: bool = True
    binding: str | None = None


class Solution(_Base):
    name: str
    definition: str
    author: str
    spec: BuildSpec
    sources: list[SourceFile]
    description: str | None = None

    def entry_file(self) -> SourceFile:
        path = self.spec.entry_point.split("::", 1)[0]
        for src in self.sources:
            if src.path == path:
                return src
        raise ProblemFileError(f"solution {self.name}: entry file {path!r} not among its sources")

    @property
    def entry_symbol(self) -> str:
        return self.spec.entry_point.split("::", 1)[1]

    def content_hash(self) -> str:
        """SHA-1 over everything but the name (FlashInfer-Bench HEAD semantics)."""
        h = hashlib.sha1()
        for part in (
            self.definition,
            self.spec.language,
            self.spec.entry_point,
            str(self.spec.binding),
            ",".join(self.spec.dependencies),
        ):
            h.update(part.encode())
            h.update(b"\0")
        for src in sorted(self.sources, key=lambda s: s.path):
            h.update(src.path.encode())
            h.update(b"\0")
            h.update(src.content.encode())
            h.update(b"\0")
        return h.hexdigest()


def one_file_solution(
    definition: str,
    content: str,
    *,
    entry_point: str = "kernel.c::kernel",
    language: Language = "c",
    device: str = "cpu",
    name: str | None = None,
    author: str = "baseline",
    description: str | None = None,
    path: str | None = None,
) -> Solution:
    """A solution whose code is one file, `path` or else the one its entry point
    (`file::symbol`) names: a suite's baseline, and the toy problems of tests and synthetic logs."""
    return Solution(
        name=name or f"{definition}_baseline",
        definition=definition,
        author=author,
        spec=BuildSpec(language=language, target_hardware=[device], entry_point=entry_point),
        sources=[SourceFile(path=path or entry_point.split("::", 1)[0], content=content)],
        description=description,
    )


class Environment(_Base):
    hardware: str
    libs: dict[str, str] = {}


class Correctness(_Base):
    max_relative_error: float
    max_absolute_error: float
    extra: dict[str, Any] | None = None


class Performance(_Base):
    latency_ms: float
    reference_latency_ms: float = 0.0
    speedup_factor: float = 0.0


EvaluationStatus = Literal[
    "PASSED",
    "INCORRECT_SHAPE",
    "INCORRECT_NUMERICAL",
    "INCORRECT_DTYPE",
    "RUNTIME_ERROR",
    "COMPILE_ERROR",
    "TIMEOUT",
]


class Evaluation(_Base):
    status: EvaluationStatus
    environment: Environment
    timestamp: str
    log: str = ""
    correctness: Correctness | None = None
    performance: Performance | None = None
    x_pct_peak: float | None = None
    x_bound: str | None = None


class Trace(_Base):
    definition: str
    workload: Workload
    solution: str | None = None
    evaluation: Evaluation | None = None
    # A correct but untimed run (no device here): FlashInfer-Bench has no status for it, so
    # `evaluation` stays None (FlashInfer-Bench's "not evaluated yet") and ours goes here.
    x_untimed: Evaluation | None = None


class Problem(_Base):
    """One optimization target: a definition at one workload, with its baseline kernel."""

    definition: Definition
    workload: Workload
    baseline: Solution
    # More workloads of the same definition at which correctness is also checked (smaller
    # shapes). An agent that cannot run `workload` itself in reasonable time (the Triton
    # interpreter on a host without a GPU) checks only these; timing and % of peak are
    # always at `workload`.
    check_workloads: list[Workload] = []

    @property
    def name(self) -> str:
        return self.definition.name

    def axis_values(self) -> dict[str, int]:
        values = {k: a.value for k, a in self.definition.axes.items() if isinstance(a, AxisConst)}
        values.update(self.workload.axes)
        return values

    def content_hash(self) -> str:
        return hashlib.sha256(msgspec.json.encode(self)).hexdigest()

    def input_shapes(self) -> dict[str, tuple[int, ...] | None]:
        axes = self.axis_values()
        return {n: self.definition.shape_of(n, axes) for n in self.definition.inputs}

    def output_shapes(self) -> dict[str, tuple[int, ...] | None]:
        axes = self.axis_values()
        return {n: self.definition.shape_of(n, axes) for n in self.definition.outputs}


# --- whitelisted arithmetic (roofline expressions) -------------------------------------------


class ExpressionError(ValueError):
    """An expression outside the whitelist, or naming an unknown axis."""


_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a**b,
}


def parse_expression(expr: str) -> ast.Expression:
    """Parse an arithmetic expression: numbers, names, + - * / ** and parentheses only.

    Problem files come from outside the program, so their expressions never reach `eval`.
    """
    if not isinstance(expr, str) or len(expr) > 2000:
        raise ExpressionError("expression must be a string of at most 2000 characters")
    try:
        tree = ast.parse(expr.strip() or "0", mode="eval")
    except SyntaxError as e:
        raise ExpressionError(f"{expr!r}: not an arithmetic expression ({e.msg})") from None
    nodes = list(ast.walk(tree))
    if len(nodes) > 400:
        raise ExpressionError(f"{expr!r}: too long")
    for node in nodes:
        if isinstance(
            node, ast.Expression | ast.Name | ast.Load | ast.UAdd | ast.USub | ast.BinOp | ast.UnaryOp
        ):
            continue
        if isinstance(node, ast.operator) and type(node) in _BINOPS:
            continue
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            continue
        raise ExpressionError(
            f"{expr!r}: {type(node).__name__} is not allowed "
            "(only numbers, axis names, + - * / ** and parentheses)"
        )
    return tree


def expression_names(expr: str) -> set[str]:
    return {n.id for n in ast.walk(parse_expression(expr)) if isinstance(n, ast.Name)}


def eval_expression(expr: str, names: dict[str, int] | dict[str, float]) -> float:
    """Evaluate a whitelisted expression in floats (overflow raises instead of hanging)."""
    tree = parse_expression(expr)

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise ExpressionError(f"{expr!r}: unknown name {node.id!r}")
            return float(names[node.id])
        if isinstance(node, ast.UnaryOp):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            try:
                out = _BINOPS[type(node.op)](a, b)
            except (OverflowError, ZeroDivisionError) as e:
                raise ExpressionError(f"{expr!r}: {e}") from None
            if isinstance(out, complex) or not math.isfinite(out):
                raise ExpressionError(f"{expr!r}: result is not a finite real number")
            return out
        raise ExpressionError(f"{expr!r}: unexpected {type(node).__name__}")  # pragma: no cover

    return ev(tree)


# --- semantic validation -------------------------------------------------------------------


def _defines_run(source: str) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    return any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in tree.body)


def definition_errors(d: Definition) -> list[str]:
    """What is wrong with a definition beyond its JSON shape, each as `field: reason`."""
    errs: list[str] = []
    for kind, tensors in (("inputs", d.inputs), ("outputs", d.outputs)):
        for name, spec in tensors.items():
            for a in spec.shape or []:
                if a not in d.axes:
                    errs.append(f"{kind}.{name}.shape: axis {a!r} is not in axes")
    for name in set(d.inputs) & set(d.outputs):
        errs.append(f"outputs.{name}: also an input name")
    if not d.outputs:
        errs.append("outputs: at least one output is required")
    if not _defines_run(d.reference):
        errs.append("reference: must be Python source defining a top-level `run`")
    if d.x_numpy_reference is not None and not _defines_run(d.x_numpy_reference):
        errs.append("x_numpy_reference: must be Python source defining a top-level `run`")
    if d.x_roofline is not None:
        for field in ("flops_matmul", "flops_vector", "bytes_min"):
            try:
                unknown = expression_names(getattr(d.x_roofline, field)) - set(d.axes)
            except ExpressionError as e:
                errs.append(f"x_roofline.{field}: {e}")
                continue
            if unknown:
                errs.append(f"x_roofline.{field}: unknown axes {sorted(unknown)}")
    for name in d.x_input_init:
        if name not in d.inputs:
            errs.append(f"x_input_init.{name}: not an input")
    for case, inits in (d.x_adversarial or {}).items():
        for name in inits:
            if name not in d.inputs:
                errs.append(f"x_adversarial.{case}.{name}: not an input")
    errs += _slices_errors(d)
    if d.x_reference_work is not None and d.x_reference_work <= 0:
        errs.append("x_reference_work: must be > 0")
    return errs


def _slices_errors(d: Definition) -> list[str]:
    sl = d.x_reference_slices
    if sl is None:
        return []
    errs = []
    if sl.axis not in d.axes:
        errs.append(f"x_reference_slices.axis: {sl.axis!r} is not in axes")
    if sl.size < 1 or sl.work <= 0:
        errs.append("x_reference_slices: size must be >= 1 and work > 0")
    if not sl.inputs:
        errs.append("x_reference_slices.inputs: at least one input is sliced")
    for name in sl.inputs:
        spec = d.inputs.get(name)
        if spec is None or sl.axis not in (spec.shape or []):
            errs.append(f"x_reference_slices.inputs.{name}: not an input with axis {sl.axis!r}")
    for name, spec in d.outputs.items():
        shape = spec.shape or []
        if sl.axis not in shape or shape[-1] == sl.axis:
            errs.append(f"x_reference_slices: output {name} must have axis {sl.axis!r}, not as its last")
    return errs


def solution_errors(s: Solution) -> list[str]:
    errs: list[str] = []
    if s.spec.entry_point.count("::") != 1:
        errs.append("spec.entry_point: must be '<file>::<function>'")
    paths = [src.path for src in s.sources]
    if not paths:
        errs.append("sources: at least one source file is required")
    if len(set(paths)) != len(paths):
        errs.append("sources: duplicate paths")
    for p in paths:
        if p.startswith("/") or ".." in p.split("/"):
            errs.append(f"sources.{p}: paths must be relative and stay inside the solution")
    if s.spec.entry_point.split("::", 1)[0] not in paths:
        errs.append("spec.entry_point: entry file is not among the sources")
    if not known_language(s.spec.language):
        errs.append(
            f"spec.language: unknown kernel language {s.spec.language!r}; known: "
            f"{', '.join(sorted(_language_names))}"
        )
    return errs


def workload_errors(w: Workload, d: Definition) -> list[str]:
    errs: list[str] = []
    for name, axis in d.axes.items():
        if isinstance(axis, AxisVar) and name not in w.axes:
            errs.append(f"axes.{name}: value missing for var axis of {d.name}")
    for name, value in w.axes.items():
        if name not in d.axes:
            errs.append(f"axes.{name}: not an axis of {d.name}")
        elif value < 0:
            errs.append(f"axes.{name}: must be >= 0")
    for name in w.inputs:
        if name not in d.inputs:
            errs.append(f"inputs.{name}: not an input of {d.name}")
    return errs


def _raise_if(path: str | Path, kind: str, errs: list[str]) -> None:
    if errs:
        raise ProblemFileError(f"{path}: invalid {kind}: " + "; ".join(errs))


def _decode_file(path: str | Path, kind: type, *, lines: bool = False) -> Any:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ProblemFileError(f"{p}: cannot read ({e.strerror})") from e
    try:
        if lines:
            return [msgspec.json.decode(line, type=kind) for line in data.splitlines() if line.strip()]
        return msgspec.json.decode(data, type=kind)
    except msgspec.ValidationError as e:
        raise ProblemFileError(f"{p}: invalid {kind.__name__}: {e}") from e
    except msgspec.DecodeError as e:
        raise ProblemFileError(f"{p}: not valid JSON: {e}") from e


def load_definition(path: str | Path) -> Definition:
    d = _decode_file(path, Definition)
    _raise_if(path, "Definition", definition_errors(d))
    return d


def load_solution(path: str | Path) -> Solution:
    s = _decode_file(path, Solution)
    _raise_if(path, "Solution", solution_errors(s))
    return s


def load_workload(path: str | Path, definition: Definition | None = None) -> Workload:
    """A Workload JSON object, or a FlashInfer workload line (a Trace with no solution)."""
    p = Path(path)
    try:
        raw = msgspec.json.decode(p.read_bytes())
    except OSError as e:
        raise ProblemFileError(f"{p}: cannot read ({e.strerror})") from e
    except msgspec.DecodeError as e:
        raise ProblemFileError(f"{p}: not valid JSON: {e}") from e
    kind: type = Trace if isinstance(raw, dict) and "workload" in raw else Workload
    try:
        obj: Trace | Workload = msgspec.convert(raw, kind)
    except msgspec.ValidationError as e:
        raise ProblemFileError(f"{p}: invalid {kind.__name__}: {e}") from e
    w = obj.workload if isinstance(obj, Trace) else obj
    if definition is not None:
        _raise_if(path, "Workload", workload_errors(w, definition))
    return w


def load_traces(path: str | Path) -> list[Trace]:
    """Read a JSONL file of traces (workload files are traces with no solution)."""
    return _decode_file(path, Trace, lines=True)


def to_json(obj: msgspec.Struct) -> bytes:
    return msgspec.json.format(msgspec.json.encode(obj), indent=2)
