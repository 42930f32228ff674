"""The problem side of an NKI profile: the numpy reference module and its I/O transforms.

NKIBench keeps, next to `forward`, two functions that adapt the reference's tensors to the
kernel's layout: `transform_to_nki_inputs(inputs) -> list` (for example a reshape of the
matmul lhs to (32, 128, 40, 128)) and `transform_nki_outputs(kernel_out, ref) -> list`
(reshape each kernel output to the reference's shape). An imported definition carries the
whole reference module in `x_numpy_reference`, so these travel with the problem; when a
definition has none, the kernel takes the inputs in definition order and returns the
outputs as they are.

The reference module is part of the problem definition (trusted like the configuration):
it runs here, in the agent process, never in the kernel's sandbox.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from accelopt.problem import Problem

TO_NKI = "transform_to_nki_inputs"
FROM_NKI = "transform_nki_outputs"


class ReferenceModule:
    """The executed `x_numpy_reference` of a problem (numpy as `np`, axis values as globals)."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        src = problem.definition.x_numpy_reference or ""
        ns: dict[str, Any] = {"np": np, "numpy": np, "math": math, **problem.axis_values()}
        if src:
            exec(compile(src, f"<x_numpy_reference of {problem.name}>", "exec"), ns)
        self.namespace = ns
        self.to_nki: Callable[[list[Any]], Sequence[Any]] | None = (
            ns.get(TO_NKI) if callable(ns.get(TO_NKI)) else None
        )
        self.from_nki: Callable[[Any, Any], Sequence[Any]] | None = (
            ns.get(FROM_NKI) if callable(ns.get(FROM_NKI)) else None
        )

    @property
    def output_names(self) -> list[str]:
        return list(self.problem.definition.outputs)

    def kernel_args(self, inputs: dict[str, Any]) -> list[Any]:
        """The kernel's positional arguments for inputs given in definition order."""
        values = list(inputs.values())
        if self.to_nki is None:
            return values
        with np.errstate(all="ignore"):
            return list(self.to_nki(values))

    def kernel_outputs(self, kernel_out: Any, refs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Kernel outputs mapped to the definition's outputs (raises ValueError when they do not fit)."""
        names = self.output_names
        ref_arg: Any = refs[names[0]] if len(names) == 1 else tuple(refs[n] for n in names)
        if self.from_nki is not None:
            try:
                got = list(self.from_nki(kernel_out, ref_arg))
            except Exception as e:
                raise ValueError(
                    f"{FROM_NKI} failed on the kernel's output ({type(e).__name__}: {e}); "
                    "the kernel returned outputs of the wrong size or number"
                ) from None
        else:
            got = list(kernel_out) if isinstance(kernel_out, tuple | list) else [kernel_out]
        if len(got) != len(names):
            raise ValueError(
                f"the kernel returned {len(got)} output(s), the problem has {len(names)} ({', '.join(names)})"
            )
        return {n: np.asarray(g) for n, g in zip(names, got, strict=True)}


@functools.lru_cache(maxsize=32)
def _arg_shapes_cached(problem_json: bytes) -> tuple[tuple[str, tuple[int, ...] | None, str], ...]:
    import msgspec

    problem = msgspec.json.decode(problem_json, type=Problem)
    ref = ReferenceModule(problem)
    shapes = problem.input_shapes()
    total = sum(math.prod(s) for s in shapes.values() if s is not None)
    if total > (1 << 33):  # > 32 GiB of fp32 even untouched: do not try
        raise MemoryError("inputs too large to describe")
    dummies: dict[str, Any] = {}
    for name, spec in problem.definition.inputs.items():
        shape = shapes[name]
        if shape is None:
            src = problem.workload.inputs.get(name)
            dummies[name] = getattr(src, "value", 0.0)
        else:  # untouched memory: reshapes are views, nothing is written
            dummies[name] = np.empty(shape, dtype=np.float32 if spec.dtype == "float32" else np.float64)
    args = ref.kernel_args(dummies)
    out: list[tuple[str, tuple[int, ...] | None, str]] = []
    for a in args:
        if isinstance(a, np.ndarray):
            out.append(("array", tuple(int(d) for d in a.shape), str(a.dtype)))
        else:
            out.append(("scalar", None, repr(a)))
    return tuple(out)


def kernel_arg_shapes(problem: Problem) -> list[tuple[str, tuple[int, ...] | None, str]]:
    """(kind, shape, dtype-or-value) of each kernel argument, without real data; [] if unknown."""
    import msgspec

    try:
        return list(_arg_shapes_cached(msgspec.json.encode(problem)))
    except Exception:
        return []


__all__ = ["FROM_NKI", "TO_NKI", "ReferenceModule", "kernel_arg_shapes"]
