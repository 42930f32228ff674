"""Building instructions from NKI API calls (shared by `language.py` and `isa.py`).

Conventions: `nki.isa` calls follow the hardware's rules strictly (nc_matmul reads SBUF and
writes PSUM, operands have the same number of partitions); `nki.language` calls are lowered
as the compiler lowers them, with the copies, transposes and partition broadcasts they need
(each one an instruction the cost model prices).
"""

from __future__ import annotations

import math
import sys
from typing import Any

import msgspec
import numpy as np

from hardware_agents.neuron.emulator import dtypes, validate
from hardware_agents.neuron.emulator import tracer as tr
from hardware_agents.neuron.emulator.errors import NKICompileError, NotEmulated
from hardware_agents.neuron.emulator.expr import Ix, Pred
from hardware_agents.neuron.emulator.program import COMPARISONS, LOGICAL, Access, Idx, Instr
from hardware_agents.neuron.emulator.tracer import ON_CHIP, View

# --- ALU operators and activation functions, by the objects a kernel passes --------------------

ALU_NAMES = (
    "add",
    "subtract",
    "multiply",
    "divide",
    "max",
    "min",
    "power",
    "mod",
    "fmod",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "left_shift",
    "right_shift",
    *COMPARISONS,
    *LOGICAL,
    "abs_max",
    "bypass",
    "rsqrt_op",
)
ACT_NAMES = (
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "reciprocal",
    "tanh",
    "sigmoid",
    "silu",
    "gelu",
    "gelu_apprx_tanh",
    "gelu_apprx_sigmoid",
    "gelu_dx",
    "silu_dx",
    "relu",
    "softplus",
    "mish",
    "sin",
    "cos",
    "tan",
    "arctan",
    "erf",
    "erf_dx",
    "square",
    "abs",
    "sign",
    "copy",
    "negative",
    "floor",
    "ceil",
    "trunc",
    "logical_not",
    "invert",
)

_NUMPY_ALU = {
    np.add: "add",
    np.subtract: "subtract",
    np.multiply: "multiply",
    np.divide: "divide",
    np.true_divide: "divide",
    np.maximum: "max",
    np.minimum: "min",
    np.max: "max",
    np.min: "min",
    np.amax: "max",
    np.amin: "min",
    np.power: "power",
    np.mod: "mod",
    np.fmod: "fmod",
    np.bitwise_and: "bitwise_and",
    np.bitwise_or: "bitwise_or",
    np.bitwise_xor: "bitwise_xor",
    np.left_shift: "left_shift",
    np.right_shift: "right_shift",
    np.equal: "equal",
    np.not_equal: "not_equal",
    np.greater: "greater",
    np.greater_equal: "greater_equal",
    np.less: "less",
    np.less_equal: "less_equal",
    np.logical_and: "logical_and",
    np.logical_or: "logical_or",
    np.logical_xor: "logical_xor",
    np.sum: "add",
    np.prod: "multiply",
}
_NUMPY_ACT = {
    np.exp: "exp",
    np.log: "log",
    np.sqrt: "sqrt",
    np.reciprocal: "reciprocal",
    np.tanh: "tanh",
    np.sin: "sin",
    np.cos: "cos",
    np.tan: "tan",
    np.arctan: "arctan",
    np.square: "square",
    np.abs: "abs",
    np.absolute: "abs",
    np.sign: "sign",
    np.negative: "negative",
    np.floor: "floor",
    np.ceil: "ceil",
    np.trunc: "trunc",
    np.copy: "copy",
}
NL_FUNCS: dict[Any, str] = {}  # filled by language.py: nl.add -> "add", nl.exp -> "exp", ...


def alu_name(op: Any, api: str) -> str:
    return _named(op, ALU_NAMES, _NUMPY_ALU, f"{api} with operator")


def act_name(op: Any, api: str) -> str:
    return _named(op, ACT_NAMES, _NUMPY_ACT, f"{api} with activation function")


