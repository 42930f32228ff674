"""`neuronxcc.nki.language` (nl) in the emulator: what a kernel calls, lowered to
instructions (see ops.py). Anything not defined here raises `NotEmulated` naming it."""

from __future__ import annotations

import builtins
import math
from typing import Any

import ml_dtypes
import numpy as np

from hardware_agents.neuron.emulator import dtypes, ops, validate
from hardware_agents.neuron.emulator import tracer as tr
from hardware_agents.neuron.emulator.errors import NKICompileError, NotEmulated
from hardware_agents.neuron.emulator.expr import Ix, MGrid
from hardware_agents.neuron.emulator.expr import arange as _arange
from hardware_agents.neuron.emulator.tracer import ParDim, View

# --- data types ------------------------------------------------------------------------------
float32 = np.float32
float16 = np.float16
bfloat16 = ml_dtypes.bfloat16
float8_e4m3 = ml_dtypes.float8_e4m3
float8_e5m2 = ml_dtypes.float8_e5m2
tfloat32 = dtypes.tfloat32
int8, int16, int32 = np.int8, np.int16, np.int32
uint8, uint16, uint32 = np.uint8, np.uint16, np.uint32
bool_ = np.bool_


class fp32:
    min = float(np.finfo(np.float32).min)
    max = float(np.finfo(np.float32).max)


class bfp16:
    min = float(ml_dtypes.finfo(ml_dtypes.bfloat16).min)


# --- buffers ---------------------------------------------------------------------------------
class _Buffer:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"nl.{self.name}"

    def __getattr__(self, item: str) -> Any:
        raise NotEmulated(f"nki.compiler.{self.name}.{item} (direct allocation)")


sbuf = _Buffer("sbuf")
psum = _Buffer("psum")
shared_hbm = _Buffer("shared_hbm")
private_hbm = _Buffer("private_hbm")
hbm = private_hbm


def _buffer_name(buffer: Any) -> str:
    if buffer is None:
        return "sbuf"
    if isinstance(buffer, _Buffer):
        return {"private_hbm": "hbm"}.get(buffer.name, buffer.name)
    if isinstance(buffer, str) and buffer in ("sbuf", "psum", "shared_hbm", "hbm", "private_hbm"):
        return {"private_hbm": "hbm"}.get(buffer, buffer)
    raise NotEmulated(f"buffer {buffer!r}", "nl.sbuf, nl.psum, nl.shared_hbm and nl.hbm are emulated")


class tile_size:
    pmax = 128
    psum_fmax = 2048
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    bn_stats_fmax = 512
    psum_min_align = 4
    sbuf_min_align = 1
    total_available_sbuf_size = validate.SBUF_PARTITION_BYTES


def par_dim(n: int) -> ParDim:
    return ParDim(int(n))


# --- indices and loops -----------------------------------------------------------------------
def arange(*args: Any) -> Ix:
    return _arange(*args)


mgrid = MGrid()


def ds(start: Any, size: int) -> slice:
    return slice(start, start + int(size))


def _range(args: tuple[Any, ...], kind: str) -> Any:
    vals = [int(a) for a in args]  # a loop bound that is not a Python int fails here, as in NKI
    if len(vals) == 1:
        start, stop, step = 0, vals[0], 1
    elif len(vals) == 2:
        start, stop, step = vals[0], vals[1], 1
    elif len(vals) == 3:
        start, stop, step = vals
    else:
        raise NKICompileError("err_invalid_range", f"nl.{kind}_range takes 1 to 3 arguments")
    if step < 1:
        raise NotEmulated(f"nl.{kind}_range with step {step}")
    return tr.current().loop(start, stop, step, kind)


def affine_range(*args: Any, **kwargs: Any) -> Any:
    return _range(args, "affine")


def sequential_range(*args: Any, **kwargs: Any) -> Any:
    return _range(args, "sequential")


def static_range(*args: Any) -> range:
    return range(*(int(a) for a in args))


def program_id(axis: int = 0) -> int:
    return 0


def num_programs(axes: Any = None) -> int:
    return 1


def program_ndim() -> int:
    return 0


# --- tensors -----------------------------------------------------------------------------------
def _shape_of(shape: Any) -> tuple[tuple[int, ...], int]:
    if isinstance(shape, int):
        shape = (shape,)
    dims = tuple(int(s) for s in shape)
    pars = [i for i, s in enumerate(shape) if isinstance(s, ParDim)]
    if len(pars) > 1:
        raise NKICompileError("err_invalid_shape", "a tensor has at most one partition dimension")
    return dims, (pars[0] if pars else 0)


