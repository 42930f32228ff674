"""The problem schema: a field-compatible superset of the FlashInfer Trace format.

Definition / Workload / Solution / Trace keep FlashInfer-Bench's field names and JSON shape,
so its loaders accept what we export (they ignore unknown fields). Our extensions are the
`x_` fields: numpy reference, tolerances, roofline expressions, and the languages `c` and
`nki`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

import msgspec

DType = Literal[
    "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1",
    "int64", "int32", "int16", "int8", "bool",
]
Language = Literal["python", "triton", "cpp", "cuda", "tilelang", "c", "nki"]


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
    x_numpy_reference: str | None = None
    x_tolerance: Tolerance | None = None
    x_roofline: Roofline | None = None
    x_input_init: dict[str, str] = {}


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
        for part in (self.definition, self.spec.language, self.spec.entry_point,
                     str(self.spec.binding), ",".join(self.spec.dependencies)):
            h.update(part.encode())
            h.update(b"\0")
        for src in sorted(self.sources, key=lambda s: s.path):
            h.update(src.path.encode())
            h.update(b"\0")
            h.update(src.content.encode())
            h.update(b"\0")
        return h.hexdigest()


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
    "PASSED", "INCORRECT_SHAPE", "INCORRECT_NUMERICAL", "INCORRECT_DTYPE",
    "RUNTIME_ERROR", "COMPILE_ERROR", "TIMEOUT",
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


class Problem(_Base):
    """One optimization target: a definition at one workload, with its baseline kernel."""

    definition: Definition
    workload: Workload
    baseline: Solution

    @property
    def name(self) -> str:
        return self.definition.name

    def axis_values(self) -> dict[str, int]:
        values = {k: a.value for k, a in self.definition.axes.items() if isinstance(a, AxisConst)}
        values.update(self.workload.axes)
        return values

    def content_hash(self) -> str:
        return hashlib.sha256(msgspec.json.encode(self)).hexdigest()


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
    return _decode_file(path, Definition)


def load_solution(path: str | Path) -> Solution:
    return _decode_file(path, Solution)


def load_traces(path: str | Path) -> list[Trace]:
    """Read a JSONL file of traces (workload files are traces with no solution)."""
    return _decode_file(path, Trace, lines=True)


def to_json(obj: msgspec.Struct) -> bytes:
    return msgspec.json.format(msgspec.json.encode(obj), indent=2)
