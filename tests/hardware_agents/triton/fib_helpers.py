"""FlashInfer-Bench trace sets built the natural way, with FlashInfer-Bench's own classes and
writers (the real `flashinfer-bench==0.1.2` package, installed by the bootstrap with
--no-deps): definitions and solutions saved by `save_json_file` (pydantic's
`exclude_unset=True`, so an axis's `type` and a solution's `destination_passing_style` that
were never set are left out), workloads and blobs through `TraceSet.add_workload_traces` /
`add_workload_blob_tensor`, evaluated traces through `TraceSet.add_traces`, and one workload
line dumped with `exclude_unset` (inputs written as `{}`). `load_with_flashinfer` is
FlashInfer-Bench's `TraceSet.from_path`, which runs all of its validators."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import flashinfer_bench as fib
import torch
from flashinfer_bench.data import save_json_file

RMSNORM_REF = (
    "import torch\n\n@torch.no_grad()\ndef run(hidden_states, weight):\n    _, hidden_size = hidden_states.shape\n"
    "    assert hidden_size == 64\n    x = hidden_states.to(torch.float32)\n"
    "    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6)\n"
    "    y = (x * inv_rms) * weight.to(torch.float32)\n    return y.to(hidden_states.dtype)"
)
GEMM_REF = "import torch\n\ndef run(A, B):\n    C = torch.matmul(A, B.T)\n    return C"
# In the style of the published FlashInfer-Bench Triton kernels: value-returning, GPU-minded
# (a torch fallback when CUDA is absent, device="cuda" allocations, is_cuda asserts).
TRITON_RMSNORM = """import torch
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
    if not torch.cuda.is_available():
        x = hidden_states.float()
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()).to(hidden_states.dtype)
    assert hidden_states.is_cuda
    out = torch.empty(hidden_states.shape, dtype=hidden_states.dtype, device="cuda")
    _k[(hidden_states.shape[0],)](hidden_states, weight, out, H=hidden_states.shape[1])
    return out
