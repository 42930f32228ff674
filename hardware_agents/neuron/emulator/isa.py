"""`neuronxcc.nki.isa` (nisa) in the emulator: one instruction per call, with the hardware's
operand rules (see the NKI ISA reference). Anything not defined here raises `NotEmulated`."""

from __future__ import annotations

import math
from enum import IntEnum
from typing import Any

from hardware_agents.neuron.emulator import dtypes, ops, validate
from hardware_agents.neuron.emulator import tracer as tr
from hardware_agents.neuron.emulator.errors import NKICompileError, NotEmulated
from hardware_agents.neuron.emulator.expr import Ix, Pred
from hardware_agents.neuron.emulator.tracer import View


class _Engine:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"nki.isa.{self.name}"


unknown_engine = _Engine("unknown_engine")
tensor_engine = _Engine("tensor_engine")
vector_engine = _Engine("vector_engine")
scalar_engine = _Engine("scalar_engine")
gpsimd_engine = _Engine("gpsimd_engine")
dma_engine = _Engine("dma_engine")
_ENGINE = {
    "tensor_engine": "pe",
    "vector_engine": "dve",
    "scalar_engine": "act",
    "gpsimd_engine": "pool",
    "dma_engine": "dma",
}


class nc_version(IntEnum):
    gen2 = 2
    gen3 = 3


def get_nc_version() -> nc_version:
    return nc_version.gen2


def _engine(engine: Any, allowed: str, default: str) -> str:
    """An explicit engine (when allowed) or the compiler's choice among `default`."""
    if engine is None or engine == 0 or engine is unknown_engine:
        return default
    name = _ENGINE.get(getattr(engine, "name", ""), "")
    if name not in allowed.split(","):
        raise NKICompileError("err_unsupported_engine", f"engine {engine!r} cannot run this instruction")
    return name


def nc_matmul(
    *args: Any,
    is_stationary_onezero: bool = False,
    is_moving_onezero: bool = False,
    is_transpose: bool = False,
    mask: Any = None,
    **kwargs: Any,
) -> Any:
    """stationary.T @ moving on the Tensor Engine: SBUF operands, a PSUM result (fp32)."""
    dst = kwargs.pop("dst", None)
    stationary, moving = kwargs.pop("stationary", None), kwargs.pop("moving", None)
    pos = list(args)
    if len(pos) == 3:
        dst, stationary, moving = pos
    elif len(pos) == 2:
        stationary, moving = pos
    elif len(pos) == 1:
        stationary = pos[0]
    s = ops.sbuf_operand(stationary, "nc_matmul", "stationary", lenient=False)
    m = ops.sbuf_operand(moving, "nc_matmul", "moving", lenient=False)
    validate.check_matmul(s.access(), m.access())
    flags = {
        "stationary_onezero": bool(is_stationary_onezero),
        "moving_onezero": bool(is_moving_onezero),
        "transpose": bool(is_transpose),
    }
    out = ops.matmul(s, m, flags=flags, mask=mask)
    if dst is not None:  # the newer signature: nc_matmul(dst, stationary, moving, accumulate=...)
        d = ops.as_view(dst, "nc_matmul", "dst")
        if kwargs.get("accumulate"):
            ops.accumulate(d, out, "add")
        else:
            ops.assign(d, out)
        return None
    return out


def nc_transpose(
    data: Any, *, mask: Any = None, dtype: Any = None, engine: Any = None, **kwargs: Any
) -> View:
    v = ops.on_chip(data, "nc_transpose", "data")
    f = math.prod(v.shape[1:])
    eng = _engine(engine, "pe,dve", "pe" if v.shape[0] > 32 or f > 32 else "dve")
    return ops.transpose(v, dtype=dtype, mask=mask, engine=eng, strict=True)


