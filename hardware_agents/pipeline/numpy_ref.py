"""The references a kernel's outputs are judged against: the definition's numpy reference
(`x_numpy_reference`, a `run(...)` with the axis values as globals) evaluated in float64, so
the bar is the exact result, not another fp32 sum.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from accelopt.problem import Problem

# --- references ------------------------------------------------------------------------------


def numpy_reference(problem: Problem) -> Callable[..., Any]:
    """The definition's numpy `run`, with numpy as `np` and the axis values as globals.

    x_numpy_reference is part of the problem definition (trusted like the configuration),
    and it runs in the agent process, never inside the kernel sandbox.
    """
    src = problem.definition.x_numpy_reference
    if not src:
        raise ValueError(f"{problem.name}: definition has no x_numpy_reference")
    ns: dict[str, Any] = {"np": np, "numpy": np, "math": math, **problem.axis_values()}
    exec(compile(src, f"<x_numpy_reference of {problem.name}>", "exec"), ns)
    return ns["run"]


def reference_outputs(
    problem: Problem,
    inputs: dict[str, Any],
    *,
    precision: Any = np.float64,
    shapes: dict[str, tuple[int, ...] | None] | None = None,
) -> dict[str, np.ndarray]:
    """Run the numpy reference on `inputs` upcast to `precision`; outputs in definition order,
    each of the definition's shape (`shapes`: of these, for inputs that are a slice of the
    problem's, hardware_agents/neuron/slices.py)."""
    run = numpy_reference(problem)
    args = [
        np.asarray(v, dtype=precision) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v
        for v in inputs.values()
    ]
    with np.errstate(all="ignore"):
        result = run(*args)
    names = list(problem.definition.outputs)
    values = list(result) if isinstance(result, tuple | list) else [result]
    if len(values) != len(names):
        raise ValueError(
            f"{problem.name}: reference returned {len(values)} outputs, definition has {len(names)}"
        )
    shapes = problem.output_shapes() if shapes is None else shapes
    out: dict[str, np.ndarray] = {}
    for name, v in zip(names, values, strict=True):
        arr = np.asarray(v)
        if shapes[name] is not None and tuple(arr.shape) != shapes[name]:
            raise ValueError(
                f"{problem.name}: reference output {name} has shape {arr.shape}, "
                f"definition says {shapes[name]}"
            )
        out[name] = arr
    return out