def _named(op: Any, names: tuple[str, ...], numpy_names: dict[Any, str], refused: str) -> str:
    """The emulator's name among `names` of `op` (a name, an nl function or a numpy one);
    anything else is NotEmulated, said as `refused` and the op's name."""
    if isinstance(op, str) and op in names:
        return op
    name = NL_FUNCS.get(op) or numpy_names.get(op)
    if name is None or name not in names:
        raise NotEmulated(f"{refused} {getattr(op, '__name__', op)!r}")
    return name


# --- operands ---------------------------------------------------------------------------------


def is_scalar(x: Any) -> bool:
    return isinstance(x, int | float | np.integer | np.floating | np.bool_) and not isinstance(x, Ix)


def scalar(x: Any) -> float:
    return float(x)


def as_view(x: Any, api: str, role: str) -> View:
    if isinstance(x, View):
        return x
    if isinstance(x, np.ndarray):
        raise NKICompileError(
            "err_unsupported_memory",
            f"operand '{role}' of '{api}' is a numpy array; kernel arguments are HBM tensors, "
            "constants come from nl.shared_constant",
        )
    if isinstance(x, Ix | Pred):
        raise NKICompileError(
            "err_cannot_assign_to_index",
            f"operand '{role}' of '{api}' is an index expression; convert it with nisa.iota",
        )
    raise NKICompileError(
        "err_invalid_operand", f"operand '{role}' of '{api}' is a {type(x).__name__}, not a tile"
    )


def on_chip(x: Any, api: str, role: str) -> View:
    """A compute operand: an on-chip tile with the partition dimension first."""
    v = as_view(x, api, role)
    d = v.decl
    if d["buffer"] not in ON_CHIP:
        raise NKICompileError(
            "err_unsupported_memory",
            f"Expected operand '{role}' of '{api}' to be in address space 'psum|sbuf', but got a "
            f"tile in 'hbm' instead.",
        )
    pa = d["par_axis"]
    if pa > 0 and v._is_full():
        raise NKICompileError(
            "err_failed_to_infer_tile_from_local_tensor",
            f"Failed to infer tile from tensor '{d['name']}': its first dimension is not the partition "
            "dimension; index its block dimensions first",
        )
    if not v.shape:
        raise NKICompileError("err_invalid_operand", f"operand '{role}' of '{api}' is a scalar element")
    return v


def dtype_of(v: View) -> str:
    return str(v.decl["dtype"])


def mask_of(mask: Any) -> tuple[list[Idx], list[int]]:
    if mask is None or mask is True:
        return [], []
    if mask is False or (isinstance(mask, np.bool_) and not mask):
        return [Idx(c=-1)], []
    if isinstance(mask, np.bool_):
        return [], []
    if not isinstance(mask, Pred):
        raise NKICompileError(
            "err_unsupported_expression_in_mask",
            "NKI mask expressions must be affine expressions of static loop indices",
        )
    shape = mask.shape
    terms = []
    for t in mask.terms:
        a = t._aligned(len(shape))
        terms.append(Idx(c=a.const, loops=sorted(a.loops.items()), axes=sorted(a.axes.items())))
    return terms, list(shape)


# --- emission --------------------------------------------------------------------------------


def _check_write(dst: Access, mask: list[Idx], acc: bool) -> None:
    """err_unexpected_output_dependencies: in an affine_range loop, a (non-accumulating)
    write into a tensor from outside the loop must depend on the loop's index."""
    t = tr.current()
    if acc:
        return
    scope = t.decl(dst.tensor)["scope"]
    inside = scope < 0
    for f in t.loops:
        if not inside:
            inside = f.var == scope
            continue
        if f.kind == "affine" and f.trip > 1 and not validate.write_depends(dst, mask, f.var):
            name = t.decl(dst.tensor)["name"]
            raise NKICompileError(
                "err_unexpected_output_dependencies",
                f"Unexpected output dependencies, different iterations of an nl.affine_range loop (trip {f.trip}) "
                f"write to the same location of `{name}`: index the destination with the loop index, accumulate "
                "with `+=`, or use nl.sequential_range",
            )


