"""Output buffers the harness owns (aligned, poisoned with NaN before every correctness call,
so an element never written reads as NaN) and the bitwise check that a kernel left its inputs
as they were.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from accelopt.problem import Problem
from hardware_agents.pipeline.inputgen import numpy_dtype

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
