"""STAND-IN compiler/runtime/profiler model behind the fake `neuronxcc.nki` (tests only).

Tracing on zero inputs plays the compiler (constraint checks, a JSON "NEFF"); executing with
numpy plays the device; a roofline-style cost model plays the profiler (a JSON "NTFF").
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

PARTITIONS = 128
SBUF_PARTITION_BYTES = 192 * 1024
PSUM_FREE_MAX = 512
BW = 410 * 2**30
PEAK_MM = 23.75e12
PEAK_VEC = 286.72e9
EFFICIENCY = 0.6  # the modelled kernel reaches 60 % of the roofline
LAUNCH_S = 1e-6


class CompilationError(Exception):
    """What the stand-in 'compiler' raises for a kernel that violates an NKI constraint."""


class _State:
    def __init__(self) -> None:
        self.reset()
        self.profiled_runs = 0

    def reset(self) -> None:
        self.tracing = False
        self.hbm_alloc = 0
        self.read = 0
        self.written = 0
        self.mm_flops = 0
        self.vec_elems = 0
        self.psum = 0


STATE = _State()


def check_tile(shape: tuple[int, ...], dtype: Any, where: str) -> None:
    if not shape:
        return
    if shape[0] > PARTITIONS:
        raise CompilationError(
            f"[stand-in NKI] {where}: partition dimension {shape[0]} exceeds the "
            f"architecture limit of {PARTITIONS}"
        )
    per_partition = math.prod(shape[1:]) * np.dtype(dtype).itemsize
    if per_partition > SBUF_PARTITION_BYTES:
        raise CompilationError(
            f"[stand-in NKI] {where}: {per_partition} bytes per partition exceed "
            f"{SBUF_PARTITION_BYTES} (SBUF)"
        )


def count_vec(*arrays: Any) -> None:
    STATE.vec_elems += max((int(np.size(a)) for a in arrays), default=0)


def _compile_flags() -> str:
    flags = os.environ.get("NEURON_CC_FLAGS", "")
    if "--auto-cast=none" not in flags.split():
        raise CompilationError(
            "[stand-in neuronx-cc] NEURON_CC_FLAGS must contain --auto-cast=none "
            f"(got {flags!r}): the harness would let the compiler cast fp32 to bf16"
        )
    return flags


def _trace(fn: Any, args: tuple[Any, ...]) -> dict[str, Any]:
    STATE.reset()
    STATE.tracing = True
    try:
        zeros = [np.zeros_like(a) if isinstance(a, np.ndarray) else a for a in args]
        with np.errstate(all="ignore"):
            fn(*zeros)
    finally:
        STATE.tracing = False
    return {
        "hbm_alloc_bytes": STATE.hbm_alloc,
        "read": STATE.read,
        "written": STATE.written,
        "mm_flops": STATE.mm_flops,
        "vec_elems": STATE.vec_elems,
        "psum": STATE.psum,
    }


def _jitter() -> float:
    n = STATE.profiled_runs
    STATE.profiled_runs += 1
    noisy = int(os.environ.get("STANDIN_NOISY_RUNS", "0") or 0)
    amp = 0.05 if n < noisy else 0.001
    return 1.0 + amp * math.sin(1.7 * n + 0.3)


def _ntff(neff: dict[str, Any]) -> dict[str, Any]:
    c = neff["cost"]
    traffic = c["read"] + c["written"]
    t = max(traffic / BW, c["mm_flops"] / PEAK_MM, c["vec_elems"] / PEAK_VEC) / EFFICIENCY + LAUNCH_S
    t *= _jitter()
    counters = {
        "hbm_read_bytes": c["read"],
        "hbm_write_bytes": c["written"],
        "psum_read_bytes": c["psum"],
        "psum_write_bytes": c["psum"],
        "sbuf_read_bytes": c["written"] + c["psum"],
        "sbuf_write_bytes": c["read"] + c["psum"],
        "spill_reload_bytes": 0,
        "spill_save_bytes": 0,
        "hardware_flops": c["mm_flops"],
        "transpose_flops": 0,
        "peak_flops_bandwidth_ratio": PEAK_MM / BW,
        "mm_arithmetic_intensity": c["mm_flops"] / max(traffic, 1),
        "hfu_estimated_percent": 100.0 * c["mm_flops"] / (PEAK_MM * t),
        "scalar_engine_active_time_percent": min(100.0, 50.0 * c["vec_elems"] / PEAK_VEC / t),
        "vector_engine_active_time_percent": min(100.0, 100.0 * c["vec_elems"] / PEAK_VEC / t),
        "gpsimd_engine_active_time_percent": 0.0,
    }
    return {"standin": True, "neff": neff["kernel"], "total_time": t, "counters": counters}


def baremetal_run(
    fn: Any,
    args: tuple[Any, ...],
    *,
    save_neff_name: str | None = None,
    save_trace_name: str | None = None,
    additional_compile_opt: str | None = None,
    **_: Any,
) -> Any:
    flags = _compile_flags()
    cost = _trace(fn, args)  # compile: constraint violations raise here, before any NEFF
    neff = {
        "standin": True,
        "kernel": getattr(fn, "__name__", "kernel"),
        "flags": flags,
        "additional_compile_opt": additional_compile_opt or "",
        "cost": cost,
        "visible_cores": os.environ.get("NEURON_RT_VISIBLE_CORES", ""),
    }
    if save_neff_name:
        Path(save_neff_name).write_text(json.dumps(neff))
    limit = int(os.environ.get("STANDIN_HBM_LIMIT_BYTES", str(64 << 20)))
    if cost["hbm_alloc_bytes"] > limit:
        raise RuntimeError(
            f"[stand-in] nrt_load failed: NRT_RESOURCE: cannot allocate "
            f"{cost['hbm_alloc_bytes']} bytes of device memory (limit {limit})"
        )
    copies = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    with np.errstate(all="ignore"):
        out = fn(*copies)
    if save_trace_name:
        Path(save_trace_name).write_text(json.dumps(_ntff(neff)))
    return out


def simulate(fn: Any, args: tuple[Any, ...]) -> Any:
    with np.errstate(all="ignore"):
        return fn(*args)