def _new(shape: Any, dtype: Any, buffer: Any, name: str, init: str, fill: float = 0.0) -> View:
    dims, pa = _shape_of(shape)
    buf = _buffer_name(buffer)
    dt = dtypes.canon(dtype if dtype is not None else np.float32)
    if buf in ("hbm", "shared_hbm"):
        if init:
            raise NKICompileError(
                "err_hbm_tensor_with_init_value_not_supported",
                "Creating HBM tensor with init value is not supported.",
            )
        pa = -1
    t = tr.current()
    tid = t.new_tensor(dims, dt, buf, name=name, par_axis=pa, init=init, fill=fill)
    validate.check_decl(t.decl(tid))
    return View.full(tid)


def ndarray(
    shape: Any, dtype: Any = np.float32, *, buffer: Any = None, name: str = "", **kwargs: Any
) -> View:
    return _new(shape, dtype, buffer, name, "")


def empty_like(a: View, dtype: Any = None, *, buffer: Any = None, name: str = "", **kwargs: Any) -> View:
    return _new(a.shape, dtype if dtype is not None else a.dtype, buffer, name, "")


def zeros(shape: Any, dtype: Any = np.float32, *, buffer: Any = None, name: str = "", **kwargs: Any) -> View:
    return _new(shape, dtype, buffer, name, "zeros")


def zeros_like(a: View, dtype: Any = None, *, buffer: Any = None, name: str = "", **kwargs: Any) -> View:
    return _new(a.shape, dtype if dtype is not None else a.dtype, buffer, name, "zeros")


def ones(shape: Any, dtype: Any = np.float32, *, buffer: Any = None, name: str = "", **kwargs: Any) -> View:
    return _new(shape, dtype, buffer, name, "fill", 1.0)


def full(
    shape: Any, fill_value: Any, dtype: Any = np.float32, *, buffer: Any = None, name: str = "", **kwargs: Any
) -> View:
    return _new(shape, dtype, buffer, name, "fill", float(fill_value))


def shared_constant(constant: Any, dtype: Any = None, **kwargs: Any) -> View:
    arr = np.asarray(constant)
    dt = dtypes.canon(dtype if dtype is not None else (np.float32 if arr.dtype == np.float64 else arr.dtype))
    t = tr.current()
    cid = tr.constant(arr, dt)
    tid = t.new_tensor(arr.shape, dt, "const", name="shared_constant", init="const", const=cid)
    t.inputs.add(tid)
    return View.full(tid)


def shared_identity_matrix(n: int, dtype: Any = np.uint8, **kwargs: Any) -> View:
    return shared_constant(np.identity(int(n)), dtype=dtype)


