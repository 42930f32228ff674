"""NKI data types as the hardware has them: storage in numpy (bfloat16 and fp8 through
ml_dtypes, tfloat32 kept as float32 with its mantissa rounded to 10 bits), arithmetic in
float32 (the engines cast inputs to fp32 and round results to the destination's type when
they write it: `to_storage`)."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from hardware_agents.neuron.emulator.errors import compile_error

TFLOAT32 = "tfloat32"

STORAGE: dict[str, np.dtype[Any]] = {
    "float32": np.dtype(np.float32),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float16": np.dtype(np.float16),
    "float8_e4m3": np.dtype(ml_dtypes.float8_e4m3),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    TFLOAT32: np.dtype(np.float32),
    "int32": np.dtype(np.int32),
    "int16": np.dtype(np.int16),
    "int8": np.dtype(np.int8),
    "uint32": np.dtype(np.uint32),
    "uint16": np.dtype(np.uint16),
    "uint8": np.dtype(np.uint8),
    "bool": np.dtype(np.bool_),
}
FLOATS = ("float32", "bfloat16", "float16", "float8_e4m3", "float8_e5m2", TFLOAT32)
# precision order for promotion (NKI: "whichever input type has the highest precision")
_RANK = {
    "bool": 0,
    "uint8": 1,
    "int8": 1,
    "uint16": 2,
    "int16": 2,
    "uint32": 3,
    "int32": 3,
    "float8_e5m2": 4,
    "float8_e4m3": 5,
    "bfloat16": 6,
    "float16": 7,
    TFLOAT32: 8,
    "float32": 9,
}


class _TF32:
    """`nl.tfloat32`: fp32 storage, 10-bit mantissa."""

    name = TFLOAT32

    def __repr__(self) -> str:
        return "nl.tfloat32"


tfloat32 = _TF32()


def canon(dtype: Any) -> str:
    """The NKI name of a dtype given as numpy type, numpy dtype, ml_dtypes type, or name."""
    if dtype is None:
        raise compile_error("err_unsupported_dtype", "a dtype is required")
    if isinstance(dtype, _TF32) or dtype == TFLOAT32:
        return TFLOAT32
    if isinstance(dtype, str) and dtype in STORAGE:
        return dtype
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise compile_error("err_unsupported_dtype", f"{dtype!r} is not an NKI data type") from None
    if dt == np.float64:
        raise compile_error(
            "err_unsupported_dtype", "float64 is not supported on NeuronCores (use nl.float32)"
        )
    for name, st in STORAGE.items():
        if name != TFLOAT32 and st == dt:
            return name
    raise compile_error("err_unsupported_dtype", f"{dt} is not an NKI data type")


def itemsize(name: str) -> int:
    return STORAGE[name].itemsize


def is_float(name: str) -> bool:
    return name in FLOATS


def promote(*names: str) -> str:
    return max(names, key=lambda n: _RANK.get(n, 9))


def to_storage(values: np.ndarray, name: str) -> np.ndarray:
    """fp32 results rounded (to nearest even) to the storage type `name`."""
    st = STORAGE[name]
    if name == TFLOAT32:
        bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
        rounded = (bits + np.uint32(0xFFF) + ((bits >> np.uint32(13)) & np.uint32(1))) & np.uint32(0xFFFFE000)
        return rounded.view(np.float32)
    if values.dtype == st:
        return values
    if name in FLOATS:
        return values.astype(st)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.nan_to_num(values).astype(st) if values.dtype.kind == "f" else values.astype(st)


def garbage(name: str) -> float | int:
    """What uninitialised on-chip or device memory holds in the emulator: NaN for floats (a
    kernel that reads memory it never wrote fails visibly), the type's max for integers."""
    if name in FLOATS:
        return float("nan")
    if name == "bool":
        return 0
    return int(np.iinfo(STORAGE[name]).max)


__all__ = [
    "FLOATS",
    "STORAGE",
    "TFLOAT32",
    "canon",
    "garbage",
    "is_float",
    "itemsize",
    "promote",
    "tfloat32",
    "to_storage",
]
