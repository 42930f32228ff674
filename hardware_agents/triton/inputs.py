"""Inputs of one workload as torch tensors: random, scalar, safetensors, synthesized indices.

- random inputs come from the validity layer's init expressions (`x_input_init`, adversarial
  cases), drawn in float32 with numpy, seeded per (case seed, input position), then cast to
  the definition's dtype (bf16 and fp8 have no numpy type); integer inputs default to
  `randint(-1024, 1024)` (int8: [-128, 128)), bool to 0/1, as FlashInfer-Bench draws them;
- scalar inputs take the workload's value;
- safetensors inputs are loaded from the file the workload names (relative paths against
  the agent's data roots) and checked against the definition's shape and dtype; a missing
  file is an error naming it;
- index tensors of paged/ragged operators are synthesized so that the definition's
  constraints and semantics hold (FlashInfer-Bench ships them as blobs; see `indices.py`):
  `<p>indptr` offsets from 0 to the axis its constraint ties to `<p>indptr[-1]` (or the
  length of `<p>indices`), sequences of different lengths including one of length 1,
  `<p>indices` distinct page ids below the cache's pages, `*last_page_len` in [1,
  page_size] with both edges, and for a causal operator every sequence's key/value tokens
  at least its query length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from accelopt.problem import Definition, RandomInput, SafetensorsInput, ScalarInput, Workload
from hardware_agents import index_inputs as indices
from hardware_agents.index_inputs import axis_values, is_float
from hardware_agents.pipeline import inputgen

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "bool": torch.bool,
}
_FP8_MAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}


class InputError(ValueError):
    """A workload whose inputs cannot be produced (missing file, unsatisfiable constraint...)."""


def dtype_name(dtype: torch.dtype) -> str:
    """A torch dtype by the definition's name for it (float64 and others: torch's)."""
    return next((k for k, v in TORCH_DTYPES.items() if v == dtype), str(dtype).removeprefix("torch."))


def torch_dtype(name: str) -> torch.dtype:
    try:
        return TORCH_DTYPES[name]
    except KeyError:
        raise InputError(f"dtype {name} is not supported by the Triton agent") from None


def resolve_blob(path: str, roots: Sequence[str | Path]) -> Path:
    """The file a safetensors input names: absolute, or relative to one of `roots`."""
    p = Path(path)
    candidates = [p] if p.is_absolute() else [Path(r) / p for r in roots]
    for c in candidates:
        if c.is_file():
            return c
    where = ", ".join(str(c) for c in candidates) or f"{path} (no data root to resolve it against)"
    raise InputError(
        f"safetensors file {path!r} not found (looked at {where}); fetch the trace set's blobs "
        "(git lfs pull) or re-import with the blob files present"
    )


def load_safetensors(
    spec: SafetensorsInput, name: str, shape: tuple[int, ...] | None, dtype: str, roots: Sequence[str | Path]
) -> torch.Tensor:
    file = resolve_blob(spec.path, roots)
    head = file.read_bytes()[:64]
    if head.startswith(b"version https://git-lfs"):
        raise InputError(
            f"safetensors file {file} is a Git LFS pointer, not the data: run "
            f"`git lfs pull --include {spec.path}` in the trace set"
        )
    try:
        from safetensors.torch import load_file
    except ImportError as e:  # pragma: no cover - safetensors comes with the ML stack
        raise InputError("reading safetensors inputs needs the `safetensors` package") from e
    tensors = load_file(str(file))
    if spec.tensor_key not in tensors:
        raise InputError(f"{file}: no tensor {spec.tensor_key!r} (has {sorted(tensors)})")
    t = tensors[spec.tensor_key]
    if shape is not None and tuple(t.shape) != shape:
        raise InputError(
            f"{file}:{spec.tensor_key}: shape {tuple(t.shape)}, the definition says {name}{list(shape)}"
        )
    if t.dtype != torch_dtype(dtype):
        raise InputError(f"{file}:{spec.tensor_key}: dtype {t.dtype}, the definition says {dtype}")
    return t.contiguous()


# --- index synthesis (hardware_agents/index_inputs.py) ----------------------------------------


def synthesized_inputs(definition: Definition) -> list[str]:
    """Integer inputs whose values are synthesized (indptr / indices / last_page_len)."""
    return indices.synthesized_inputs(definition)


def synthesize(definition: Definition, axes: dict[str, int], seed: int) -> dict[str, torch.Tensor]:
    """The index inputs of one case (`indices.synthesize`), in the definition's dtypes and shapes."""
    try:
        arrays = indices.synthesize(definition, axes, seed)
    except indices.IndexSynthesisError as e:
        raise InputError(str(e)) from None
    out = {}
    for name, a in arrays.items():
        t = torch.from_numpy(np.ascontiguousarray(a)).to(torch_dtype(definition.inputs[name].dtype))
        shape = definition.shape_of(name, axes)
        if shape is not None and tuple(t.shape) != tuple(shape):
            raise InputError(
                f"{definition.name}: synthesized {name} has {t.numel()} elements, its shape is {list(shape)}"
            )
        out[name] = t
    return out