"""
TORCH_GEMM = "import torch\n\n\ndef run(A, B):\n    return torch.matmul(A, B.T)\n"
ENV = fib.Environment(hardware="NVIDIA H100 80GB HBM3", libs={"torch": "2.9.0", "triton": "3.5.0"})


def definitions() -> list[fib.Definition]:
    rms = fib.Definition(
        name="rmsnorm_h64",
        op_type="rmsnorm",
        tags=["status:verified"],
        description="Root Mean Square Normalization, hidden 64. Epsilon is fixed at 1e-6.",
        axes={"batch_size": fib.AxisVar(), "hidden_size": fib.AxisConst(value=64)},
        inputs={
            "hidden_states": fib.TensorSpec(shape=["batch_size", "hidden_size"], dtype="bfloat16"),
            "weight": fib.TensorSpec(shape=["hidden_size"], dtype="bfloat16"),
        },
        outputs={"output": fib.TensorSpec(shape=["batch_size", "hidden_size"], dtype="bfloat16")},
        reference=RMSNORM_REF,
    )
    gemm = fib.Definition(
        name="gemm_n32_k48",
        op_type="gemm",
        description="C = A @ B.T",
        axes={
            "M": fib.AxisVar(description="rows"),
            "N": fib.AxisConst(value=32),
            "K": fib.AxisConst(value=48),
        },
        inputs={
            "A": fib.TensorSpec(shape=["M", "K"], dtype="float16"),
            "B": fib.TensorSpec(shape=["N", "K"], dtype="float16"),
        },
        outputs={"C": fib.TensorSpec(shape=["M", "N"], dtype="float16")},
        reference=GEMM_REF,
    )
    return [rms, gemm]


def solutions() -> list[fib.Solution]:
    def sol(
        name: str,
        definition: str,
        author: str,
        language: str,
        entry: str,
        path: str,
        content: str,
        **spec: Any,
    ) -> fib.Solution:
        return fib.Solution(
            name=name,
            definition=definition,
            author=author,
            spec=fib.BuildSpec(language=language, target_hardware=["NVIDIA_H100"], entry_point=entry, **spec),
            sources=[fib.SourceFile(path=path, content=content)],
        )

    return [
        # no destination_passing_style (as the published kernels of an older release): value-returning
        sol(
            "rmsnorm_h64_triton_v1",
            "rmsnorm_h64",
            "baseline",
            "triton",
            "kernel.py::run",
            "kernel.py",
            TRITON_RMSNORM,
        ),
        sol(
            "rmsnorm_h64_cuda_v2",
            "rmsnorm_h64",
            "gpt-x",
            "cuda",
            "main.cpp::run",
            "main.cpp",
            "// cuda source\n",
            binding="torch",
        ),
        sol(
            "gemm_n32_k48_torch",
            "gemm_n32_k48",
            "baseline",
            "python",
            "main.py::run",
            "main.py",
            TORCH_GEMM,
            destination_passing_style=False,
        ),
    ]


def write_fib_set(root: Path, *, with_blob: bool = True, rows: tuple[int, ...] = (24, 2, 5, 9)) -> Path:
    """A trace set written by FlashInfer-Bench itself (see the module doc)."""
    ts = fib.TraceSet.from_path(str(root))
    for d in definitions():
        save_json_file(d, root / "definitions" / d.op_type / f"{d.name}.json")
        ts.definitions[d.name] = d
    for s in solutions():
        op = ts.definitions[s.definition].op_type
        save_json_file(s, root / "solutions" / s.author / op / s.definition / f"{s.name}.json")
    blob_rows = rows[2]
    workloads = []
    for n in rows:
        inputs: dict[str, Any] = {"hidden_states": fib.RandomInput(), "weight": fib.RandomInput()}
        if n == blob_rows:
            gen = torch.Generator().manual_seed(0)
            tensor = torch.randn(n, 64, generator=gen).to(torch.bfloat16)
            path = ts.add_workload_blob_tensor("rmsnorm_h64", f"w-r-{n}", {"hidden_states": tensor})
            if not with_blob:
                (root / path).unlink()
            inputs["hidden_states"] = fib.SafetensorsInput(path=path, tensor_key="hidden_states")
        workloads.append(
            fib.Trace(
                definition="rmsnorm_h64",
                workload=fib.Workload(uuid=f"w-r-{n}", axes={"batch_size": n}, inputs=inputs),
            )
        )
    ts.add_workload_traces(workloads)
    gemm = [
        fib.Trace(
            definition="gemm_n32_k48",
            workload=fib.Workload(
                uuid=f"w-g-{m}", axes={"M": m}, inputs={"A": fib.RandomInput(), "B": fib.RandomInput()}
            ),
        )
        for m in (3, 40)
    ]
    ts.add_workload_traces(gemm[:1])
    # the other line as pydantic dumps it with exclude_unset: its inputs are `{}` (random)
    with open(root / "workloads" / "gemm" / "gemm_n32_k48.jsonl", "a") as f:
        f.write(gemm[1].model_dump_json(exclude_unset=True) + "\n")
    ts.add_traces(
        [
            fib.Trace(
                definition="rmsnorm_h64",
                workload=workloads[0].workload,
                solution="rmsnorm_h64_triton_v1",
                evaluation=fib.Evaluation(
                    status="PASSED",
                    environment=ENV,
                    timestamp="2026-05-01T12:00:00",
                    correctness=fib.Correctness(max_relative_error=0.0039, max_absolute_error=0.0078),
                    performance=fib.Performance(
                        latency_ms=0.0041, reference_latency_ms=0.031, speedup_factor=7.56
                    ),
                ),
            ),
            fib.Trace(
                definition="rmsnorm_h64",
                workload=workloads[1].workload,
                solution="rmsnorm_h64_cuda_v2",
                evaluation=fib.Evaluation(
                    status="INCORRECT_NUMERICAL",
                    environment=ENV,
                    timestamp="2026-05-01T12:01:00",
                    log="nan in output",
                    correctness=fib.Correctness(
                        max_relative_error=float("nan"),
                        max_absolute_error=float("inf"),
                        extra={"matched_ratio": 0.5},
                    ),
                ),
            ),
            fib.Trace(
                definition="rmsnorm_h64",
                workload=workloads[-1].workload,
                solution="rmsnorm_h64_cuda_v2",
                evaluation=fib.Evaluation(
                    status="RUNTIME_ERROR",
                    environment=ENV,
                    timestamp="2026-05-01T12:02:00",
                    log="CUDA error: illegal memory access",
                ),
            ),
        ]
    )
    return root


def load_with_flashinfer(root: Path) -> fib.TraceSet:
    """FlashInfer-Bench's own loader (every pydantic validator of its data model runs)."""
    return fib.TraceSet.from_path(str(root))


def counts(ts: fib.TraceSet) -> dict[str, int]:
    return {
        "definitions": len(ts.definitions),
        "solutions": sum(map(len, ts.solutions.values())),
        "workloads": sum(map(len, ts.workloads.values())),
        "traces": sum(map(len, ts.traces.values())),
    }


def read_tree(root: Path) -> dict[str, Any]:
    """Every JSON/JSONL file under root, parsed (JSONL as a list of lines); other files as bytes."""
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
