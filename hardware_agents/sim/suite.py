"""A test-only suite for the simulated device, written where a test or benchmark wants it.

It is not shipped with the package suites, so `accelopt suite list` never shows it; load
it by path (`suites.load_suite(str(path))`). Each problem is a small elementwise C kernel
with three tunable constants, so `builtin/tuner` has many distinct moves to propose.
"""

from __future__ import annotations

import json
from pathlib import Path

from hardware_agents.sim.gate import KIND

BASELINE = """/* {name}: out = x * {scale} + 1, elementwise over (M, N). Simulated device: never compiled. */
#include <stddef.h>

#define TILE 64     /* columns per block */
#define UNROLL 4    /* inner unroll */
#define CHUNK 1024  /* elements per scheduling chunk */

void kernel(const float* x, float* out) {{
    for (long i = 0; i < (long)M * N; i++) out[i] = x[i] * {scale}f + 1.0f;
}}
"""


def _definition(name: str, scale: int) -> dict:
    return {
        "name": name,
        "op_type": "elementwise",
        "axes": {"M": {"type": "var"}, "N": {"type": "var"}},
        "inputs": {"x": {"shape": ["M", "N"], "dtype": "float32"}},
        "outputs": {"out": {"shape": ["M", "N"], "dtype": "float32"}},
        "reference": f"def run(x):\n    return x * {scale} + 1\n",
        "tags": [f"suite:{KIND}"],
        "description": f"out = x * {scale} + 1 (simulated device)",
        "x_numpy_reference": f"def run(x):\n    return x * {scale} + 1\n",
        "x_tolerance": {},
        "x_roofline": {"flops_vector": "2*M*N", "bytes_min": "4 * (2*M*N)"},
    }


def write_suite(root: str | Path, problems: int = 4, *, name: str = "sim") -> Path:
    """Write a suite of `problems` problems (`p000`, `p001`, ...) under `root/name`; returns
    the suite folder (a path `suites.load_suite` accepts)."""
    if problems < 1:
        raise ValueError("a sim suite needs at least one problem")
    folder = Path(root) / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "suite.json").write_text(
        json.dumps(
            {
                "name": name,
                "description": "test-only problems for the simulated device",
                "device": KIND,
                "language": "c",
                "entry_point": "baseline.c::kernel",
            }
        )
    )
    for i in range(problems):
        pname = f"p{i:03d}"
        d = folder / pname
        d.mkdir(exist_ok=True)
        (d / "definition.json").write_text(json.dumps(_definition(pname, i + 2), indent=1))
        (d / "workload.json").write_text(
            json.dumps(
                {
                    "uuid": f"00000000-0000-5000-8000-{i:012d}",
                    "axes": {"M": 256, "N": 256},
                    "inputs": {"x": {"type": "random"}},
                    "x_label": "sim",
                }
            )
        )
        (d / "baseline.c").write_text(BASELINE.format(name=pname, scale=i + 2))
    return folder