# --- one case --------------------------------------------------------------------------------


def _default_init(dtype: str) -> str:
    if is_float(dtype):
        return inputgen.DEFAULT_INIT
    if dtype == "bool":
        return "randint(0, 2)"
    if dtype == "int8":
        return "randint(-128, 128)"
    return "randint(-1024, 1024)"


def case_inputs(
    definition: Definition, workload: Workload, case: inputgen.InputCase, roots: Sequence[str | Path] = ()
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """(tensors, scalars) of one case, in the definition's order, as CPU tensors."""
    axes = axis_values(definition, workload)
    synth = synthesize(definition, axes, case.seed)
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, Any] = {}
    for i, (name, spec) in enumerate(definition.inputs.items()):
        src = workload.inputs.get(name, RandomInput())
        shape = definition.shape_of(name, axes)
        if spec.shape is None:
            if not isinstance(src, ScalarInput):
                raise InputError(
                    f"{definition.name}: scalar input {name!r} needs a scalar value in workload "
                    f"{workload.uuid}"
                )
            scalars[name] = src.value
            continue
        if isinstance(src, ScalarInput):
            raise InputError(
                f"{definition.name}: input {name!r} is a tensor, workload {workload.uuid} gives a scalar"
            )
        if isinstance(src, SafetensorsInput):
            tensors[name] = load_safetensors(src, name, shape, spec.dtype, roots)
            continue
        if name in synth and name not in case.inits:
            tensors[name] = synth[name]
            continue
        expr = case.inits.get(name) or definition.x_input_init.get(name) or _default_init(spec.dtype)
        rng = np.random.default_rng([case.seed, i])
        gen_dtype = "float32" if is_float(spec.dtype) or spec.dtype == "bool" else spec.dtype
        arr = inputgen.generate(expr, shape or (), gen_dtype, rng)
        t = torch.from_numpy(arr)
        if spec.dtype in _FP8_MAX:
            t = t.clamp(-_FP8_MAX[spec.dtype], _FP8_MAX[spec.dtype])
        tensors[name] = t.to(torch_dtype(spec.dtype)).contiguous()
    return tensors, scalars


# Input elements past which (a production shape) the Triton interpreter would run for hours,
# so the agent does not start it (what it checks in seconds to a minute is the family's
# `Capabilities.interpretable_elements`, hardware_agents/triton/family.py).
INTERPRETER_LIMIT = 1 << 24


def input_elements(definition: Definition, workload: Workload) -> int:
    """Elements of the tensor inputs at a workload (constant axes included)."""
    axes = axis_values(definition, workload)
    total = 0
    for name, spec in definition.inputs.items():
        shape = definition.shape_of(name, axes)
        if spec.shape is not None and shape is not None:
            total += math.prod(shape)
    return total
