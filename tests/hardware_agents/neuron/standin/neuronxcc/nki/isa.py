"""STAND-IN `neuronxcc.nki.isa` (tests only): nc_matmul, nc_transpose, activation."""

from __future__ import annotations

from typing import Any

import numpy as np

from neuronxcc.nki import language as nl


def nc_matmul(stationary: Any, moving: Any, **_: Any) -> np.ndarray:
    """transpose(stationary) @ moving, as the Tensor Engine computes it."""
    return nl.matmul(stationary, moving, transpose_x=True)


def nc_transpose(x: Any, **_: Any) -> np.ndarray:
    return nl.transpose(x)


def activation(
    op: Any, data: Any, bias: Any = None, scale: Any = 1.0, dtype: Any = None, **_: Any
) -> np.ndarray:
    x = np.asarray(data) * scale
    if bias is not None:
        x = x + np.asarray(bias)
    return op(x, dtype=dtype)
