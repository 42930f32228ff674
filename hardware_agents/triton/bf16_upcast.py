"""The Triton interpreter with bf16 tiles held in fp32: the re-run that decides whether an
`incorrect` bf16 kernel failed because of the interpreter or because of the kernel.

The interpreter stores a bf16 tile as its raw 16-bit patterns (numpy has no bf16), so
arithmetic on bf16 tiles (`x * w`, `tl.dot`, sums) computes on integers and gives wrong values
or NaN where a GPU computes correctly. `install()` (in the harness child, before the solution
is imported, only when the agent asks: `HarnessRequest.upcast_bf16`) makes every bf16 tile an
fp32 array: loads from bf16 memory widen exactly, stores to bf16 memory and casts to bf16
round to nearest even (the values stay bf16 values), and the arithmetic between is fp32. A
kernel that is wrong in this mode too (an `exp` without max subtraction overflows in fp32 as in
bf16) is wrong for its own reasons; one that passes only here failed because of the
interpreter's bf16 arithmetic (see `TritonAgent._decide_bf16`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

_INSTALLED = False


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """fp32 values as bf16 bit patterns, rounded to nearest even (NaN kept NaN)."""
    f = np.ascontiguousarray(x, dtype=np.float32)
    bits = f.view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        rounded = np.where(nan, np.uint16(0x7FC0), rounded)
    return rounded


def from_bf16_bits(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns as fp32 values (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def round_to_bf16(x: np.ndarray) -> np.ndarray:
    """fp32 values rounded to the nearest bf16 value, held in fp32."""
    return from_bf16_bits(to_bf16_bits(x))


def install() -> None:
    """Patch the interpreter (idempotent; see the module doc)."""
    global _INSTALLED
    if _INSTALLED:
        return
    import triton.language as tl
    from triton.runtime import interpreter as it

    bf16 = tl.bfloat16
    orig_np_dtype, orig_validate = it._get_np_dtype, it._validate_np_data_size
    builder = it.InterpreterBuilder
    orig_cast, orig_fp_to_fp, orig_fabs = builder.cast_impl, builder.create_fp_to_fp, builder.create_fabs

    def is_bf16(t: Any) -> bool:
        return getattr(t, "scalar", t) == bf16

    def np_dtype(tt_dtype: Any) -> np.dtype:
        elem = tt_dtype.element_ty if isinstance(tt_dtype, tl.block_type) else tt_dtype
        return np.dtype(np.float32) if elem == bf16 else orig_np_dtype(tt_dtype)

    def validate(data: np.ndarray, tl_dtype: Any) -> bool:
        return (tl_dtype == bf16 and data.dtype == np.float32) or orig_validate(data, tl_dtype)

    def create_masked_load(self: Any, ptrs: Any, mask: Any, other: Any, *args: Any) -> Any:
        elem = ptrs.get_element_ty()
        if elem != bf16:
            return orig_load(self, ptrs, mask, other, *args)
        zeros = np.zeros_like(ptrs.data, dtype=np.uint16)
        raw = it._interpreter.load(ptrs.data, mask.data, zeros, np.dtype(np.uint16))
        vals = from_bf16_bits(raw)
        if other is not None:
            vals = np.where(mask.data, vals, np.asarray(other.data, dtype=np.float32))
        return it.TensorHandle(vals, elem)

    def create_masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *args: Any) -> Any:
        if ptrs.get_element_ty() != bf16:
            return orig_store(self, ptrs, value, mask, *args)
        bits = to_bf16_bits(np.broadcast_to(value.data, ptrs.data.shape))
        return it._interpreter.store(ptrs.data, bits, mask.data)

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        if is_bf16(dst_type):
            return it.TensorHandle(round_to_bf16(src.data.astype(np.float32)), dst_type.scalar)
        if is_bf16(src.dtype):
            return it.TensorHandle(src.data.astype(np_dtype(dst_type)), dst_type.scalar)
        return orig_cast(self, src, dst_type)

    def create_fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        if is_bf16(dst_type):
            if is_bf16(src.dtype):
                return src
            wide = src if src.dtype.scalar == tl.float32 else orig_fp_to_fp(self, src, tl.float32, None)
            return it.TensorHandle(round_to_bf16(wide.data), dst_type.scalar)
        if is_bf16(src.dtype):
            as_fp32 = it.TensorHandle(np.asarray(src.data, dtype=np.float32), tl.float32)
            if dst_type.scalar == tl.float32:
                return as_fp32
            return orig_fp_to_fp(self, as_fp32, dst_type, rounding_mode)
        return orig_fp_to_fp(self, src, dst_type, rounding_mode)

    def create_fabs(self: Any, arg: Any) -> Any:
        if is_bf16(arg.dtype):
            return it.TensorHandle(np.abs(arg.data), arg.dtype.scalar)
        return orig_fabs(self, arg)

    orig_load, orig_store = builder.create_masked_load, builder.create_masked_store
    it._get_np_dtype = np_dtype
    it._validate_np_data_size = validate
    builder.create_masked_load = create_masked_load
    builder.create_masked_store = create_masked_store
    builder.cast_impl = cast_impl
    builder.create_fp_to_fp = create_fp_to_fp
    builder.create_fabs = create_fabs
    _INSTALLED = True


__all__ = ["from_bf16_bits", "install", "round_to_bf16", "to_bf16_bits"]
