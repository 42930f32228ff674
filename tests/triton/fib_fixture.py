"""A FlashInfer-Bench trace-set folder written by hand (raw JSON text, as FlashInfer-Bench's
pydantic models dump it), and pydantic models that load folders the way FlashInfer-Bench's
`TraceSet.from_path` does (same field names, enums and validators, unknown fields ignored),
to check that what we export is accepted."""

from __future__ import annotations

import ast
import json
import math
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

RMSNORM_REF = (
    "import torch\n\n@torch.no_grad()\ndef run(hidden_states, weight):\n    _, hidden_size = hidden_states.shape\n"
    "    assert hidden_size == 64\n    x = hidden_states.to(torch.float32)\n"
    "    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6)\n"
    "    y = (x * inv_rms) * weight.to(torch.float32)\n    return y.to(hidden_states.dtype)")
GEMM_REF = "import torch\n\ndef run(A, B):\n    C = torch.matmul(A, B.T)\n    return C"
TRITON_RMSNORM = '''import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, w_ptr, o_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + offs).to(tl.float32)
    w = tl.load(w_ptr + offs).to(tl.float32)
    y = x * tl.rsqrt(tl.sum(x * x, axis=0) / H + 1e-6) * w
    tl.store(o_ptr + row * H + offs, y.to(tl.bfloat16))


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _k[(hidden_states.shape[0],)](hidden_states, weight, out, H=hidden_states.shape[1])
    return out
'''
TORCH_GEMM = "import torch\n\n\ndef run(A, B):\n    return torch.matmul(A, B.T)\n"

