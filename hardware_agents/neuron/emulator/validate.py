"""Static checks of accesses and instructions, shared by the tracer (which raises them as the
NKI compiler would, while the kernel is traced) and the trusted side (which re-checks every
instruction of a `Program` it received from the sandbox before executing or pricing it).

The trusted side believes no field of a program it did not check: every field the cost model
prices by (an instruction's engine, its operands' roles and shapes, the one/zero flags, the
pipelined reduce, accumulation, tensors' buffers, aliases, scopes) is checked here against
what the executor does with it (docs/neuron.md, "What the estimate trusts"); the one/zero
flags, which only data can confirm, are checked by the executor on the data."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from hardware_agents.neuron.emulator import dtypes
from hardware_agents.neuron.emulator.errors import NKICompileError
from hardware_agents.neuron.emulator.program import Access, Alloc, Idx, Instr, Loop, Node, Program

PMAX = 128
SBUF_PARTITION_BYTES = 192 * 1024
PSUM_PARTITION_BYTES = 16 * 1024
PSUM_BANK_FP32 = 512
SBUF_FREE_MAX = 64 * 1024  # elements per partition an engine instruction may stream from SBUF
PSUM_FREE_MAX = 4 * 1024
STATIONARY_FMAX = 128
MOVING_FMAX = 512
ON_CHIP = ("sbuf", "psum")
HBM_BUFFERS = ("input", "shared_hbm", "hbm", "const")
MAX_CONSTANT_BYTES = 4 << 20  # host-computed constant data one program may carry (docs/neuron.md)
MAX_LOOPS = 1 << 20

ENGINES = ("pe", "act", "dve", "pool", "dma")

Decl = Callable[[int], Any]  # tensor id -> its declaration (dict or TensorDecl)

# Each instruction kind's operands, by role, in the order the tracer emits them: the required
# roles first, then any of the optional ones (in this order). The cost model reads operands by
# position (the first source is the data it streams; a matmul's first is the stationary), the
# executor by role, so the two must agree.
ROLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "copy": (("data",), ()),
    "memset": ((), ()),
    "iota": ((), ()),
    "act": (("data",), ("scale", "bias")),
    "tensor_scalar": (("data",), ("operand0", "operand1")),
    "scalar_tensor_tensor": (("data", "operand1"), ("operand0",)),
    "tensor_tensor": (("data1", "data2"), ()),
    "reduce": (("data",), ()),
    "loop_reduce": (("data",), ()),
    "transpose": (("data",), ()),
    "broadcast": (("data",), ()),
    "affine_select": (("data",), ()),
    "bn_stats": (("data",), ()),
    "bn_aggr": (("data",), ()),
    "matmul": (("stationary", "moving"), ()),
    "scan": (("data0", "data1"), ("initial",)),
    "select": (("condition",), ("x", "y")),
}
_ACT_CAPABLE = ("add", "subtract", "multiply", "divide")  # a tensor_scalar ScalarE can do (scale and bias)
_PIPELINED_AFTER = {"act": "act", "dve": "tensor_scalar"}  # activation_reduce, tensor_scalar_reduce


def _get(d: Any, key: str) -> Any:
    return d[key] if isinstance(d, dict) else getattr(d, key)


def _invalid(msg: str) -> NKICompileError:
    return NKICompileError("err_invalid_program", msg)


def idx_bounds(e: Idx, trips: dict[int, int], shape: list[int]) -> tuple[int, int]:
    lo = hi = e.c
    for loop, coef in e.loops:
        span = coef * (trips.get(loop, 1) - 1)
        lo, hi = lo + min(0, span), hi + max(0, span)
    for axis, coef in e.axes:
        if axis >= len(shape):
            raise NKICompileError(
                "err_invalid_program", f"index axis {axis} outside a tile of {len(shape)} dims"
            )
        span = coef * (shape[axis] - 1)
        lo, hi = lo + min(0, span), hi + max(0, span)
    return lo, hi


def tensor_dims(decl: Any) -> tuple[int, list[int]]:
    """(number of block dimensions, the tensor's shape)."""
    shape = list(_get(decl, "shape"))
    buf = _get(decl, "buffer")
    pa = _get(decl, "par_axis")
    return (pa if buf in ON_CHIP and pa > 0 else 0), shape


def check_access(a: Access, decl: Any, trips: dict[int, int], *, masked: bool) -> bool:
    """Raise for an out-of-bound access (unless a mask may keep it in bounds); True when the
    access may leave the tensor's bounds (the executor then clips it by the mask)."""
    nb, shape = tensor_dims(decl)
    name = _get(decl, "name")
    if len(a.block) != nb or len(a.block) + len(a.dims) != len(shape):
        raise NKICompileError("err_invalid_program", f"access to '{name}' has the wrong number of indices")
    if any(s < 1 for s in a.shape):
        raise NKICompileError("err_invalid_program", f"access to '{name}' has an empty tile {a.shape}")
    outside = False
    for dim, (e, size) in enumerate(zip([*a.block, *a.dims], shape, strict=True)):
        if dim < nb and e.axes:
            raise NKICompileError(
                "err_invalid_program", f"block dimension {dim} of '{name}' indexed by a tile axis"
            )
        lo, hi = idx_bounds(e, trips, a.shape)
        if lo < 0 or hi >= size:
            if not masked:
                raise NKICompileError(
                    "err_tensor_access_out_of_bound",
                    f"Out-of-bound access for tensor `{name}` on dimension {dim}: index range [{lo}, {hi}] exceed "
                    f"dimension size of {size}",
                )
            outside = True
    if _get(decl, "buffer") in ON_CHIP:
        p = a.dims[0]
        if p.axes and (p.axes != [(0, 1)] or any(any(ax == 0 for ax, _ in e.axes) for e in a.dims[1:])):
            raise NKICompileError(
                "err_unsupported_partition_access",
                f"the partition dimension of on-chip tensor `{name}` must be indexed by the first dimension of the "
                "tile, with stride 1 (the hardware does not allow P dimension striding)",
            )
    return outside


def tile_partitions(a: Access) -> int:
    return a.shape[0] if a.shape else 1


def free_elems(a: Access) -> int:
    return math.prod(a.shape[1:]) if len(a.shape) > 1 else 1


def check_tile(a: Access, decl: Any, api: str, role: str) -> None:
    """An operand of a compute engine: on-chip, partition first and at most 128 wide."""
    buf = _get(decl, "buffer")
    name = _get(decl, "name")
    if buf not in ON_CHIP:
        raise NKICompileError(
            "err_unsupported_memory",
            f"Expected operand '{role}' of '{api}' to be in address space 'psum|sbuf', but got a tile "
            f"in 'hbm' instead.",
        )
    p = tile_partitions(a)
    if p > PMAX:
        raise NKICompileError(
            "err_num_partition_exceed_arch_limit",
            f"number of partitions {p} of '{name}{a.shape}' ({role} of '{api}') exceed architecture "
            f"limitation of {PMAX}.",
        )
    f = free_elems(a)
    limit = PSUM_FREE_MAX if buf == "psum" else SBUF_FREE_MAX
    if f > limit:
        raise NKICompileError(
            "err_size_of_dimension_exceed_arch_limit",
            f"the free size {f} of '{name}{a.shape}' ({role} of '{api}') exceed architecture "
            f"limitation of {limit} elements per partition in {buf.upper()}.",
        )


def check_decl(decl: Any) -> None:
    """An on-chip tensor whose block (one tile) does not fit a partition cannot be allocated."""
    buf = _get(decl, "buffer")
    if buf not in ON_CHIP:
        return
    nb, shape = tensor_dims(decl)
    name = _get(decl, "name")
    p = shape[nb]
    if p > PMAX:
        raise NKICompileError(
            "err_num_partition_exceed_arch_limit",
            f"number of partitions {p} of tensor '{name}{shape}' exceed architecture limitation of {PMAX}.",
        )
    per = math.prod(shape[nb + 1 :]) * dtypes.itemsize(_get(decl, "dtype"))
    cap = PSUM_PARTITION_BYTES if buf == "psum" else SBUF_PARTITION_BYTES
    if per > cap:
        raise NKICompileError(
            "err_out_of_memory",
            f"{buf.upper()} overflow: a tile of tensor '{name}{shape}' needs {per} bytes per "
            f"partition, a {buf.upper()} partition has {cap} bytes",
        )


def check_matmul(stat: Access, mov: Access, api: str = "nc_matmul") -> None:
    k1, k2 = tile_partitions(stat), tile_partitions(mov)
    if k1 != k2:
        raise NKICompileError(
            "err_num_partition_mismatch",
            f"number of partitions (dimension 0 size of a tile) mismatch in parameters "
            f"(stationary{stat.shape}, moving{mov.shape}) of '{api}'",
        )
    if free_elems(stat) > STATIONARY_FMAX:
        raise NKICompileError(
            "err_size_of_dimension_exceed_arch_limit",
            f"size of dimension 1 in 'stationary{stat.shape}' of '{api}' exceed architecture "
            f"limitation of {STATIONARY_FMAX}.",
        )
    if free_elems(mov) > MOVING_FMAX:
        raise NKICompileError(
            "err_size_of_dimension_exceed_arch_limit",
            f"size of dimension 1 in 'moving{mov.shape}' of '{api}' exceed architecture limitation "
            f"of {MOVING_FMAX}.",
        )


def onezero_claims(args: dict[str, Any]) -> list[tuple[str, ...]]:
    """What an nc_matmul's flags claim: per flag, the operands of which at least one is made of
    0s and 1s (`is_transpose` streams an identity, stationary or moving). The cost model halves
    the fp32 price for any claim; the executor checks every claim on the data."""
    claims: list[tuple[str, ...]] = []
    if args.get("stationary_onezero"):
        claims.append(("stationary",))
    if args.get("moving_onezero"):
        claims.append(("moving",))
    if args.get("transpose"):
        claims.append(("stationary", "moving"))
    return claims


def write_depends(dst: Access, mask: list[Idx], loop: int) -> bool:
    return any(loop in dict(e.loops) for e in (*dst.block, *dst.dims, *mask))


def _accesses(ins: Instr) -> list[Access]:
    return ([ins.dst] if ins.dst is not None else []) + list(ins.srcs)


def allowed_engines(ins: Instr, decl: Decl) -> tuple[str, ...]:
    """The engine labels an instruction of this kind may carry: those the NKI API gives it (an
    engine the kernel may choose explicitly, or the compiler's choice among the engines able to
    run it, `any:<engines>`). The cost model prices the label; the label never comes from the
    program unchecked."""
    op, args = ins.op, ins.args
    psum = any(_get(decl(a.tensor), "buffer") == "psum" for a in _accesses(ins))
    if op == "dma":
        return ("dma",)
    if op in ("matmul", "broadcast"):
        return ("pe",)
    if op == "transpose":
        return ("pe", "dve")
    if op == "act":
        if args.get("fn") == "reciprocal":
            return ("act", "dve", "any:act,dve")
        return ("act", "any:act,dve") if args.get("fn") in ("negative", "abs", "copy") else ("act",)
    if op == "reduce":
        return ("act", "dve") if args.get("pipelined") else ("dve",)
    if op == "tensor_scalar":
        pair = (args.get("op0"), args.get("op1"))
        act_ok = (pair[1] is None and pair[0] in _ACT_CAPABLE) or pair == ("multiply", "add")
        return ("act", "dve", "any:act,dve") if act_ok else ("dve",)
    if op == "tensor_tensor":
        return ("dve", "pool") if args.get("op") == "power" and not psum else ("dve",)
    if op == "copy":
        if psum:  # GpSimd has no PSUM access
            return ("act", "dve", "any:act,dve")
        return ("act", "dve", "pool", "any:act,dve", "any:act,dve,pool")
    if op == "memset":
        return ("dve",) if psum else ("dve", "pool", "any:dve,pool")
    if op in ("iota", "affine_select"):
        return ("pool",)
    return ("dve",)  # scalar_tensor_tensor, scan, select, bn_stats, bn_aggr, loop_reduce


def check_roles(ins: Instr) -> None:
    """The operands' roles are the kind's, in the tracer's order, each at most once."""
    if len(ins.roles) != len(ins.srcs):
        raise _invalid("roles and sources differ in number")
    if ins.op == "dma":
        if len(ins.roles) != 1 or ins.roles[0] not in ("src", "value"):
            raise _invalid(f"a DMA moves one source, not {ins.roles}")
        return
    spec = ROLES.get(ins.op)
    if spec is None:
        raise _invalid(f"unknown instruction {ins.op!r}")
    required, optional = spec
    roles = list(ins.roles)
    rest = iter(optional)
    if roles[: len(required)] != list(required) or not all(r in rest for r in roles[len(required) :]):
        raise _invalid(
            f"'{ins.op}' takes the operands {list(required)} then any of {list(optional)} in order, "
            f"not {roles}"
        )


def _check_semantics(ins: Instr, decl: Decl) -> None:
    """What the cost model reads and the executor must agree with: engine, roles, a destination,
    accumulation, the memories a DMA touches, the result tile of the Tensor Engine."""
    if ins.dst is None:
        raise _invalid(f"'{ins.op}' has no destination")
    check_roles(ins)
    allowed = allowed_engines(ins, decl)
    if ins.engine not in allowed:
        raise NKICompileError(
            "err_unsupported_engine",
            f"'{ins.op}' cannot be labelled {ins.engine!r}: the engines that run it are {', '.join(allowed)}",
        )
    dst_buf = _get(decl(ins.dst.tensor), "buffer")
    pe = ins.op == "matmul" or (ins.op == "transpose" and ins.engine == "pe")
    if ins.acc and not (pe and dst_buf == "psum"):
        raise _invalid(
            f"'{ins.op}' cannot accumulate into its destination (only the Tensor Engine into PSUM)"
        )
    if ins.op == "dma" and any(_get(decl(a.tensor), "buffer") == "psum" for a in _accesses(ins)):
        raise NKICompileError(
            "err_unsupported_memory", "DMA engines move data between HBM and SBUF, not PSUM"
        )
    if ins.op in ("matmul", "transpose"):
        src = ins.srcs[0]
        rows, cols = (
            (free_elems(src), free_elems(ins.srcs[1]))
            if ins.op == "matmul"
            else (free_elems(src), src.shape[0])
        )
        if tile_partitions(ins.dst) != rows or free_elems(ins.dst) != cols:
            raise _invalid(f"the result tile {ins.dst.shape} of '{ins.op}' is not [{rows}, {cols}]")


def check_instr(ins: Instr, decl: Decl, trips: dict[int, int]) -> list[int]:
    """Every structural rule of one instruction; returns the ids of accesses that may go out
    of bounds under their mask (the executor clips those)."""
    if ins.engine not in ENGINES and not ins.engine.startswith("any:"):
        raise _invalid(f"unknown engine {ins.engine!r}")
    _check_semantics(ins, decl)
    masked = bool(ins.mask)
    outside: list[int] = []
    accs = _accesses(ins)
    for i, a in enumerate(accs):
        d = decl(a.tensor)
        if check_access(a, d, trips, masked=masked):
            outside.append(i)
    for term in ins.mask:
        for axis, _ in term.axes:
            if axis >= len(ins.mask_shape):
                raise _invalid("mask axis outside its shape")
    dma = ins.op == "dma"
    for a, role in zip(ins.srcs, ins.roles, strict=True):
        if not dma:
            check_tile(a, decl(a.tensor), ins.op, role)
    if ins.dst is not None and not dma:
        check_tile(ins.dst, decl(ins.dst.tensor), ins.op, "dst")
    if dma:
        for a in accs:
            d = decl(a.tensor)
            if _get(d, "buffer") in ON_CHIP and tile_partitions(a) > PMAX:
                raise NKICompileError(
                    "err_num_partition_exceed_arch_limit",
                    f"number of partitions {tile_partitions(a)} exceed architecture limitation of {PMAX}.",
                )
    if ins.dst is not None and _get(decl(ins.dst.tensor), "buffer") == "input":
        raise NKICompileError(
            "err_cannot_update_immutable_parameter",
            f"Cannot update immutable parameter '{_get(decl(ins.dst.tensor), 'name')}'",
        )
    if ins.op == "matmul":
        stat, mov = ins.srcs[0], ins.srcs[1]
        for a, role in ((stat, "stationary"), (mov, "moving")):
            if _get(decl(a.tensor), "buffer") != "sbuf":
                raise NKICompileError(
                    "err_unsupported_memory",
                    f"Expected operand '{role}' of 'nc_matmul' to be in address space 'sbuf', but got "
                    f"a tile in '{_get(decl(a.tensor), 'buffer')}' instead.",
                )
        check_matmul(stat, mov)
        if ins.dst is None or _get(decl(ins.dst.tensor), "buffer") != "psum":
            raise NKICompileError("err_unsupported_memory", "nc_matmul writes its result to PSUM")
    if ins.op == "transpose" and ins.engine == "pe":
        a = ins.srcs[0]
        if tile_partitions(a) > PMAX or free_elems(a) > PMAX:
            raise NKICompileError(
                "err_size_of_dimension_exceed_arch_limit",
                f"nc_transpose on the Tensor Engine takes at most [128, 128], got {a.shape}",
            )
        if (
            _get(decl(a.tensor), "buffer") != "sbuf"
            or ins.dst is None
            or _get(decl(ins.dst.tensor), "buffer") != "psum"
        ):
            raise NKICompileError(
                "err_unsupported_memory", "a Tensor Engine transpose reads SBUF and writes PSUM"
            )
    if ins.op == "transpose" and ins.engine == "dve":
        a = ins.srcs[0]
        if tile_partitions(a) > 32 or free_elems(a) > 32:
            raise NKICompileError(
                "err_size_of_dimension_exceed_arch_limit",
                f"nc_transpose on the Vector Engine takes at most [32, 32], got {a.shape}",
            )
    return outside


# --- a whole program, as the trusted side receives it ----------------------------------------


def _check_constants(prog: Program) -> None:
    total = 0
    for c in prog.constants:
        if len(c.data) != math.prod(c.shape) * dtypes.itemsize(c.dtype):
            raise _invalid("a constant's data does not match its shape")
        total += len(c.data)
    if total > MAX_CONSTANT_BYTES:
        raise NKICompileError(
            "err_constant_too_large",
            f"the kernel embeds {total} bytes of constant data computed on the host while it was traced "
            f"(at most {MAX_CONSTANT_BYTES} bytes): work done at trace time is work the estimate cannot "
            "see; compute it in the kernel",
        )


def _check_tensor(t: Any, prog: Program) -> None:
    """One declaration: its buffer, shape, partition dimension, initial value, constant, alias
    and scope are what the tracer can produce and what the executor allocates."""
    tensors = prog.tensors
    dtypes.STORAGE[t.dtype]
    if t.buffer not in (*HBM_BUFFERS, *ON_CHIP):
        raise _invalid(f"unknown buffer {t.buffer!r}")
    if any(s < 1 for s in t.shape) or len(t.shape) > 12:
        raise _invalid(f"tensor '{t.name}' has shape {t.shape}")
    if t.buffer in ON_CHIP:
        if not 0 <= t.par_axis < len(t.shape):
            raise _invalid(f"on-chip tensor '{t.name}' has no partition dimension")
    elif t.par_axis != -1:
        raise _invalid(f"HBM tensor '{t.name}' has a partition dimension")
    if t.init not in ("", "zeros", "fill", "const") or (
        t.init in ("zeros", "fill") and t.buffer not in ON_CHIP
    ):
        raise _invalid(f"tensor '{t.name}' has the initial value {t.init!r} in {t.buffer}")
    if t.scope != -1 and t.scope not in prog.loop_trips:
        raise _invalid(f"tensor '{t.name}' is declared in a loop that does not exist")
    if t.alias >= 0:
        base = tensors[t.alias] if t.alias < len(tensors) and t.alias != t.id else None
        if (
            base is None
            or base.alias >= 0
            or t.buffer not in HBM_BUFFERS
            or base.buffer != t.buffer
            or base.dtype != t.dtype
            or math.prod(base.shape) != math.prod(t.shape)
            or t.init
            or t.const >= 0
        ):
            raise NKICompileError(
                "err_invalid_alias",
                f"tensor '{t.name}' ({t.buffer}) claims to view the memory of another tensor: only a "
                "whole HBM tensor may be viewed under another shape of the same size (a reshape); "
                "on-chip memory never aliases HBM",
            )
    elif t.buffer == "const":
        c = prog.constants[t.const] if 0 <= t.const < len(prog.constants) else None
        if c is None or c.dtype != t.dtype or list(c.shape) != list(t.shape) or t.init != "const":
            raise _invalid(f"constant tensor '{t.name}' does not match its constant data")
    if t.const != -1 and (t.buffer != "const" or t.alias >= 0):
        raise _invalid(f"tensor '{t.name}' names a constant but is not one")
    if t.init == "const" and t.buffer != "const":
        raise _invalid(f"tensor '{t.name}' is initialised from a constant but is not one")
    check_decl(t)


def _check_arguments(prog: Program, signature: Sequence[Any] | None) -> None:
    """The program's inputs are exactly its array arguments, declared as the trusted side asked
    the kernel to be compiled (shapes, dtypes, scalar values), and its outputs are HBM tensors."""
    tensors = prog.tensors
    if len(prog.args) != len(prog.scalars):
        raise _invalid("argument lists differ in length")
    ids = [a for a in prog.args if a != -1]
    inputs = sorted(t.id for t in tensors if t.buffer == "input" and t.alias < 0)
    if any(not 0 <= a < len(tensors) for a in ids) or sorted(ids) != inputs:
        raise _invalid("the program's input tensors are not its array arguments")
    for a, s in zip(prog.args, prog.scalars, strict=True):
        if a != -1 and s is not None:
            raise _invalid("an array argument carries a scalar value")
    if signature is not None:
        if len(signature) != len(prog.args):
            raise _invalid(
                f"the program takes {len(prog.args)} arguments, the kernel was compiled for {len(signature)}"
            )
        for pos, spec in enumerate(signature):
            tid = prog.args[pos]
            if spec.shape is None:
                if tid != -1 or prog.scalars[pos] != spec.scalar:
                    raise _invalid(
                        f"argument {pos} is not the scalar {spec.scalar!r} the kernel was compiled for"
                    )
                continue
            t = tensors[tid] if tid >= 0 else None
            if t is None or list(t.shape) != list(spec.shape) or t.dtype != spec.dtype:
                got = f"{t.shape} {t.dtype}" if t is not None else "a scalar"
                raise _invalid(
                    f"argument {pos} is declared as {got}; the kernel was compiled for {spec.shape} {spec.dtype}"
                )
    if not prog.outputs:
        raise _invalid("the program has no output")
    for tid in prog.outputs:
        if not 0 <= tid < len(tensors) or tensors[tid].buffer not in ("shared_hbm", "input", "hbm"):
            raise _invalid("an output is not an HBM tensor")


def _check_pipelined(ins: Instr, prev: Instr | None) -> None:
    """A pipelined reduce (activation_reduce, tensor_scalar_reduce) is priced as the cheap tail
    of the instruction before it: it must be that instruction's reduction, on its engine."""
    after = _PIPELINED_AFTER.get(ins.engine)
    if prev is None or prev.op != after or prev.engine != ins.engine or prev.dst != ins.srcs[0]:
        raise _invalid(
            "a pipelined reduce must reduce the result of the activation or tensor_scalar just before it, "
            "on the same engine"
        )


def _loops_of(ins: Instr) -> list[int]:
    """Loop counters an instruction's arguments name (the executor reads them)."""
    args = ins.args
    if ins.op == "iota":
        return [v for v, _ in args.get("loops", [])]
    if ins.op == "loop_reduce":
        return list(args.get("loops", []))
    if ins.op == "affine_select":
        return [v for term in args.get("pred", []) for v, _ in term[1]]
    return []


class _Walk:
    """The loop tree, in order: loop ids and trips, where each index's loops are open, and
    which loop-scoped on-chip tensors have been allocated in the bodies now open."""

    def __init__(self, prog: Program) -> None:
        self.prog = prog
        self.seen: set[int] = set()
        self.trips: dict[int, int] = {}
        self.live: set[int] = set()

    def decl(self, tid: int) -> Any:
        if not 0 <= tid < len(self.prog.tensors):
            raise _invalid(f"unknown tensor {tid}")
        return self.prog.tensors[tid]

    def run(self) -> None:
        self.body(self.prog.body, 0, -1)
        if set(self.prog.loop_trips) != self.seen:
            raise _invalid("the loop table names loops the program does not have")

    def body(self, nodes: list[Node], depth: int, scope: int) -> None:
        if depth > 32:
            raise _invalid("loops nested too deeply")
        prev: Instr | None = None
        for n in nodes:
            if isinstance(n, Loop):
                self.loop(n, depth)
                prev = None
            elif isinstance(n, Alloc):
                self.alloc(n, scope)
                prev = None
            else:
                self.instr(n)
                if n.op == "reduce" and n.args.get("pipelined"):
                    _check_pipelined(n, prev)
                prev = n

    def loop(self, n: Loop, depth: int) -> None:
        if (
            n.var in self.seen
            or not 0 <= n.var < MAX_LOOPS
            or n.trip < 1
            or n.trip > 1 << 24
            or self.prog.loop_trips.get(n.var) != n.trip
            or n.kind not in ("affine", "sequential")
        ):
            raise _invalid(f"loop {n.var} is malformed")
        self.seen.add(n.var)
        self.trips[n.var] = n.trip
        self.body(n.body, depth + 1, n.var)
        del self.trips[n.var]
        self.live = {t for t in self.live if self.prog.tensors[t].scope != n.var}

    def alloc(self, n: Alloc, scope: int) -> None:
        t = self.decl(n.tensor)
        if t.scope != scope:
            raise _invalid(f"tensor '{t.name}' is allocated outside the body that declares it")
        if t.scope >= 0 and t.buffer in ON_CHIP:
            if n.tensor in self.live:
                raise _invalid(f"tensor '{t.name}' is allocated twice in one iteration")
            self.live.add(n.tensor)

    def instr(self, n: Instr) -> None:
        for a in _accesses(n):
            for e in (*a.block, *a.dims):
                if any(loop not in self.trips for loop, _ in e.loops):
                    raise _invalid("an index names a loop it is not inside")
            t = self.decl(a.tensor)
            if t.buffer in ON_CHIP and t.scope >= 0 and a.tensor not in self.live:
                raise NKICompileError(
                    "err_local_variable_used_out_of_scope",
                    f"tensor '{t.name}' is declared in loop {t.scope} but used outside an iteration of it "
                    "(a tile declared in a loop body is fresh memory each iteration)",
                )
        for e in n.mask:
            if any(loop not in self.trips for loop, _ in e.loops):
                raise _invalid("a mask names a loop it is not inside")
        if any(v not in self.trips for v in _loops_of(n)):
            raise _invalid(f"'{n.op}' names a loop it is not inside")
        check_instr(n, self.decl, self.trips)


def check_program(prog: Program, signature: Sequence[Any] | None = None) -> None:
    """Re-check a program received from the sandbox: its constants, declarations, arguments
    (against the `signature`, the `ArgSpec`s it was compiled for, when given), outputs, every
    instruction and the loop tree. Raises NKICompileError."""
    _check_constants(prog)
    for i, t in enumerate(prog.tensors):
        if t.id != i:
            raise _invalid("tensor ids out of order")
        _check_tensor(t, prog)
    _check_arguments(prog, signature)
    _Walk(prog).run()


__all__ = [
    "MAX_CONSTANT_BYTES",
    "MOVING_FMAX",
    "ON_CHIP",
    "PMAX",
    "PSUM_PARTITION_BYTES",
    "ROLES",
    "SBUF_PARTITION_BYTES",
    "STATIONARY_FMAX",
    "allowed_engines",
    "check_access",
    "check_decl",
    "check_instr",
    "check_matmul",
    "check_program",
    "check_roles",
    "check_tile",
    "free_elems",
    "idx_bounds",
    "onezero_claims",
    "tensor_dims",
    "tile_partitions",
    "write_depends",
]