def emit(
    op: str,
    engine: str,
    dst: View | None,
    srcs: list[tuple[View, str]],
    args: dict[str, Any] | None = None,
    mask: Any = None,
    acc: bool = False,
    reduction: bool = False,
) -> Instr:
    t = tr.current()
    terms, mshape = mask_of(mask)
    dst_acc = dst.access() if dst is not None else None
    src_accs = [v.access() for v, _ in srcs]
    ins = Instr(
        op=op,
        engine=engine,
        dst=dst_acc,
        srcs=src_accs,
        roles=[r for _, r in srcs],
        args=args or {},
        mask=terms,
        mask_shape=mshape,
        acc=acc,
        line=tr.source_line(),
    )
    validate.check_instr(ins, t.decl, t.trips)
    if dst_acc is not None:
        _check_write(dst_acc, terms, acc or reduction or op == "loop_reduce")
        t.written.add(dst_acc.tensor)
        base = t.decl(dst_acc.tensor)["alias"]
        if base >= 0:
            t.written.add(base)
    return t.emit(ins)


def temp(shape: tuple[int, ...], dtype: str, buffer: str = "sbuf") -> View:
    t = tr.current()
    if buffer in ON_CHIP and shape and shape[0] > validate.PMAX:
        raise NKICompileError(
            "err_num_partition_exceed_arch_limit",
            f"number of partitions {shape[0]} exceed architecture limitation of {validate.PMAX}.",
        )
    tid = t.new_tensor(shape, dtype, buffer, name=f"tmp{len(t.decls)}", par_axis=0, temp=True)
    validate.check_decl(t.decl(tid))
    return View.full(tid)


def result(
    op: str,
    engine: str,
    shape: tuple[int, ...],
    dtype: str,
    srcs: list[tuple[View, str]],
    args: dict[str, Any] | None = None,
    mask: Any = None,
    buffer: str = "sbuf",
) -> View:
    out = temp(shape, dtype, buffer)
    emit(op, engine, out, srcs, args, mask)
    tr.current().mark_fresh(out.tid)
    return out