def activation(
    op: Any,
    data: Any,
    *,
    bias: Any = None,
    scale: Any = 1.0,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> View:
    """op(data * scale + bias) on the Scalar Engine."""
    fn = ops.act_name(op, "activation")
    v = ops.on_chip(data, "activation", "data")
    srcs: list[tuple[View, str]] = [(v, "data")]
    args: dict[str, Any] = {"fn": fn}
    if ops.is_scalar(scale):
        args["scale"] = ops.scalar(scale)
    else:
        s = ops.on_chip(scale, "activation", "scale")
        if math.prod(s.shape[1:]) != 1 or s.shape[0] != v.shape[0]:
            raise NKICompileError(
                "err_activation_scale_scalar_or_vector",
                "Scale parameter of activation must be either a scalar value or a 1D vector "
                "spanning the partition dimension.",
            )
        srcs.append((s, "scale"))
    if bias is not None:
        b = ops.on_chip(bias, "activation", "bias")
        if math.prod(b.shape[1:]) != 1 or b.shape[0] != v.shape[0]:
            raise NKICompileError(
                "err_activation_bias_invalid_type",
                "Bias parameter of activation must be a vector with one element per partition of "
                "the data tile.",
            )
        srcs.append((b, "bias"))
    return ops.result("act", "act", v.shape, ops.out_dtype(dtype, v), srcs, args, mask)


def activation_reduce(
    op: Any,
    data: Any,
    *,
    reduce_op: Any,
    reduce_res: Any,
    bias: Any = None,
    scale: Any = 1.0,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> View:
    if ops.alu_name(reduce_op, "activation_reduce") != "add":
        raise NKICompileError(
            "err_unsupported_reduce_op", "On NeuronCore-v2, the reduce_op can only be an addition"
        )
    out = activation(op, data, bias=bias, scale=scale, mask=mask, dtype=dtype)
    red = ops.as_view(reduce_res, "activation_reduce", "reduce_res")
    ops.emit(
        "reduce",
        "act",
        red,
        [(out, "data")],
        {
            "op": "add",
            "axes": list(range(1, len(out.shape))),
            "negate": False,
            "scale": 1.0,
            "pipelined": True,
        },
    )
    return out


def tensor_scalar(
    data: Any,
    op0: Any,
    operand0: Any,
    reverse0: bool = False,
    op1: Any = None,
    operand1: Any = None,
    reverse1: bool = False,
    *,
    dtype: Any = None,
    mask: Any = None,
    engine: Any = None,
    **kwargs: Any,
) -> View:
    v = ops.on_chip(data, "tensor_scalar", "data")
    srcs: list[tuple[View, str]] = [(v, "data")]
    args: dict[str, Any] = {"op0": ops.alu_name(op0, "tensor_scalar"), "reverse0": bool(reverse0)}
    for k, operand in ((0, operand0), (1, operand1)):
        if k == 1 and op1 is None:
            break
        if ops.is_scalar(operand):
            args[f"scalar{k}"] = ops.scalar(operand)
        else:
            o = ops.on_chip(operand, "tensor_scalar", f"operand{k}")
            if o.shape[0] != v.shape[0] or math.prod(o.shape[1:]) != 1:
                raise NKICompileError(
                    "err_num_partition_mismatch",
                    f"operand{k} of 'tensor_scalar' must be a scalar or a tile of shape "
                    f"({v.shape[0]}, 1), got {list(o.shape)}",
                )
            srcs.append((o, f"operand{k}"))
    if op1 is not None:
        args["op1"] = ops.alu_name(op1, "tensor_scalar")
        args["reverse1"] = bool(reverse1)
    act_ok = (args["op0"], args.get("op1")) in (("multiply", "add"), ("multiply", None), ("add", None))
    eng = _engine(engine, "dve,act" if act_ok else "dve", "any:act,dve" if act_ok else "dve")
    return ops.result("tensor_scalar", eng, v.shape, ops.out_dtype(dtype, v), srcs, args, mask)


def tensor_tensor(
    data1: Any, data2: Any, op: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any
) -> View:
    a = ops.on_chip(data1, "tensor_tensor", "data1")
    b = ops.on_chip(data2, "tensor_tensor", "data2")
    if a.shape[0] != b.shape[0]:
        raise NKICompileError(
            "err_num_partition_mismatch",
            f"number of partitions (dimension 0 size of a tile) mismatch in parameters (data1"
            f"{list(a.shape)}, data2{list(b.shape)}) of 'tensor_tensor'",
        )
    if math.prod(a.shape[1:]) != math.prod(b.shape[1:]):
        raise NKICompileError(
            "err_shape_mismatch",
            f"tensor_tensor operands must have the same number of elements per partition: "
            f"{list(a.shape)} and {list(b.shape)} (use tensor_scalar to broadcast)",
        )
    if a.decl["buffer"] == "psum" and b.decl["buffer"] == "psum":
        raise NKICompileError(
            "err_unsupported_memory", "the two inputs of tensor_tensor cannot both be in PSUM"
        )
    name = ops.alu_name(op, "tensor_tensor")
    psum = "psum" in (a.decl["buffer"], b.decl["buffer"])
    eng = "pool" if name == "power" and not psum else "dve"  # GpSimd has no PSUM access
    return ops.result(
        "tensor_tensor",
        eng,
        a.shape,
        ops.out_dtype(dtype, a, b),
        [(a, "data1"), (b, "data2")],
        {"op": name},
        mask,
    )


def scalar_tensor_tensor(
    *,
    data: Any,
    op0: Any,
    operand0: Any,
    op1: Any,
    operand1: Any,
    reverse0: bool = False,
    reverse1: bool = False,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> View:
    v = ops.on_chip(data, "scalar_tensor_tensor", "data")
    o1 = ops.on_chip(operand1, "scalar_tensor_tensor", "operand1")
    srcs: list[tuple[View, str]] = [(v, "data"), (o1, "operand1")]
    args: dict[str, Any] = {
        "op0": ops.alu_name(op0, "scalar_tensor_tensor"),
        "reverse0": bool(reverse0),
        "op1": ops.alu_name(op1, "scalar_tensor_tensor"),
        "reverse1": bool(reverse1),
    }
    if ops.is_scalar(operand0):
        args["scalar0"] = ops.scalar(operand0)
    else:
        srcs.append((ops.on_chip(operand0, "scalar_tensor_tensor", "operand0"), "operand0"))
    return ops.result("scalar_tensor_tensor", "dve", v.shape, ops.out_dtype(dtype, v), srcs, args, mask)


def tensor_reduce(
    op: Any,
    data: Any,
    axis: Any,
    *,
    mask: Any = None,
    dtype: Any = None,
    negate: bool = False,
    keepdims: bool = False,
    **kwargs: Any,
) -> View:
    return ops.reduce(
        ops.alu_name(op, "tensor_reduce"),
        data,
        axis,
        dtype=dtype,
        mask=mask,
        keepdims=keepdims,
        negate=negate,
        api="tensor_reduce",
    )


def tensor_scalar_reduce(
    *,
    data: Any,
    op0: Any,
    operand0: Any,
    reduce_op: Any,
    reduce_res: Any,
    reverse0: bool = False,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> View:
    out = tensor_scalar(data, op0, operand0, reverse0, dtype=dtype, mask=mask, engine=vector_engine)
    red = ops.as_view(reduce_res, "tensor_scalar_reduce", "reduce_res")
    ops.emit(
        "reduce",
        "dve",
        red,
        [(out, "data")],
        {
            "op": ops.alu_name(reduce_op, "tensor_scalar_reduce"),
            "axes": list(range(1, len(out.shape))),
            "negate": False,
            "scale": 1.0,
            "pipelined": True,
        },
    )
    return out


def tensor_tensor_scan(
    data0: Any,
    data1: Any,
    initial: Any,
    op0: Any,
    op1: Any,
    reverse0: bool = False,
    reverse1: bool = False,
    *,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> View:
    a = ops.on_chip(data0, "tensor_tensor_scan", "data0")
    b = ops.on_chip(data1, "tensor_tensor_scan", "data1")
    if a.shape[0] != b.shape[0] or math.prod(a.shape[1:]) != math.prod(b.shape[1:]):
        raise NKICompileError(
            "err_shape_mismatch",
            f"tensor_tensor_scan operands must have the same shape: {list(a.shape)}, {list(b.shape)}",
        )
    srcs: list[tuple[View, str]] = [(a, "data0"), (b, "data1")]
    args: dict[str, Any] = {
        "op0": ops.alu_name(op0, "tensor_tensor_scan"),
        "op1": ops.alu_name(op1, "tensor_tensor_scan"),
        "reverse0": bool(reverse0),
        "reverse1": bool(reverse1),
    }
    if ops.is_scalar(initial):
        args["initial"] = ops.scalar(initial)
    else:
        srcs.append((ops.on_chip(initial, "tensor_tensor_scan", "initial"), "initial"))
    return ops.result("scan", "dve", a.shape, ops.out_dtype(dtype, a, b), srcs, args, mask)


def tensor_copy(src: Any, *, mask: Any = None, dtype: Any = None, engine: Any = None, **kwargs: Any) -> View:
    v = ops.on_chip(src, "tensor_copy", "src")
    psum = v.decl["buffer"] == "psum"
    eng = _engine(
        engine, "dve,act" if psum else "dve,act,pool", "any:act,dve" if psum else "any:act,dve,pool"
    )
    return ops.copy(v, dtype=dtype, mask=mask, engine=eng)


def reciprocal(data: Any, *, dtype: Any = None, mask: Any = None, engine: Any = None, **kwargs: Any) -> View:
    v = ops.on_chip(data, "reciprocal", "data")
    eng = _engine(engine, "dve,act", "any:act,dve")
    return ops.result(
        "act", eng, v.shape, ops.out_dtype(dtype, v), [(v, "data")], {"fn": "reciprocal", "scale": 1.0}, mask
    )


def memset(
    shape: Any, value: Any, dtype: Any, *, mask: Any = None, engine: Any = None, **kwargs: Any
) -> View:
    shp = tuple(int(s) for s in shape)
    eng = _engine(engine, "dve,pool", "any:dve,pool")
    out = ops.temp(shp, dtypes.canon(dtype))
    ops.emit("memset", eng, out, [], {"value": float(value)}, mask)
    tr.current().mark_fresh(out.tid)
    return out


def iota(expr: Any, dtype: Any, *, mask: Any = None, **kwargs: Any) -> View:
    e = Ix.of(expr) if not isinstance(expr, Ix) else expr
    shape = e.shape if e.shape else (1, 1)
    if len(shape) == 1:
        shape = (shape[0], 1)
    e = e._aligned(len(shape)) if e.shape else Ix(e.const, e.loops, None, shape)
    out = ops.temp(tuple(shape), dtypes.canon(dtype))
    ops.emit(
        "iota",
        "pool",
        out,
        [],
        {"c": e.const, "loops": sorted(e.loops.items()), "axes": sorted(e.axes.items())},
        mask,
    )
    tr.current().mark_fresh(out.tid)
    return out


def affine_select(
    pred: Any, on_true_tile: Any, on_false_value: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any
) -> View:
    v = ops.on_chip(on_true_tile, "affine_select", "on_true_tile")
    if not isinstance(pred, Pred):
        raise NKICompileError("err_unsupported_expression_in_mask", "affine_select takes an affine predicate")
    terms, pshape = ops.mask_of(pred)
    return ops.result(
        "affine_select",
        "pool",
        v.shape,
        ops.out_dtype(dtype, v),
        [(v, "data")],
        {
            "pred": [[t.c, t.loops, t.axes] for t in terms],
            "pred_shape": pshape,
            "fill": float(on_false_value),
        },
        mask,
    )


def bn_stats(data: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> View:
    v = ops.on_chip(data, "bn_stats", "data")
    if math.prod(v.shape[1:]) > 512:
        raise NKICompileError(
            "err_size_of_dimension_exceed_arch_limit",
            "the free size of bn_stats' input must not exceed 512 (nl.tile_size.bn_stats_fmax)",
        )
    return ops.result("bn_stats", "dve", (v.shape[0], 6), ops.out_dtype(dtype, v), [(v, "data")], {}, mask)


def bn_aggr(data: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> View:
    v = ops.on_chip(data, "bn_aggr", "data")
    if math.prod(v.shape[1:]) % 3:
        raise NKICompileError("err_invalid_shape", "bn_aggr takes (count, mean, var*count) triples")
    return ops.result("bn_aggr", "dve", (v.shape[0], 2), ops.out_dtype(dtype, v), [(v, "data")], {}, mask)


def dma_copy(*args: Any, dst: Any = None, src: Any = None, mask: Any = None, **kwargs: Any) -> None:
    if args:
        if len(args) == 2 and dst is None and src is None:
            src, dst = args  # the documented order is (src, dst)
        else:
            raise NKICompileError("err_invalid_call", "call dma_copy(dst=..., src=...)")
    d = ops.as_view(dst, "dma_copy", "dst")
    s = ops.as_view(src, "dma_copy", "src")
    if d.decl["buffer"] == "input":
        raise NKICompileError(
            "err_cannot_update_immutable_parameter", f"Cannot update immutable parameter '{d.name}'"
        )
    if d.decl["buffer"] == "psum" or s.decl["buffer"] == "psum":
        raise NKICompileError(
            "err_unsupported_memory", "DMA engines move data between HBM and SBUF, not PSUM"
        )
    if tuple(s.shape) != tuple(d.shape) and not ops._same_count(tuple(s.shape), tuple(d.shape)):
        raise NKICompileError(
            "err_shape_mismatch", f"dma_copy shapes differ: {list(s.shape)} -> {list(d.shape)}"
        )
    ops.emit("dma", "dma", d, [(s, "src")], {}, mask)


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise NotEmulated(f"nki.isa.{name}")
