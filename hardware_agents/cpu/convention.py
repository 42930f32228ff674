"""The C calling convention of the CPU agent, rendered for a problem (prompt-facing)."""

from __future__ import annotations

from accelopt.problem import Problem
from hardware_agents.kernel_language import fence

CONVENTION = """\
C kernels for the CPU agent (C11 with GNU extensions, OpenMP, gcc -O3 -march=native -fopenmp):
- Export `void kernel(...)` (the symbol after `::` in the entry point) taking the problem's
  inputs in definition order as `const float*` (scalars by value), then its outputs as `float*`.
  Nothing is returned: write every element of every output.
- Shapes are fixed: each axis is a preprocessor macro (`-DM=512 -DN=512 ...`); do not define
  them yourself. Tensors are dense, row-major (C order), 64-byte aligned, fp32.
- Outputs contain NaN on entry; inputs are read-only (they are checked bitwise after the call).
- Compute in fp32 or wider (no _Float16/bf16). No state across calls: every call gets other data.
- OpenMP uses all cores (OMP_NUM_THREADS is set); use `#pragma omp parallel for` etc.
- Tunable constants (tile sizes, unroll factors, chunk sizes) belong in `#define`s.
- You may use `#pragma GCC optimize(...)`, intrinsics from <immintrin.h>, <math.h>, malloc.
"""


def _ctype(dtype: str) -> str:
    return {
        "float32": "float",
        "int32": "int32_t",
        "int64": "int64_t",
        "int16": "int16_t",
        "int8": "int8_t",
        "bool": "bool",
    }.get(dtype, dtype)


def c_signature(problem: Problem, symbol: str = "kernel") -> str:
    """The exact prototype and axis macros a kernel for `problem` must match."""
    d = problem.definition
    axes = problem.axis_values()
    params = []
    for name, ts in d.inputs.items():
        t = _ctype(ts.dtype)
        params.append(
            f"{t} {name}" if ts.shape is None else f"const {t}* {name} /* [{']['.join(ts.shape)}] */"
        )
    for name, ts in d.outputs.items():
        params.append(f"{_ctype(ts.dtype)}* {name} /* [{']['.join(ts.shape or [])}] */")
    macros = " ".join(f"{k}={v}" for k, v in axes.items())
    sep = ",\n    "
    return f"/* axis macros: {macros} */\nvoid {symbol}(\n    {sep.join(params)});"


def interface_lines(problem: Problem) -> list[str]:
    """The prompt's "Kernel interface" lines: the convention and this problem's prototype
    (kept next to the agent, so the prompt states exactly what the harness does)."""
    return [
        CONVENTION.strip(),
        "",
        "Prototype and axis macros for this problem:",
        fence(c_signature(problem, problem.baseline.entry_symbol), "c"),
    ]