def nki_broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NKI broadcasting: the partition dimensions (first) match or are 1; the free dimensions
    broadcast as numpy does (right-aligned)."""
    shapes = tuple(s for s in shapes if s)
    if not shapes:
        return ()
    p = 1
    for s in shapes:
        if s[0] != 1:
            if p not in (1, s[0]):
                raise NKICompileError(
                    "err_num_partition_mismatch",
                    f"number of partitions (dimension 0 size of a tile) mismatch: {[list(x) for x in shapes]}",
                )
            p = s[0]
    try:
        free = np.broadcast_shapes(*(s[1:] for s in shapes))
    except ValueError:
        raise NKICompileError(
            "err_shape_mismatch", f"tile shapes {[list(x) for x in shapes]} cannot be broadcast together"
        ) from None
    return (p, *free)


# --- assignment -------------------------------------------------------------------------------


class LoopReduce:
    """What `nl.loop_reduce` returns: meaningful only as `dst[...] = nl.loop_reduce(...)`."""

    def __init__(self, x: View, op: str, loops: list[int], dtype: str | None, mask: Any) -> None:
        self.x, self.op, self.loops, self.dtype, self.mask = x, op, loops, dtype, mask


def _same_count(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return bool(a) and bool(b) and a[0] == b[0] and math.prod(a[1:]) == math.prod(b[1:])


def _retarget(dst: View, value: View, acc: bool) -> bool:
    t = tr.current()
    prod = t.last_producer(value.tid)
    if prod is None or not value._is_full() or prod.dst is None:
        return False
    if not (value.shape == dst.shape or _same_count(value.shape, dst.shape)):
        return False
    dbuf = dst.decl["buffer"]
    if prod.op == "matmul" or (prod.op == "transpose" and prod.engine == "pe"):
        if dbuf != "psum":
            return False
    elif acc:
        return False
    if prod.op == "dma" and dbuf != "sbuf":
        return False
    new_dst = dst.access()
    ins = msgspec.structs.replace(prod, dst=new_dst, acc=acc)  # the producer, writing into dst
    validate.check_instr(ins, t.decl, t.trips)
    _check_write(new_dst, ins.mask, acc)
    t.replace_last(ins)
    t.written.add(new_dst.tensor)
    return True


def assign(dst: View, value: Any) -> None:
    """`dst[...] = value`."""
    d = dst.decl
    if d["buffer"] not in ON_CHIP:
        if d["buffer"] == "input":
            raise NKICompileError(
                "err_cannot_update_immutable_parameter", f"Cannot update immutable parameter '{d['name']}'"
            )
        raise NKICompileError(
            "err_unsupported_memory",
            f"assigning into HBM tensor '{d['name']}' is not supported: use nl.store",
        )
    if isinstance(value, LoopReduce):
        x = on_chip(value.x, "loop_reduce", "x")
        nki_broadcast(x.shape, dst.shape)
        emit("loop_reduce", "dve", dst, [(x, "data")], {"op": value.op, "loops": value.loops}, value.mask)
        return
    if is_scalar(value):  # GpSimd has no PSUM access
        emit("memset", "dve" if d["buffer"] == "psum" else "any:dve,pool", dst, [], {"value": scalar(value)})
        return
    v = as_view(value, "assignment", "value")
    if v.decl["buffer"] not in ON_CHIP:
        raise NKICompileError(
            "err_unsupported_memory",
            f"assigning HBM tensor '{v.name}' into an on-chip tile is not supported: use nl.load",
        )
    if v.same_as(dst):
        return
    if _retarget(dst, v, acc=False):
        return
    if not (v.shape == dst.shape or _same_count(v.shape, dst.shape)):
        try:
            b = nki_broadcast(v.shape, dst.shape)
        except NKICompileError:
            b = None
        if b != tuple(dst.shape):
            raise NKICompileError(
                "err_store_dst_shape_smaller_than_other_shape",
                f"Illegal assignment destination shape in 'a = b': shape {list(dst.shape)} of "
                f"parameter 'a' is smaller than other parameter shapes b{list(v.shape)}.",
            )
    copy_into(dst, v)


def copy_into(dst: View, v: View, dtype: str | None = None, mask: Any = None) -> None:
    psum = "psum" in (dst.decl["buffer"], v.decl["buffer"])
    emit("copy", "any:act,dve" if psum else "any:act,dve,pool", dst, [(v, "data")], {}, mask)


def accumulate(dst: View, value: Any, op: str) -> None:
    """`dst += value` (and -=, *=, /=): PSUM accumulation of a matmul result, else a
    Vector Engine tensor_tensor (or tensor_scalar) into dst."""
    d = dst.decl
    if d["buffer"] not in ON_CHIP:
        raise NKICompileError(
            "err_unsupported_memory", f"`{op}=` on HBM tensor '{d['name']}' is not supported"
        )
    if is_scalar(value):
        emit(
            "tensor_scalar",
            "any:act,dve",
            dst,
            [(dst, "data")],
            {"op0": op, "scalar0": scalar(value)},
            reduction=True,
        )
        return
    v = as_view(value, f"{op}=", "value")
    if op == "add" and _retarget(dst, v, acc=True):
        return
    v = on_chip(v, f"{op}=", "value")
    nki_broadcast(dst.shape, v.shape)
    emit("tensor_tensor", "dve", dst, [(dst, "data1"), (v, "data2")], {"op": op}, reduction=True)


# --- high-level helpers -----------------------------------------------------------------------


def out_dtype(dtype: Any, *views: View) -> str:
    if dtype is not None:
        return dtypes.canon(dtype)
    return dtypes.promote(*(dtype_of(v) for v in views)) if views else "float32"


def binary(op: str, x: Any, y: Any, *, dtype: Any = None, mask: Any = None, api: str = "") -> Any:
    api = api or f"nl.{op}"
    if is_scalar(x) and is_scalar(y):
        from hardware_agents.neuron.emulator.execute import alu

        return alu(op, np.float32(x), np.float32(y)).item()
    bool_out = op in COMPARISONS or op in LOGICAL
    if is_scalar(x) or is_scalar(y):
        tile, s, rev = (y, x, True) if is_scalar(x) else (x, y, False)
        v = on_chip(tile, api, "x")
        dt = "bool" if bool_out and dtype is None else out_dtype(dtype, v)
        eng = "any:act,dve" if op in ("add", "multiply", "subtract") else "dve"
        return result(
            "tensor_scalar",
            eng,
            v.shape,
            dt,
            [(v, "data")],
            {"op0": op, "scalar0": scalar(s), "reverse0": rev},
            mask,
        )
    a, b = on_chip(x, api, "x"), on_chip(y, api, "y")
    shape = nki_broadcast(a.shape, b.shape)
    dt = "bool" if bool_out and dtype is None else out_dtype(dtype, a, b)
    a, b = _partition_broadcast(a, shape[0]), _partition_broadcast(b, shape[0])
    # a vector operand (one element per partition) is a tensor_scalar operand
    for vec, full, rev in ((b, a, False), (a, b, True)):
        if math.prod(vec.shape[1:]) == 1 and tuple(full.shape) == shape and math.prod(shape[1:]) > 1:
            eng = "any:act,dve" if op in ("add", "multiply") else "dve"
            return result(
                "tensor_scalar",
                eng,
                shape,
                dt,
                [(full, "data"), (vec, "operand0")],
                {"op0": op, "reverse0": rev},
                mask,
            )
    return result("tensor_tensor", "dve", shape, dt, [(a, "data1"), (b, "data2")], {"op": op}, mask)


def _partition_broadcast(v: View, p: int) -> View:
    if v.shape[0] == p or p == 1:
        return v
    return broadcast_to(v, (p, *v.shape[1:]))


def unary(fn: str, x: Any, *, dtype: Any = None, mask: Any = None, api: str = "") -> View:
    v = on_chip(x, api or f"nl.{fn}", "x")
    dt = "bool" if fn == "logical_not" and dtype is None else out_dtype(dtype, v)
    eng = "any:act,dve" if fn in ("negative", "abs", "copy") else "act"
    return result("act", eng, v.shape, dt, [(v, "data")], {"fn": fn, "scale": 1.0}, mask)


def reduce(
    op: str,
    x: Any,
    axis: Any,
    *,
    dtype: Any = None,
    mask: Any = None,
    keepdims: bool = False,
    negate: bool = False,
    scale: float = 1.0,
    api: str = "",
) -> View:
    api = api or f"nl.{op}"
    v = on_chip(x, api, "x")
    axes = sorted({int(a) for a in (axis if isinstance(axis, list | tuple) else [axis])})
    if not axes or any(a < 1 or a >= len(v.shape) for a in axes):
        raise NKICompileError(
            "err_invalid_axis",
            f"the axis of '{api}' must be free dimensions (1..{len(v.shape) - 1}), not {axis}; the "
            "partition dimension (0) cannot be reduced here",
        )
    shape = (
        tuple(1 if i in axes else s for i, s in enumerate(v.shape))
        if keepdims
        else tuple(s for i, s in enumerate(v.shape) if i not in axes)
    )
    return result(
        "reduce",
        "dve",
        shape,
        out_dtype(dtype, v),
        [(v, "data")],
        {"op": op, "axes": axes, "negate": bool(negate), "scale": float(scale)},
        mask,
    )


def broadcast_to(x: View, shape: tuple[int, ...]) -> View:
    v = on_chip(x, "broadcast_to", "src")
    if tuple(v.shape) == tuple(shape):
        return v
    if nki_broadcast(v.shape, shape) != tuple(shape):
        raise NKICompileError("err_shape_mismatch", f"cannot broadcast {list(v.shape)} to {list(shape)}")
    if v.shape[0] == shape[0]:
        return result("copy", "any:act,dve", shape, dtype_of(v), [(v, "data")])
    # partition broadcast: ones-matmuls on the Tensor Engine, 512 columns at a time through PSUM and
    # copied out to SBUF (one instruction here; the cost model prices both halves)
    return result("broadcast", "pe", shape, dtype_of(v), [(v, "data")])


def copy(x: Any, *, dtype: Any = None, mask: Any = None, engine: str = "any:act,dve,pool") -> View:
    v = on_chip(x, "nl.copy", "src")
    if v.decl["buffer"] == "psum":
        engine = "any:act,dve" if engine.startswith("any") else engine
    return result("copy", engine, v.shape, out_dtype(dtype, v), [(v, "data")], {}, mask)


def transpose(x: Any, *, dtype: Any = None, mask: Any = None, engine: str = "", strict: bool = False) -> View:
    """A PF transpose: on the Tensor Engine (SBUF -> PSUM) or, up to 32x32, the Vector Engine."""
    api = "nc_transpose" if strict else "nl.transpose"
    v = on_chip(x, api, "data")
    f = math.prod(v.shape[1:])
    shape = (f, v.shape[0])
    if f > validate.PMAX:
        raise NKICompileError(
            "err_size_of_dimension_exceed_arch_limit",
            f"size of dimension 1 in 'x{list(v.shape)}' of '{api}' exceed architecture limitation "
            f"of {validate.PMAX}.",
        )
    eng = engine or "pe"  # nl.transpose: the Tensor Engine (the compiler's choice for these sizes)
    dt = out_dtype(dtype, v)
    if eng == "dve":
        return result("transpose", "dve", shape, dt, [(v, "data")], {}, mask)
    src = v
    if src.decl["buffer"] != "sbuf":
        if strict:
            raise NKICompileError(
                "err_unsupported_memory", "a Tensor Engine transpose reads its input from SBUF"
            )
        src = copy(v)
    out = result("transpose", "pe", shape, dt, [(src, "data")], {}, mask, buffer="psum")
    return out if strict else copy(out)


def matmul(stationary: View, moving: View, *, flags: dict[str, Any], mask: Any = None) -> View:
    s, m = stationary.shape, moving.shape
    shape = (math.prod(s[1:]), math.prod(m[1:]))
    return result(
        "matmul",
        "pe",
        shape,
        "float32",
        [(stationary, "stationary"), (moving, "moving")],
        flags,
        mask,
        buffer="psum",
    )


def sbuf_operand(x: Any, api: str, role: str, lenient: bool) -> View:
    v = on_chip(x, api, role)
    if v.decl["buffer"] != "sbuf":
        if not lenient:
            raise NKICompileError(
                "err_unsupported_memory",
                f"Expected operand '{role}' of '{api}' to be in address space 'sbuf', but got a tile "
                f"in '{v.decl['buffer']}' instead.",
            )
        v = copy(v)
    return v


tr.install_ops(sys.modules[__name__])  # the operators of View (see tracer.install_ops)

__all__ = [
    "ACT_NAMES",
    "ALU_NAMES",
    "NL_FUNCS",
    "LoopReduce",
    "accumulate",
    "act_name",
    "alu_name",
    "as_view",
    "assign",
    "binary",
    "broadcast_to",
    "copy",
    "copy_into",
    "emit",
    "is_scalar",
    "mask_of",
    "matmul",
    "nki_broadcast",
    "on_chip",
    "out_dtype",
    "reduce",
    "result",
    "sbuf_operand",
    "scalar",
    "temp",
    "transpose",
    "unary",
]
