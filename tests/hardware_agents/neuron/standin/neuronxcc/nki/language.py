"""STAND-IN `neuronxcc.nki.language` (tests only): a numpy imitation of a small NKI subset."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from neuronxcc.nki import _emulator as E

float32 = np.float32
int32 = np.int32
float16 = np.float16
bfloat16 = "bfloat16"


class _Buffer:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"nl.{self.name}"


shared_hbm = _Buffer("shared_hbm")
hbm = _Buffer("hbm")
private_hbm = _Buffer("private_hbm")
sbuf = _Buffer("sbuf")
psum = _Buffer("psum")


def _dtype(dtype: Any) -> Any:
    if isinstance(dtype, str):
        if dtype == "bfloat16":
            raise E.CompilationError("[stand-in] bfloat16 is not emulated")
        return np.dtype(dtype)
    return np.dtype(dtype or np.float32)


def par_dim(n: int) -> int:
    return int(n)


def ndarray(shape: Any, dtype: Any = np.float32, buffer: Any = None, name: str = "", **_: Any) -> np.ndarray:
    shape = tuple(int(s) for s in shape)
    dt = _dtype(dtype)
    buf = buffer or sbuf
    if buf in (sbuf, psum):
        E.check_tile(shape, dt, f"nl.ndarray({list(shape)}, buffer={buf!r})")
        if buf is psum and len(shape) > 1 and math.prod(shape[1:]) > E.PSUM_FREE_MAX:
            raise E.CompilationError(
                f"[stand-in NKI] PSUM tile free size {math.prod(shape[1:])} exceeds {E.PSUM_FREE_MAX}"
            )
        return np.zeros(shape, dt)
    E.STATE.hbm_alloc += math.prod(shape) * dt.itemsize
    if E.STATE.tracing:
        return np.zeros(shape, dt)
    return np.full(shape, np.nan, dt) if dt.kind == "f" else np.zeros(shape, dt)  # uninitialised HBM


def zeros(shape: Any, dtype: Any = np.float32, buffer: Any = None, **kw: Any) -> np.ndarray:
    arr = ndarray(shape, dtype, buffer=buffer, **kw)
    arr[...] = 0
    return arr


def empty_like(a: np.ndarray, buffer: Any = None, dtype: Any = None) -> np.ndarray:
    return ndarray(a.shape, dtype or a.dtype, buffer=buffer)


def load(src: Any, dtype: Any = None, mask: Any = None, **_: Any) -> np.ndarray:
    tile = np.array(src, dtype=_dtype(dtype) if dtype is not None else None, copy=True)
    E.check_tile(tile.shape, tile.dtype, f"nl.load of a {list(tile.shape)} tile")
    E.STATE.read += tile.nbytes
    return tile


def store(dst: Any, value: Any, mask: Any = None, **_: Any) -> None:
    v = np.asarray(value)
    E.check_tile(v.shape, v.dtype, f"nl.store of a {list(v.shape)} tile")
    np.copyto(dst, np.broadcast_to(v, dst.shape), casting="unsafe")
    E.STATE.written += int(np.size(dst)) * dst.dtype.itemsize


def affine_range(*args: int, **_: Any) -> range:
    return range(*args)


def sequential_range(*args: int, **_: Any) -> range:
    return range(*args)


def static_range(*args: int, **_: Any) -> range:
    return range(*args)


def arange(*args: int) -> np.ndarray:
    return np.arange(*args)


def _unary(fn: Any) -> Any:
    def op(x: Any, dtype: Any = None, **_: Any) -> Any:
        E.count_vec(x)
        return fn(np.asarray(x)).astype(dtype or np.asarray(x).dtype, copy=False)

    return op


def _binary(fn: Any) -> Any:
    def op(x: Any, y: Any, dtype: Any = None, **_: Any) -> Any:
        E.count_vec(x, y)
        r = fn(np.asarray(x), np.asarray(y))
        return r.astype(dtype, copy=False) if dtype is not None else r

    return op


exp = _unary(np.exp)
log = _unary(np.log)
sqrt = _unary(np.sqrt)
rsqrt = _unary(lambda x: 1.0 / np.sqrt(x))
negative = _unary(np.negative)
square = _unary(np.square)
reciprocal = _unary(np.reciprocal)
tanh = _unary(np.tanh)
sigmoid = _unary(lambda x: 1.0 / (1.0 + np.exp(-x)))
silu = _unary(lambda x: x / (1.0 + np.exp(-x)))
cos = _unary(np.cos)
sin = _unary(np.sin)
add = _binary(np.add)
subtract = _binary(np.subtract)
multiply = _binary(np.multiply)
divide = _binary(np.divide)
maximum = _binary(np.maximum)
minimum = _binary(np.minimum)


def _reduce(fn: Any) -> Any:
    def op(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False, **_: Any) -> Any:
        E.count_vec(x)
        return fn(np.asarray(x), axis=axis, keepdims=keepdims)

    return op


max = _reduce(np.max)  # NKI names shadow the builtins here
min = _reduce(np.min)
sum = _reduce(np.sum)
mean = _reduce(np.mean)


def matmul(x: Any, y: Any, transpose_x: bool = False, **_: Any) -> np.ndarray:
    a = np.asarray(x).T if transpose_x else np.asarray(x)
    b = np.asarray(y)
    m, k = a.shape
    k2, n = b.shape
    if k != k2:
        raise E.CompilationError(f"[stand-in NKI] matmul contraction mismatch {a.shape} @ {b.shape}")
    if k > E.PARTITIONS or m > E.PARTITIONS or n > E.PSUM_FREE_MAX:
        raise E.CompilationError(f"[stand-in NKI] matmul tile {m}x{k} @ {k}x{n} exceeds 128x128 @ 128x512")
    E.STATE.mm_flops += 2 * m * n * k
    E.STATE.psum += m * n * 4
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)


def transpose(x: Any, **_: Any) -> np.ndarray:
    a = np.asarray(x)
    E.check_tile(a.T.shape, a.dtype, "nl.transpose")
    return np.ascontiguousarray(a.T)


def device_print(*_: Any, **__: Any) -> None:
    return None