# --- data movement ---------------------------------------------------------------------------
def load(src: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> View:
    v = ops.as_view(src, "load", "src")
    if v.decl["buffer"] not in tr.HBM:
        raise NKICompileError(
            "err_unsupported_memory",
            f"Expected operand 'src' of 'load' to be in address space 'hbm', but got a tile in "
            f"'{v.decl['buffer']}' instead.",
        )
    shape = v.shape if v.shape else (1,)
    if shape[0] > validate.PMAX:
        raise NKICompileError(
            "err_num_partition_exceed_arch_limit",
            f"number of partitions {shape[0]} of 'load' exceed architecture limitation of {validate.PMAX}.",
        )
    return ops.result("dma", "dma", tuple(shape), ops.out_dtype(dtype, v), [(v, "src")], {}, mask)


def store(dst: Any, value: Any, *, mask: Any = None, **kwargs: Any) -> None:
    d = ops.as_view(dst, "store", "dst")
    dd = d.decl
    if dd["buffer"] == "input" or (dd["alias"] >= 0 and tr.current().decl(dd["alias"])["buffer"] == "input"):
        raise NKICompileError(
            "err_cannot_update_immutable_parameter", f"Cannot update immutable parameter '{dd['name']}'"
        )
    if dd["buffer"] not in tr.HBM:
        raise NKICompileError(
            "err_unsupported_memory",
            f"Expected operand 'dst' of 'store' to be in address space 'hbm', but got a tile in "
            f"'{dd['buffer']}' instead.",
        )
    if ops.is_scalar(value):
        shape = d.shape if d.shape else (1,)
        v = ops.temp(tuple(shape), dd["dtype"])
        ops.emit("memset", "any:dve,pool", v, [], {"value": ops.scalar(value)})
    else:
        v = ops.on_chip(value, "store", "value")
        if v.decl["buffer"] == "psum":  # "an extra copy will be performed to move the tile to SBUF first"
            v = ops.copy(v)
    if (
        tuple(v.shape) != tuple(d.shape)
        and not ops._same_count(tuple(v.shape), tuple(d.shape))
        and ops.nki_broadcast(tuple(v.shape), tuple(d.shape)) != tuple(d.shape)
    ):
        raise NKICompileError(
            "err_shape_mismatch",
            f"the value {list(v.shape)} does not fit the store destination {list(d.shape)}",
        )
    ops.emit("dma", "dma", d, [(v, "value")], {}, mask)


def load_transpose2d(src: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> View:
    v = ops.as_view(src, "load_transpose2d", "src")
    if len(v.shape) != 2:
        raise NKICompileError("err_exceed_max_supported_dimension", "load_transpose2d takes a 2D tile")
    t = v[:, :]
    tv = View(t.tid, [t.dims[0], t.dims[1]], t.shape)
    # the transposed view: tile axis 0 walks the source's dimension 1
    swapped = View(
        tv.tid,
        [
            Ix(e.const, e.loops, {1 - a: c for a, c in e.axes.items()}, (v.shape[1], v.shape[0]))
            for e in tv.dims
        ],
        (v.shape[1], v.shape[0]),
    )
    if swapped.shape[0] > validate.PMAX:
        raise NKICompileError(
            "err_num_partition_exceed_arch_limit",
            f"number of partitions {swapped.shape[0]} exceed architecture limitation of 128.",
        )
    return ops.result(
        "dma", "dma", swapped.shape, ops.out_dtype(dtype, v), [(swapped, "src")], {"transpose": True}, mask
    )


def copy(src: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> View:
    return ops.copy(src, dtype=dtype, mask=mask)


def broadcast_to(src: Any, *, shape: Any, **kwargs: Any) -> View:
    return ops.broadcast_to(ops.as_view(src, "broadcast_to", "src"), tuple(int(s) for s in shape))


def expand_dims(data: Any, axis: Any) -> View:
    v = ops.on_chip(data, "expand_dims", "data")
    axes = sorted(int(a) for a in (axis if isinstance(axis, list | tuple) else [axis]))
    shape = list(v.shape)
    for a in axes:
        if a < len(shape):
            raise NotEmulated("nl.expand_dims before the last axis")
        shape.append(1)
    return View(v.tid, [Ix(e.const, e.loops, e.axes, tuple(shape)) for e in v.dims], tuple(shape))


def transpose(x: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> View:
    v = ops.on_chip(x, "transpose", "x")
    if len(v.shape) > 2:
        raise NKICompileError(
            "err_exceed_max_supported_dimension",
            f"parameter 'x{list(v.shape)}' of 'transpose' exceed max supported number of dimensions of 2.",
        )
    return ops.transpose(v, dtype=dtype, mask=mask)


def matmul(x: Any, y: Any, *, transpose_x: bool = False, mask: Any = None, **kwargs: Any) -> View:
    """x @ y (or x.T @ y with transpose_x): nc_matmul(transpose(x), y) on the Tensor Engine."""
    a = ops.on_chip(x, "matmul", "x")
    b = ops.sbuf_operand(y, "matmul", "y", lenient=True)
    if transpose_x:
        stat = ops.sbuf_operand(a, "matmul", "x", lenient=True)
    else:
        if math.prod(a.shape[1:]) > validate.PMAX:
            raise NKICompileError(
                "err_size_of_dimension_exceed_arch_limit",
                f"size of dimension 1 in 'x{list(a.shape)}' of 'matmul' exceed architecture "
                f"limitation of {validate.PMAX}.",
            )
        stat = ops.transpose(a)  # PE transpose into PSUM and a copy back to SBUF
    validate.check_matmul(stat.access(), b.access(), "matmul")
    return ops.matmul(stat, b, flags={}, mask=mask)


def loop_reduce(
    x: Any, op: Any, loop_indices: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any
) -> Any:
    v = ops.on_chip(x, "loop_reduce", "x")
    idx = loop_indices if isinstance(loop_indices, list | tuple) else [loop_indices]
    loops = []
    for i in idx:
        if isinstance(i, Ix) and len(i.loops) == 1 and not i.axes:
            loops.append(next(iter(i.loops)))
    return ops.LoopReduce(
        v, ops.alu_name(op, "loop_reduce"), loops, None if dtype is None else dtypes.canon(dtype), mask
    )


# --- element-wise math -------------------------------------------------------------------------
def _unary(fn: str) -> Any:
    def f(x: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Any:
        if ops.is_scalar(x):
            from hardware_agents.neuron.emulator.execute import activation

            return float(activation(fn, np.float32(x)))
        return ops.unary(fn, x, dtype=dtype, mask=mask, api=f"nl.{fn}")

    f.__name__ = fn
    ops.NL_FUNCS[f] = fn
    return f


def _binary(op: str, name: str | None = None) -> Any:
    def f(x: Any, y: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Any:
        return ops.binary(op, x, y, dtype=dtype, mask=mask, api=f"nl.{name or op}")

    f.__name__ = name or op
    ops.NL_FUNCS[f] = op
    return f


exp, log, sqrt, rsqrt, tanh = (_unary(n) for n in ("exp", "log", "sqrt", "rsqrt", "tanh"))
sigmoid, silu, gelu, relu, softplus, mish = (
    _unary(n) for n in ("sigmoid", "silu", "gelu", "relu", "softplus", "mish")
)
gelu_apprx_tanh, gelu_apprx_sigmoid, gelu_dx, silu_dx = (
    _unary(n) for n in ("gelu_apprx_tanh", "gelu_apprx_sigmoid", "gelu_dx", "silu_dx")
)
sin, cos, tan, arctan, erf, erf_dx = (_unary(n) for n in ("sin", "cos", "tan", "arctan", "erf", "erf_dx"))
square, abs, sign, negative, reciprocal = (
    _unary(n) for n in ("square", "abs", "sign", "negative", "reciprocal")
)
floor, ceil, trunc = (_unary(n) for n in ("floor", "ceil", "trunc"))
logical_not, invert = _unary("logical_not"), _unary("invert")

add, subtract, multiply, divide, power = (
    _binary(n) for n in ("add", "subtract", "multiply", "divide", "power")
)
maximum, minimum = _binary("max", "maximum"), _binary("min", "minimum")
mod, fmod = _binary("mod"), _binary("fmod")
equal, not_equal, greater, greater_equal, less, less_equal = (
    _binary(n) for n in ("equal", "not_equal", "greater", "greater_equal", "less", "less_equal")
)
logical_and, logical_or, logical_xor = (_binary(n) for n in ("logical_and", "logical_or", "logical_xor"))
bitwise_and, bitwise_or, bitwise_xor, left_shift, right_shift = (
    _binary(n) for n in ("bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift")
)


def _reduction(op: str, name: str) -> Any:
    def f(
        x: Any, axis: Any, *, dtype: Any = None, mask: Any = None, keepdims: bool = False, **kwargs: Any
    ) -> View:
        return ops.reduce(op, x, axis, dtype=dtype, mask=mask, keepdims=keepdims, api=f"nl.{name}")

    f.__name__ = name
    ops.NL_FUNCS[f] = op
    return f


sum = _reduction("add", "sum")
max = _reduction("max", "max")
min = _reduction("min", "min")
prod = _reduction("multiply", "prod")
all = _reduction("min", "all")


def mean(
    x: Any, axis: Any, *, dtype: Any = None, mask: Any = None, keepdims: bool = False, **kwargs: Any
) -> View:
    v = ops.on_chip(x, "nl.mean", "x")
    axes = axis if isinstance(axis, list | tuple) else [axis]
    n = math.prod(v.shape[int(a)] for a in axes)
    return ops.reduce("add", v, axis, dtype=dtype, mask=mask, keepdims=keepdims, scale=1.0 / n, api="nl.mean")


def var(x: Any, axis: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> View:
    m = mean(x, axis, keepdims=True)
    d = subtract(x, m)
    return mean(multiply(d, d), axis, dtype=dtype, mask=mask)


def where(condition: Any, x: Any, y: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> View:
    c = ops.on_chip(condition, "nl.where", "condition")
    srcs = [(c, "condition")]
    views = []
    args: dict[str, Any] = {}
    for v, role in ((x, "x"), (y, "y")):
        if ops.is_scalar(v):
            args[role] = ops.scalar(v)
        else:
            vv = ops.on_chip(v, "nl.where", role)
            srcs.append((vv, role))
            views.append(vv)
    shape = ops.nki_broadcast(*(s.shape for s, _ in srcs))
    return ops.result(
        "select", "dve", shape, ops.out_dtype(dtype, *views) if views else "float32", srcs, args, mask
    )


def softmax(x: Any, axis: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> View:
    m = max(x, axis, keepdims=True)
    e = exp(subtract(x, m))
    return divide(e, sum(e, axis, keepdims=True), dtype=dtype)


def rms_norm(
    x: Any, w: Any, axis: Any, n: int, epsilon: float = 1e-6, *, dtype: Any = None, **kwargs: Any
) -> View:
    ms = multiply(sum(square(x), axis, keepdims=True), 1.0 / n)
    return multiply(multiply(x, rsqrt(add(ms, epsilon))), w, dtype=dtype)


def device_print(prefix: str, x: Any, *, mask: Any = None, **kwargs: Any) -> None:
    """Printing needs values, which do not exist while the kernel is traced: ignored."""


def static_cast(input_data: Any, dtype: Any) -> Any:
    return np.asarray(input_data).astype(dtypes.STORAGE[dtypes.canon(dtype)])


def finfo(dtype: Any) -> Any:
    return ml_dtypes.finfo(dtypes.STORAGE[dtypes.canon(dtype)])


_REGISTERED = {k for k in dir() if not k.startswith("_")}


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise NotEmulated(f"nki.language.{name}")


del builtins