DEFINITIONS = {
    "definitions/rmsnorm/rmsnorm_h64.json": {
        "name": "rmsnorm_h64", "op_type": "rmsnorm",
        "description": "Root Mean Square Normalization, hidden 64. Epsilon is fixed at 1e-6.",
        "tags": ["status:verified", "model:tiny"],
        "axes": {"batch_size": {"type": "var", "description": None},
                 "hidden_size": {"type": "const", "value": 64, "description": None}},
        "constraints": [],
        "inputs": {"hidden_states": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16", "description": None},
                   "weight": {"shape": ["hidden_size"], "dtype": "bfloat16", "description": None}},
        "outputs": {"output": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16", "description": None}},
        "reference": RMSNORM_REF,
        "future_field": {"added": "by a newer FlashInfer-Bench"},
    },
    "definitions/gemm/gemm_n32_k48.json": {
        "name": "gemm_n32_k48", "op_type": "gemm", "description": "C = A @ B.T", "tags": [],
        "axes": {"M": {"type": "var", "description": None}, "N": {"type": "const", "value": 32, "description": None},
                 "K": {"type": "const", "value": 48, "description": None}},
        "constraints": [],
        "inputs": {"A": {"shape": ["M", "K"], "dtype": "float16", "description": None},
                   "B": {"shape": ["N", "K"], "dtype": "float16", "description": None}},
        "outputs": {"C": {"shape": ["M", "N"], "dtype": "float16", "description": None}},
        "reference": GEMM_REF,
    },
}
BLOB = "blob/workloads/rmsnorm/rmsnorm_h64/rmsnorm_h64_7f3a.safetensors"


def _workload(definition: str, uuid: str, axes: dict[str, int], inputs: dict[str, Any]) -> dict[str, Any]:
    return {"definition": definition, "workload": {"uuid": uuid, "axes": axes, "inputs": inputs},
            "solution": None, "evaluation": None}


WORKLOADS = {
    "workloads/rmsnorm/rmsnorm_h64.jsonl": [
        _workload("rmsnorm_h64", "w-r-24", {"batch_size": 24},
                  {"hidden_states": {"type": "random"}, "weight": {"type": "random"}}),
        _workload("rmsnorm_h64", "w-r-2", {"batch_size": 2}, {"hidden_states": {"type": "random"}}),
        _workload("rmsnorm_h64", "w-r-5", {"batch_size": 5},
                  {"hidden_states": {"type": "safetensors", "path": BLOB, "tensor_key": "hidden_states"},
                   "weight": {"type": "random"}}),
        _workload("rmsnorm_h64", "w-r-9", {"batch_size": 9}, {}),
    ],
    "workloads/gemm/gemm_n32_k48.jsonl": [
        _workload("gemm_n32_k48", "w-g-3", {"M": 3}, {"A": {"type": "random"}, "B": {"type": "random"}}),
        _workload("gemm_n32_k48", "w-g-40", {"M": 40}, {"A": {"type": "random"}, "B": {"type": "random"}}),
    ],
}


def _solution(name: str, definition: str, author: str, language: str, entry: str, dps: bool, path: str,
              content: str, **extra: Any) -> dict[str, Any]:
    spec = {"language": language, "target_hardware": ["NVIDIA_H100"], "entry_point": entry, "dependencies": [],
            "destination_passing_style": dps, **extra}
    return {"name": name, "definition": definition, "author": author, "description": None, "spec": spec,
            "sources": [{"path": path, "content": content}]}


SOLUTIONS = {
    "solutions/baseline/rmsnorm/rmsnorm_h64/rmsnorm_h64_triton_v1.json": _solution(
        "rmsnorm_h64_triton_v1", "rmsnorm_h64", "baseline", "triton", "kernel.py::run", False, "kernel.py",
        TRITON_RMSNORM, binding=None),
    "solutions/gpt-x/rmsnorm/rmsnorm_h64/rmsnorm_h64_cuda_v2.json": _solution(
        "rmsnorm_h64_cuda_v2", "rmsnorm_h64", "gpt-x", "cuda", "main.cpp::run", True, "main.cpp",
        "// cuda source\n", binding="torch", build_commands=["nvcc ..."]),
    "solutions/baseline/gemm/gemm_n32_k48/gemm_n32_k48_torch.json": _solution(
        "gemm_n32_k48_torch", "gemm_n32_k48", "baseline", "python", "main.py::run", False, "main.py", TORCH_GEMM),
}

_ENV = {"hardware": "NVIDIA H100 80GB HBM3", "libs": {"torch": "2.9.0", "triton": "3.5.0", "cuda": "12.8"}}
TRACES = {
    "traces/baseline/rmsnorm/rmsnorm_h64.jsonl": [
        {"definition": "rmsnorm_h64", "workload": WORKLOADS["workloads/rmsnorm/rmsnorm_h64.jsonl"][0]["workload"],
         "solution": "rmsnorm_h64_triton_v1",
         "evaluation": {"status": "PASSED", "environment": _ENV, "timestamp": "2026-05-01T12:00:00", "log": "",
                        "correctness": {"max_relative_error": 0.0039, "max_absolute_error": 0.0078, "extra": None},
                        "performance": {"latency_ms": 0.0041, "reference_latency_ms": 0.031,
                                        "speedup_factor": 7.56, "profile": None}}},
        {"definition": "rmsnorm_h64", "workload": WORKLOADS["workloads/rmsnorm/rmsnorm_h64.jsonl"][1]["workload"],
         "solution": "rmsnorm_h64_cuda_v2",
         "evaluation": {"status": "INCORRECT_NUMERICAL", "environment": _ENV, "timestamp": "2026-05-01T12:01:00",
                        "log": "nan in output",
                        "correctness": {"max_relative_error": "NaN", "max_absolute_error": "Infinity",
                                        "extra": {"matched_ratio": 0.5}},
                        "performance": None}},
        {"definition": "rmsnorm_h64", "workload": WORKLOADS["workloads/rmsnorm/rmsnorm_h64.jsonl"][3]["workload"],
         "solution": "rmsnorm_h64_cuda_v2",
         "evaluation": {"status": "RUNTIME_ERROR", "environment": _ENV, "timestamp": "2026-05-01T12:02:00",
                        "log": "CUDA error: illegal memory access", "correctness": None, "performance": None}},
    ],
}


def write_trace_set(root: Path, *, with_blob: bool = True) -> Path:
    """The hand-written folder (pretty JSON files, compact JSONL lines, one blob)."""
    for rel, obj in {**DEFINITIONS, **SOLUTIONS}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(json.dumps(obj, indent=2))
    for rel, objs in {**WORKLOADS, **TRACES}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("".join(json.dumps(o) + "\n" for o in objs))
    if with_blob:
        from safetensors.torch import save_file

        (root / BLOB).parent.mkdir(parents=True, exist_ok=True)
        gen = torch.Generator().manual_seed(0)
        save_file({"hidden_states": torch.randn(5, 64, generator=gen).to(torch.bfloat16)}, str(root / BLOB))
    return root


def read_tree(root: Path) -> dict[str, Any]:
    """Every JSON/JSONL file under root, parsed (JSONL as a list of lines)."""
    out: dict[str, Any] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.suffix == ".json":
            out[rel] = json.loads(p.read_text())
        elif p.suffix == ".jsonl":
            out[rel] = [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
        elif p.is_file():
            out[rel] = p.read_bytes()
    return out


# --- FlashInfer-Bench's data model, as its loaders validate (pydantic, extra fields ignored) ----

class _M(BaseModel):
    model_config = ConfigDict(extra="ignore")


class DType(StrEnum):
    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"
    float8_e4m3fn = "float8_e4m3fn"
    float8_e5m2 = "float8_e5m2"
    float4_e2m1 = "float4_e2m1"
    int64 = "int64"
    int32 = "int32"
    int16 = "int16"
    int8 = "int8"
    bool = "bool"


class AxisConst(_M):
    type: Literal["const"]
    value: int = Field(ge=0)
    description: str | None = None


class AxisVar(_M):
    type: Literal["var"]
    description: str | None = None


class TensorSpec(_M):
    shape: list[str] | None
    dtype: DType
    description: str | None = None


class FibDefinition(_M):
    name: str = Field(min_length=1)
    op_type: str = Field(min_length=1)
    axes: dict[str, AxisConst | AxisVar]
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    reference: str
    tags: list[str] = []
    description: str | None = None
    constraints: list[str] = []

    @model_validator(mode="after")
    def _check(self) -> FibDefinition:
        tree = ast.parse(self.reference)
        assert any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in tree.body), "reference needs run"
        for spec in (*self.inputs.values(), *self.outputs.values()):
            for a in spec.shape or []:
                assert a in self.axes, f"unknown axis {a}"
        assert not set(self.inputs) & set(self.outputs)
        for c in self.constraints:
            ast.parse(c)
        return self


class RandomInput(_M):
    type: Literal["random"]


class ScalarInput(_M):
    type: Literal["scalar"]
    value: int | float | bool


class SafetensorsInput(_M):
    type: Literal["safetensors"]
    path: str
    tensor_key: str


class FibWorkload(_M):
    uuid: str
    axes: dict[str, int]
    inputs: dict[str, RandomInput | ScalarInput | SafetensorsInput]


class BuildSpec(_M):
    language: Literal["python", "triton", "cpp", "cuda", "tilelang"]
    target_hardware: list[str] = Field(min_length=1)
    entry_point: str
    dependencies: list[str] = []
    destination_passing_style: bool = True
    binding: Literal["tvm-ffi", "torch"] | None = None

    @field_validator("entry_point")
    @classmethod
    def _entry(cls, v: str) -> str:
        assert v.count("::") == 1
        return v


class SourceFile(_M):
    path: str
    content: str


class FibSolution(_M):
    name: str
    definition: str
    author: str
    spec: BuildSpec
    sources: list[SourceFile] = Field(min_length=1)
    description: str | None = None

    @model_validator(mode="after")
    def _check(self) -> FibSolution:
        paths = [s.path for s in self.sources]
        assert len(set(paths)) == len(paths) and self.spec.entry_point.split("::")[0] in paths
        assert all(not p.startswith("/") and ".." not in p.split("/") for p in paths)
        return self


class Correctness(_M):
    model_config = ConfigDict(extra="ignore", ser_json_inf_nan="strings")
    max_relative_error: float = 0.0
    max_absolute_error: float = 0.0
    extra: dict[str, Any] | None = None

    @field_validator("max_relative_error", "max_absolute_error")
    @classmethod
    def _nonneg(cls, v: float) -> float:
        assert math.isnan(v) or v >= 0
        return v


class Performance(_M):
    latency_ms: float = Field(default=0.0, ge=0.0)
    reference_latency_ms: float = Field(default=0.0, ge=0.0)
    speedup_factor: float = Field(default=0.0, ge=0.0)


class Environment(_M):
    hardware: str = Field(min_length=1)
    libs: dict[str, str] = {}


class Evaluation(_M):
    status: Literal["PASSED", "INCORRECT_SHAPE", "INCORRECT_NUMERICAL", "INCORRECT_DTYPE", "RUNTIME_ERROR",
                    "COMPILE_ERROR", "TIMEOUT"]
    environment: Environment
    timestamp: str = Field(min_length=1)
    log: str = ""
    correctness: Correctness | None = None
    performance: Performance | None = None

    @model_validator(mode="after")
    def _check(self) -> Evaluation:
        if self.status == "PASSED":
            assert self.correctness is not None and self.performance is not None
        elif self.status == "INCORRECT_NUMERICAL":
            assert self.correctness is not None and self.performance is None
        else:
            assert self.correctness is None and self.performance is None
        return self


class FibTrace(_M):
    definition: str = Field(min_length=1)
    workload: FibWorkload
    solution: str | None = None
    evaluation: Evaluation | None = None


def load_like_flashinfer(root: Path) -> dict[str, Any]:
    """What FlashInfer-Bench's `TraceSet.from_path` does, with the models above."""
    definitions = {}
    for p in sorted((root / "definitions").rglob("*.json")):
        d = FibDefinition.model_validate_json(p.read_text())
        assert d.name not in definitions, f"duplicate definition {d.name}"
        definitions[d.name] = d
    solutions = {}
    for p in sorted((root / "solutions").rglob("*.json")):
        s = FibSolution.model_validate_json(p.read_text())
        assert s.name not in solutions, f"duplicate solution {s.name}"
        solutions[s.name] = s
    workloads, traces = [], []
    for p in sorted((root / "workloads").rglob("*.jsonl")):
        for line in p.read_text().splitlines():
            t = FibTrace.model_validate_json(line)
            assert t.solution is None and t.evaluation is None
            workloads.append(t)
    for p in sorted((root / "traces").rglob("*.jsonl")):
        for line in p.read_text().splitlines():
            t = FibTrace.model_validate_json(line)
            assert not (t.solution is None and t.evaluation is None)
            traces.append(t)
    return {"definitions": definitions, "solutions": solutions, "workloads": workloads, "traces": traces}
