"""Static checks of accesses and instructions, shared by the tracer (which raises them as the
NKI compiler would, while the kernel is traced) and the trusted side (which re-checks every
instruction of a `Program` it received from the sandbox before executing or pricing it)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from hardware_agents.neuron.emulator import dtypes
from hardware_agents.neuron.emulator.errors import NKICompileError
from hardware_agents.neuron.emulator.program import Access, Idx, Instr, Program

PMAX = 128
SBUF_PARTITION_BYTES = 192 * 1024
PSUM_PARTITION_BYTES = 16 * 1024
PSUM_BANK_FP32 = 512
SBUF_FREE_MAX = 64 * 1024  # elements per partition an engine instruction may stream from SBUF
PSUM_FREE_MAX = 4 * 1024
STATIONARY_FMAX = 128
MOVING_FMAX = 512
ON_CHIP = ("sbuf", "psum")

ENGINES = ("pe", "act", "dve", "pool", "dma")

Decl = Callable[[int], Any]  # tensor id -> its declaration (dict or TensorDecl)


def _get(d: Any, key: str) -> Any:
    return d[key] if isinstance(d, dict) else getattr(d, key)


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


def write_depends(dst: Access, mask: list[Idx], loop: int) -> bool:
    return any(loop in dict(e.loops) for e in (*dst.block, *dst.dims, *mask))


def check_instr(ins: Instr, decl: Decl, trips: dict[int, int]) -> list[int]:
    """Every structural rule of one instruction; returns the ids of accesses that may go out
    of bounds under their mask (the executor clips those)."""
    if ins.engine not in ENGINES and not ins.engine.startswith("any:"):
        raise NKICompileError("err_invalid_program", f"unknown engine {ins.engine!r}")
    if len(ins.roles) != len(ins.srcs):
        raise NKICompileError("err_invalid_program", "roles and sources differ in number")
    masked = bool(ins.mask)
    outside: list[int] = []
    accs = ([ins.dst] if ins.dst is not None else []) + list(ins.srcs)
    for i, a in enumerate(accs):
        d = decl(a.tensor)
        if check_access(a, d, trips, masked=masked):
            outside.append(i)
    for term in ins.mask:
        for axis, _ in term.axes:
            if axis >= len(ins.mask_shape):
                raise NKICompileError("err_invalid_program", "mask axis outside its shape")
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


def check_program(prog: Program) -> None:
    """Re-check a program received from the sandbox: declarations, every instruction, the loop
    tree's ids and trips. Raises NKICompileError."""
    tensors = prog.tensors
    for i, t in enumerate(tensors):
        if t.id != i:
            raise NKICompileError("err_invalid_program", "tensor ids out of order")
        dtypes.STORAGE[t.dtype]
        if t.buffer not in ("input", "shared_hbm", "hbm", "sbuf", "psum", "const"):
            raise NKICompileError("err_invalid_program", f"unknown buffer {t.buffer!r}")
        if any(s < 1 for s in t.shape) or len(t.shape) > 12:
            raise NKICompileError("err_invalid_program", f"tensor '{t.name}' has shape {t.shape}")
        if t.alias >= 0 and (
            t.alias >= len(tensors) or math.prod(tensors[t.alias].shape) != math.prod(t.shape)
        ):
            raise NKICompileError("err_invalid_program", f"tensor '{t.name}' aliases an incompatible tensor")
        if t.const >= 0 and t.const >= len(prog.constants):
            raise NKICompileError("err_invalid_program", f"tensor '{t.name}' names a missing constant")
        if t.buffer in ON_CHIP and not (0 <= t.par_axis < len(t.shape)):
            raise NKICompileError(
                "err_invalid_program", f"on-chip tensor '{t.name}' has no partition dimension"
            )
        check_decl(t)
    for c in prog.constants:
        if len(c.data) != math.prod(c.shape) * dtypes.itemsize(c.dtype):
            raise NKICompileError("err_invalid_program", "a constant's data does not match its shape")

    def decl(tid: int) -> Any:
        if not 0 <= tid < len(tensors):
            raise NKICompileError("err_invalid_program", f"unknown tensor {tid}")
        return tensors[tid]

    seen: set[int] = set()
    trips: dict[int, int] = {}

    def walk(nodes: list[Any], depth: int) -> None:
        from hardware_agents.neuron.emulator.program import Alloc, Loop

        if depth > 32:
            raise NKICompileError("err_invalid_program", "loops nested too deeply")
        for n in nodes:
            if isinstance(n, Loop):
                if n.var in seen or n.trip < 1 or n.trip > 1 << 24 or prog.loop_trips.get(n.var) != n.trip:
                    raise NKICompileError("err_invalid_program", f"loop {n.var} is malformed")
                seen.add(n.var)
                trips[n.var] = n.trip
                walk(n.body, depth + 1)
                del trips[n.var]
            elif isinstance(n, Alloc):
                decl(n.tensor)
            else:
                for a in ([n.dst] if n.dst is not None else []) + list(n.srcs):
                    for e in (*a.block, *a.dims):
                        if any(loop not in trips for loop, _ in e.loops):
                            raise NKICompileError(
                                "err_invalid_program", "an index names a loop it is not inside"
                            )
                for e in n.mask:
                    if any(loop not in trips for loop, _ in e.loops):
                        raise NKICompileError("err_invalid_program", "a mask names a loop it is not inside")
                check_instr(n, decl, trips)

    walk(prog.body, 0)
    if len(prog.args) != len(prog.scalars):
        raise NKICompileError("err_invalid_program", "argument lists differ in length")
    for tid in prog.outputs:
        if tensors[tid].buffer not in ("shared_hbm", "input", "hbm"):
            raise NKICompileError("err_invalid_program", "an output is not an HBM tensor")


__all__ = [
    "MOVING_FMAX",
    "ON_CHIP",
    "PMAX",
    "PSUM_PARTITION_BYTES",
    "SBUF_PARTITION_BYTES",
    "STATIONARY_FMAX",
    "check_access",
    "check_decl",
    "check_instr",
    "check_matmul",
    "check_program",
    "check_tile",
    "free_elems",
    "idx_bounds",
    "tensor_dims",
    "tile_partitions",
    "write_depends",
]
