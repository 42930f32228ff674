"""Tracing an NKI kernel into a `Program` (the emulator's compiler).

The kernel's Python runs once with symbolic values: its arguments are HBM tensors of known
shape and dtype (no data), `nl.affine_range` / `nl.sequential_range` loops run their body
once with a symbolic loop index (as the NKI compiler traces them), and every NKI API call
appends an instruction. Tiles are views (`View`) of tensors; an API result is a fresh
temporary tensor that an assignment `dst[...] = result` retargets to `dst` (no copy), as
the compiler writes an instruction's output straight into its destination.

Static checks raise the errors the NKI compiler raises (partition sizes, tile sizes,
out-of-bound accesses, memory kinds, writes that do not depend on the index of the
affine_range loop they are in, tensors used outside their loop's scope, ...).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from hardware_agents.neuron.emulator import dtypes
from hardware_agents.neuron.emulator.errors import NKICompileError, NotEmulated
from hardware_agents.neuron.emulator.expr import Ix
from hardware_agents.neuron.emulator.program import (
    Access,
    Alloc,
    Constant,
    Idx,
    Instr,
    Loop,
    Node,
    Program,
    TensorDecl,
)

PMAX = 128
SBUF_PARTITION_BYTES = 192 * 1024
PSUM_PARTITION_BYTES = 16 * 1024
PSUM_BANK_BYTES = 2 * 1024
ON_CHIP = ("sbuf", "psum")
HBM = ("input", "shared_hbm", "hbm", "const")

# The ops a View's operators emit (x + y, x[i] = v, x.T, ...) live in ops.py, which builds on
# this module; it installs itself here when imported (`install_ops`), so the tracer does not
# import it back. kernel.py imports it before anything is traced.
_ops: Any = None


def install_ops(module: Any) -> None:
    global _ops
    _ops = module


def _the_ops() -> Any:
    if _ops is None:
        raise RuntimeError("hardware_agents.neuron.emulator.ops is not loaded: import it before tracing")
    return _ops


class ParDim(int):
    """`nl.par_dim(n)`: marks the partition dimension of an on-chip tensor."""

    def __repr__(self) -> str:
        return f"par_dim({int(self)})"


class _LoopFrame:
    def __init__(self, var: int, trip: int, kind: str, body: list[Node]) -> None:
        self.var, self.trip, self.kind, self.body = var, trip, kind, body


class Trace:
    """The state of one kernel trace (`current()` while it runs)."""

    def __init__(self, kernel: str) -> None:
        self.kernel = kernel
        self.decls: list[dict[str, Any]] = []
        self.body: list[Node] = []
        self.blocks: list[list[Node]] = [self.body]
        self.loops: list[_LoopFrame] = []
        self.trips: dict[int, int] = {}
        self.constants: list[Constant] = []
        self.fresh: dict[int, tuple[list[Node], int]] = {}  # temp id -> (block, index of its producer)
        self.inputs: set[int] = set()
        self.written: set[int] = set()
        self.error: NKICompileError | None = None
        self._next_var = 0

    # --- tensors --------------------------------------------------------------------------
    def new_tensor(
        self,
        shape: tuple[int, ...],
        dtype: str,
        buffer: str,
        *,
        name: str = "",
        par_axis: int = -1,
        init: str = "",
        fill: float = 0.0,
        const: int = -1,
        temp: bool = False,
        alias: int = -1,
    ) -> int:
        self.check()
        tid = len(self.decls)
        scope = self.loops[-1].var if self.loops else -1
        if buffer == "shared_hbm" and self.loops and alias < 0:
            raise NKICompileError(
                "err_shared_hbm_must_in_kernel_level",
                "shared_hbm buffer can only be created in the top level kernel scope",
            )
        self.decls.append(
            dict(
                id=tid,
                name=name or f"t{tid}",
                shape=[int(s) for s in shape],
                dtype=dtype,
                buffer=buffer,
                par_axis=par_axis,
                init=init,
                fill=float(fill),
                const=const,
                scope=scope,
                temp=temp,
                alias=alias,
            )
        )
        # memory with a declared initial value, and an on-chip tile declared in a loop body (fresh
        # memory each iteration: nothing carries over from the previous one); others start as
        # whatever the memory held
        if alias < 0 and (init or (scope >= 0 and buffer in ON_CHIP)):
            self.blocks[-1].append(Alloc(tensor=tid))
        return tid

    def decl(self, tid: int) -> dict[str, Any]:
        return self.decls[tid]

    def in_scope(self, tid: int) -> None:
        scope = self.decls[tid]["scope"]
        if scope >= 0 and all(f.var != scope for f in self.loops):
            name = self.decls[tid]["name"]
            raise NKICompileError(
                "err_local_variable_used_out_of_scope",
                f"Local variable '{name}' is referenced outside of its parent scope (a tensor "
                "created in a loop body cannot be used after the loop; allocate it before the "
                "loop and write into it with `t[...] = ...`)",
            )

    # --- loops ----------------------------------------------------------------------------
    def loop(self, start: int, stop: int, step: int, kind: str) -> Iterator[Any]:
        trip = max(0, -(-(stop - start) // step)) if step > 0 else 0
        if trip == 0:
            return
        self.check()
        var = self._next_var
        self._next_var += 1
        self.trips[var] = trip
        frame = _LoopFrame(var, trip, kind, [])
        self.loops.append(frame)
        self.blocks.append(frame.body)
        completed = False
        try:
            yield Ix(start, {var: step})
            completed = True
        finally:
            if self.loops and self.loops[-1] is frame:
                self.loops.pop()
                self.blocks.pop()
                self.blocks[-1].append(Loop(var=var, trip=trip, kind=kind, body=frame.body))
            elif self.error is None:
                self.error = NKICompileError("err_unsupported_loop", "nested loops must close in order")
            if not completed and self.error is None and sys.exc_info()[0] is None:
                self.error = NKICompileError(
                    "err_unsupported_control_flow",
                    f"`break` or `return` inside an nl.{kind}_range loop is not supported (its body is traced once)",
                )

    def check(self) -> None:
        if self.error is not None:
            err, self.error = self.error, None
            raise err

    # --- instructions ---------------------------------------------------------------------
    def emit(self, instr: Instr) -> Instr:
        self.check()
        for a in instr.srcs:
            self.fresh.pop(a.tensor, None)
        self.blocks[-1].append(instr)
        return instr

    def last_producer(self, tid: int) -> Instr | None:
        """The instruction that produced temporary `tid`, if it is the last one emitted in the
        current block and nothing used its result yet (so it may be retargeted)."""
        where = self.fresh.get(tid)
        if where is None:
            return None
        block, i = where
        if block is not self.blocks[-1] or i != len(block) - 1:
            return None
        node = block[i]
        return node if isinstance(node, Instr) else None

    def replace_last(self, instr: Instr) -> None:
        block = self.blocks[-1]
        old = block[-1]
        assert isinstance(old, Instr)
        if old.dst is not None:
            self.fresh.pop(old.dst.tensor, None)
        block[-1] = instr

    def mark_fresh(self, tid: int) -> None:
        self.fresh[tid] = (self.blocks[-1], len(self.blocks[-1]) - 1)

    def program(
        self, args: list[int], scalars: list[Any], outputs: list[int], returned_tuple: bool
    ) -> Program:
        self.check()
        if self.loops:
            raise NKICompileError("err_unsupported_control_flow", "the kernel returned from inside a loop")
        for tid in outputs:
            if tid not in self.written and tid not in self.inputs:
                raise NKICompileError(
                    "err_tensor_output_not_written_to",
                    f"output tensor '{self.decls[tid]['name']}' is never written to",
                )
        tensors = [TensorDecl(**d) for d in self.decls]
        return Program(
            kernel=self.kernel,
            tensors=tensors,
            body=self.body,
            args=args,
            scalars=scalars,
            outputs=outputs,
            returned_tuple=returned_tuple,
            constants=self.constants,
            loop_trips=dict(self.trips),
        )


_CURRENT: list[Trace] = []


def current() -> Trace:
    if not _CURRENT:
        raise NKICompileError(
            "err_nki_api_outside_of_nki_kernel", "Calling NKI API outside of NKI kernels is not supported"
        )
    return _CURRENT[-1]


def active() -> bool:
    return bool(_CURRENT)


def push(trace: Trace) -> None:
    _CURRENT.append(trace)


def pop() -> None:
    _CURRENT.pop()


def source_line() -> int:
    """The line of the kernel source that made the current API call (for error messages)."""
    f = sys._getframe(2)
    while f is not None and "/emulator/" in f.f_code.co_filename.replace("\\", "/"):
        f = f.f_back  # type: ignore[assignment]
    return f.f_lineno if f is not None else 0


# --- views ------------------------------------------------------------------------------------


def _to_idx(e: Ix) -> Idx:
    return Idx(c=e.const, loops=sorted(e.loops.items()), axes=sorted(e.axes.items()))


class View:
    """A tile or tensor as the kernel sees it: a tensor and an affine index per dimension
    over the view's own axes (`shape`)."""

    __array_priority__ = 1000  # numpy scalars defer to our operators

    def __init__(self, tid: int, dims: list[Ix], shape: tuple[int, ...], *, lead1: bool = False) -> None:
        self.tid = tid
        self.dims = dims
        self.shape = tuple(int(s) for s in shape)
        self.lead1 = (
            lead1  # an on-chip view whose partition dim is indexed by a scalar: shape[0] == 1 is synthetic
        )

    @classmethod
    def full(cls, tid: int) -> View:
        d = current().decl(tid)
        shape = tuple(d["shape"])
        n = len(shape)
        return cls(tid, [Ix(0, None, {i: 1}, shape) for i in range(n)], shape)

    # --- what the kernel can ask ---------------------------------------------------------
    @property
    def decl(self) -> dict[str, Any]:
        return current().decl(self.tid)

    @property
    def dtype(self) -> Any:
        name = self.decl["dtype"]
        return dtypes.tfloat32 if name == dtypes.TFLOAT32 else dtypes.STORAGE[name].type

    @property
    def buffer(self) -> str:
        return self.decl["buffer"]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def name(self) -> str:
        return self.decl["name"]

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<NKI {self.buffer} tile {self.name}{list(self.shape)} {self.decl['dtype']}>"

    def __bool__(self) -> bool:
        raise NKICompileError(
            "err_dynamic_control_flow_not_supported",
            "dynamic control-flow depending on tensor value is not supported",
        )

    def __float__(self) -> float:
        raise NKICompileError(
            "err_dynamic_control_flow_not_supported",
            "a tile's values are not known while the kernel is traced",
        )

    __int__ = __float__
    __index__ = __float__

    def __array__(self, *a: Any, **k: Any) -> Any:
        raise NKICompileError(
            "err_dynamic_control_flow_not_supported",
            "a tile's values are not known while the kernel is traced (no numpy on tiles)",
        )

    def __iter__(self) -> Any:
        raise NKICompileError("err_unsupported_iteration", "iterating over a tile is not supported; index it")

    # --- indexing ------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> View:
        return index_view(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        ops = _the_ops()
        ops.assign(index_view(self, key), value)

    def reshape(self, shape: Any) -> View:
        """An HBM tensor under another (row-major) shape: an alias of the same memory."""
        d = self.decl
        shape = tuple(int(s) for s in (shape if isinstance(shape, tuple | list) else (shape,)))
        if d["buffer"] not in HBM or not self._is_full():
            raise NotEmulated(
                "reshape of an on-chip tile or of a part of a tensor",
                "only whole HBM tensors can be reshaped",
            )
        if math.prod(shape) != math.prod(self.shape):
            raise NKICompileError(
                "err_reshape_size_mismatch", f"cannot reshape {list(self.shape)} to {list(shape)}"
            )
        tr = current()
        base = d["alias"] if d["alias"] >= 0 else self.tid
        alias = tr.new_tensor(shape, d["dtype"], d["buffer"], name=f"{d['name']}.reshape", alias=base)
        if self.tid in tr.inputs:
            tr.inputs.add(alias)
        return View.full(alias)

    def _is_full(self) -> bool:
        d = self.decl
        return self.shape == tuple(d["shape"]) and all(
            e.const == 0 and not e.loops and (e.axes == {i: 1} or (self.shape[i] == 1 and not e.axes))
            for i, e in enumerate(self.dims)
        )

    def broadcast_to(self, shape: Any) -> View:
        ops = _the_ops()
        return ops.broadcast_to(self, tuple(int(s) for s in shape))

    def astype(self, dtype: Any) -> View:
        ops = _the_ops()
        return ops.copy(self, dtype=dtype)

    @property
    def T(self) -> View:
        ops = _the_ops()
        return ops.transpose(self)

    # --- operators: the nl.* element-wise ops --------------------------------------------
    def _bin(self, other: Any, op: str, reverse: bool = False) -> View:
        ops = _the_ops()
        return ops.binary(op, other, self) if reverse else ops.binary(op, self, other)

    def __add__(self, o: Any) -> View:
        return self._bin(o, "add")

    def __radd__(self, o: Any) -> View:
        return self._bin(o, "add", True)

    def __sub__(self, o: Any) -> View:
        return self._bin(o, "subtract")

    def __rsub__(self, o: Any) -> View:
        return self._bin(o, "subtract", True)

    def __mul__(self, o: Any) -> View:
        return self._bin(o, "multiply")

    def __rmul__(self, o: Any) -> View:
        return self._bin(o, "multiply", True)

    def __truediv__(self, o: Any) -> View:
        return self._bin(o, "divide")

    def __rtruediv__(self, o: Any) -> View:
        return self._bin(o, "divide", True)

    def __pow__(self, o: Any) -> View:
        return self._bin(o, "power")

    def __rpow__(self, o: Any) -> View:
        return self._bin(o, "power", True)

    def __mod__(self, o: Any) -> View:
        return self._bin(o, "mod")

    def __neg__(self) -> View:
        ops = _the_ops()
        return ops.unary("negative", self)

    def __abs__(self) -> View:
        ops = _the_ops()
        return ops.unary("abs", self)

    def __lt__(self, o: Any) -> View:
        return self._bin(o, "less")

    def __le__(self, o: Any) -> View:
        return self._bin(o, "less_equal")

    def __gt__(self, o: Any) -> View:
        return self._bin(o, "greater")

    def __ge__(self, o: Any) -> View:
        return self._bin(o, "greater_equal")

    def __eq__(self, o: Any) -> View:  # type: ignore[override]
        return self._bin(o, "equal")

    def __ne__(self, o: Any) -> View:  # type: ignore[override]
        return self._bin(o, "not_equal")

    def __and__(self, o: Any) -> View:
        return self._bin(o, "logical_and")

    def __or__(self, o: Any) -> View:
        return self._bin(o, "logical_or")

    def __invert__(self) -> View:
        ops = _the_ops()
        return ops.unary("logical_not", self)

    __hash__ = object.__hash__

    def _inplace(self, other: Any, op: str) -> View:
        ops = _the_ops()
        ops.accumulate(self, other, op)
        return self

    def __iadd__(self, o: Any) -> View:
        return self._inplace(o, "add")

    def __isub__(self, o: Any) -> View:
        return self._inplace(o, "subtract")

    def __imul__(self, o: Any) -> View:
        return self._inplace(o, "multiply")

    def __itruediv__(self, o: Any) -> View:
        return self._inplace(o, "divide")

    # --- the program's view of it --------------------------------------------------------
    def access(self) -> Access:
        tr = current()
        tr.in_scope(self.tid)
        d = tr.decl(self.tid)
        nb = d["par_axis"] if d["buffer"] in ON_CHIP and d["par_axis"] > 0 else 0
        block = []
        for e in self.dims[:nb]:
            if not e.scalar:
                raise NotEmulated(
                    f"indexing several blocks of the on-chip tensor '{d['name']}' at once",
                    "index its block dimensions with integers or loop indices",
                )
            block.append(_to_idx(e))
        dims = [_to_idx(e) for e in self.dims[nb:]]
        return Access(tensor=self.tid, block=block, dims=dims, shape=list(self.shape))

    def same_as(self, other: View) -> bool:
        return (
            self.tid == other.tid
            and self.shape == other.shape
            and [_to_idx(e) for e in self.dims] == [_to_idx(e) for e in other.dims]
        )


def _norm_key(key: Any, ndim: int) -> list[Any]:
    items = list(key) if isinstance(key, tuple) else [key]
    if sum(1 for k in items if k is Ellipsis) > 1:
        raise NKICompileError("err_invalid_index", "an index can only have a single ellipsis")
    if Ellipsis in [k if k is Ellipsis else None for k in items]:
        i = next(j for j, k in enumerate(items) if k is Ellipsis)
        fill = ndim - (len(items) - 1)
        items = items[:i] + [slice(None)] * fill + items[i + 1 :]
    if any(k is None for k in items):
        raise NotEmulated("`None` (np.newaxis) when indexing a tensor")
    if len(items) > ndim:
        raise NKICompileError(
            "err_invalid_index", f"too many indices ({len(items)}) for a tensor of {ndim} dimensions"
        )
    return items + [slice(None)] * (ndim - len(items))


def _slice_expr(s: slice, size: int) -> tuple[Ix, int, int]:
    """(start, step, length) of a slice over a dimension of `size`."""
    step = 1 if s.step is None else s.step
    if isinstance(step, Ix):
        step = int(step)
    step = int(step)
    if step < 1:
        raise NotEmulated("slices with a step below 1")
    start = Ix.of(0 if s.start is None else s.start)
    stop = Ix.of(size if s.stop is None else s.stop)
    if start.is_const and start.const < 0:
        start = Ix(start.const + size)
    if stop.is_const and stop.const < 0:
        stop = Ix(stop.const + size)
    if stop.is_const and start.is_const:
        stop = Ix(min(stop.const, size))
    span = stop - start
    if not span.is_const:
        raise NKICompileError("err_dynamic_slice_size", "the size of a slice must not depend on a loop index")
    length = max(0, -(-span.const // step))
    if length == 0:
        raise NKICompileError("err_invalid_index", "an empty slice")
    return start, step, length


def index_view(view: View, key: Any) -> View:
    """`view[key]` with NKI's rules: basic (integers, slices) or advanced (nl.arange grids)
    indexing, never both; on-chip tiles keep the partition dimension first."""
    items = _norm_key(key, len(view.shape))
    kinds = set()
    for k in items:
        if isinstance(k, slice):
            kinds.add("basic")
        elif isinstance(k, Ix) and not k.scalar:
            kinds.add("advanced")
        elif isinstance(k, View):
            raise NotEmulated("indirect (tile-valued) indexing")
    if kinds == {"basic", "advanced"}:
        full_slices = all(k == slice(None) for k in items if isinstance(k, slice))
        if not full_slices:
            raise NKICompileError(
                "err_unsupported_mixing_basic_advanced_tensor_indexing",
                "Mixing basic tensor indexing and advanced tensor indexing is not supported.",
            )
    new_axes: list[Ix] = []  # per old axis: its expression over the new axes
    if "advanced" in kinds:
        adv = [Ix.of(k) for k in items if not isinstance(k, slice)]
        shape: tuple[int, ...] = ()
        for a in adv:
            from hardware_agents.neuron.emulator.expr import _broadcast

            shape = _broadcast(shape, a.shape)
        if any(isinstance(k, slice) for k in items):
            raise NKICompileError(
                "err_unsupported_mixing_basic_advanced_tensor_indexing",
                "Mixing basic tensor indexing and advanced tensor indexing is not supported.",
            )
        n = len(shape)
        for k in items:
            e = Ix.of(k)
            new_axes.append(e._aligned(n) if e.shape else Ix(e.const, e.loops, None, shape))
    else:
        shape_l: list[int] = []
        exprs: list[tuple[Ix, int, int | None]] = []
        for k, size in zip(items, view.shape, strict=True):
            if isinstance(k, slice):
                start, step, length = _slice_expr(k, size)
                exprs.append((start, step, len(shape_l)))
                shape_l.append(length)
            else:
                exprs.append((Ix.of(k), 0, None))
        shape = tuple(shape_l)
        for start, step, pos in exprs:
            base = Ix(start.const, start.loops, None, shape)
            new_axes.append(base if pos is None else base + Ix(0, None, {pos: step}, shape))
    # bounds are checked against the underlying tensor when an instruction uses the view
    dims = []
    for e in view.dims:
        acc = Ix(e.const, e.loops, None, shape)
        for ax, coef in e.axes.items():
            acc = acc + new_axes[ax] * coef
        dims.append(acc)
    out = View(view.tid, dims, shape)
    d = current().decl(view.tid)
    if d["buffer"] in ON_CHIP:
        out = _partition_first(out, d)
    return out


def _partition_first(view: View, d: dict[str, Any]) -> View:
    """An on-chip tile whose partition dimension is indexed by a scalar keeps a partition
    axis of size 1 (its first axis)."""
    pa = max(d["par_axis"], 0)
    if len(view.dims) <= pa or not view.dims[pa].scalar or any(not e.scalar for e in view.dims[:pa]):
        return view
    if view.shape and view.shape[0] == 1 and all(0 not in e.axes for e in view.dims):
        return view  # already has its size-1 partition axis
    shape = (1, *view.shape)
    dims = [Ix(e.const, e.loops, {a + 1: c for a, c in e.axes.items()}, shape) for e in view.dims]
    return View(view.tid, dims, shape, lead1=True)


def constant(value: np.ndarray, dtype: str) -> int:
    tr = current()
    arr = np.ascontiguousarray(
        dtypes.to_storage(
            np.asarray(value, dtype=np.float32) if dtypes.is_float(dtype) else np.asarray(value), dtype
        )
    )
    tr.constants.append(Constant(dtype=dtype, shape=list(arr.shape), data=arr.tobytes()))
    return len(tr.constants) - 1


__all__ = [
    "HBM",
    "ON_CHIP",
    "PMAX",
    "PSUM_BANK_BYTES",
    "PSUM_PARTITION_BYTES",
    "SBUF_PARTITION_BYTES",
    "ParDim",
    "Trace",
    "View",
    "active",
    "constant",
    "current",
    "index_view",
    "pop",
    "push",
    "source_line",
]
