"""Running a compiled program with numpy, one tile instruction at a time.

Every instruction instance resolves its accesses to strided numpy views of the tensors'
memory (an affine index over a row-major array is a strided view), computes in float32 as
the engines do, and writes the result rounded to the destination's dtype (under its mask,
accumulating where the instruction accumulates). On-chip tiles are allocated when first
touched and freed after their last use (`analysis.py`), so a kernel whose SBUF tensors
hold gigabytes of logical blocks runs in the memory its live tiles need.

Several cases run at once (`execute_batch`): every tensor carries a leading case axis, so
one walk of the program (the resolution of each instruction instance's accesses, the
Python around each numpy call) serves all of them, and each numpy call works on all the
cases' tiles together. The program has no data dependence (its loops, indices and masks
are fixed when it is traced), so the cases run the same instruction instances; every
case's arithmetic is the per-case arithmetic (a matmul runs one BLAS call per case, on
the same operands as alone), and a batch gives each case the bits it gets alone
(tests/hardware_agents/neuron/test_emulator_batch.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from hardware_agents.neuron.emulator import dtypes
from hardware_agents.neuron.emulator.analysis import Analysis, analyze
from hardware_agents.neuron.emulator.errors import NKIRuntimeError, OneZeroFlagError
from hardware_agents.neuron.emulator.program import (
    COMPARISONS,
    LOGICAL,
    Access,
    Alloc,
    Instr,
    Loop,
    Node,
    Program,
)
from hardware_agents.neuron.emulator.validate import onezero_claims

F32 = np.float32
# Views built directly on a block's buffer, matmul operands read in place, float32 results
# stored in place: the general path's bits, faster (tests/hardware_agents/neuron/
# test_emulator_batch.py turns them off to compare)
FAST_PATHS = True

# --- the engines' math -------------------------------------------------------------------------

_SQRT2 = np.float32(math.sqrt(2.0))


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 refined with one Newton step: |error| < 2e-7, below fp32 resolution of erf
    x64 = x.astype(np.float64)
    s = np.sign(x64)
    a = np.abs(x64)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (
        ((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592
    ) * t * np.exp(-a * a)
    return (s * y).astype(np.float32)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (1.0 / (1.0 + np.exp(-x))).astype(F32)


def activation(fn: str, x: Any) -> Any:
    with np.errstate(all="ignore"):
        if fn == "exp":
            return np.exp(x)
        if fn == "log":
            return np.log(x)
        if fn == "sqrt":
            return np.sqrt(x)
        if fn == "rsqrt":
            return F32(1.0) / np.sqrt(x)
        if fn == "reciprocal":
            return F32(1.0) / x
        if fn == "tanh":
            return np.tanh(x)
        if fn == "sigmoid":
            return _sigmoid(x)
        if fn == "silu":
            return x * _sigmoid(x)
        if fn == "silu_dx":
            s = _sigmoid(x)
            return s * (1 + x * (1 - s))
        if fn == "gelu":
            return F32(0.5) * x * (1 + _erf(np.asarray(x / _SQRT2, dtype=F32)))
        if fn == "gelu_apprx_tanh":
            return F32(0.5) * x * (1 + np.tanh(F32(math.sqrt(2 / math.pi)) * (x + F32(0.044715) * x * x * x)))
        if fn == "gelu_apprx_sigmoid":
            return x * _sigmoid(F32(1.702) * x)
        if fn == "gelu_dx":
            cdf = F32(0.5) * (1 + _erf(np.asarray(x / _SQRT2, dtype=F32)))
            return cdf + x * np.exp(-x * x / 2) / F32(math.sqrt(2 * math.pi))
        if fn == "relu":
            return np.maximum(x, F32(0))
        if fn == "softplus":
            return np.logaddexp(F32(0), x)
        if fn == "mish":
            return x * np.tanh(np.logaddexp(F32(0), x))
        if fn == "erf":
            return _erf(np.asarray(x, dtype=F32))
        if fn == "erf_dx":
            return F32(2 / math.sqrt(math.pi)) * np.exp(-x * x)
        if fn in (
            "sin",
            "cos",
            "tan",
            "arctan",
            "square",
            "abs",
            "sign",
            "negative",
            "floor",
            "ceil",
            "trunc",
        ):
            return getattr(np, fn)(x)
        if fn == "copy":
            return x
        if fn == "logical_not":
            return (x == 0).astype(F32)
        if fn == "invert":
            return np.invert(x.astype(np.int32)).astype(F32)
    raise NKIRuntimeError("err_invalid_program", f"unknown activation function {fn!r}")


def alu(op: str, a: Any, b: Any) -> Any:
    with np.errstate(all="ignore"):
        if op == "add":
            return a + b
        if op == "subtract":
            return a - b
        if op == "multiply":
            return a * b
        if op == "divide":
            return a / b
        if op == "max":
            return np.maximum(a, b)
        if op == "min":
            return np.minimum(a, b)
        if op == "power":
            return np.power(a, b)
        if op == "mod":
            return np.mod(a, b)
        if op == "fmod":
            return np.fmod(a, b)
        if op == "abs_max":
            return np.maximum(np.abs(a), np.abs(b))
        if op == "bypass":
            return a
        if op in COMPARISONS:
            return getattr(np, op)(a, b).astype(F32)
        if op in LOGICAL:
            return getattr(np, op)(a != 0, b != 0).astype(F32)
        if op in ("bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"):
            ai = np.asarray(a).astype(np.int64)
            bi = np.asarray(b).astype(np.int64)
            return getattr(np, op)(ai, bi)
    raise NKIRuntimeError("err_invalid_program", f"unknown ALU operator {op!r}")


_REDUCE: dict[str, Any] = {"add": np.sum, "max": np.max, "min": np.min, "multiply": np.prod}


def reduce_values(op: str, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    fn = _REDUCE.get(op)
    if fn is None:
        if op in ("bitwise_and", "bitwise_or", "bitwise_xor", "logical_and", "logical_or"):
            base = getattr(np, op)
            return base.reduce(x.astype(np.int64), axis=axes)
        raise NKIRuntimeError("err_invalid_program", f"cannot reduce with {op!r}")
    with np.errstate(all="ignore"):
        return fn(x, axis=axes, dtype=F32) if op == "add" else fn(x, axis=axes)


# --- memory -------------------------------------------------------------------------------------


class Memory:
    """Every tensor's storage, with a leading case axis: HBM arrays (the inputs' cases stacked;
    a constant once, read through a case stride of 0), on-chip blocks allocated on first touch."""

    def __init__(self, prog: Program, cases: list[list[np.ndarray | None]]) -> None:
        self.prog = prog
        self.cases = n = len(cases)
        self.hbm: dict[int, np.ndarray] = {}
        self.blocks: dict[tuple[int, int, tuple[int, ...]], np.ndarray] = {}
        self.inst: dict[int, int] = {}
        for pos, tid in enumerate(prog.args):
            if tid < 0:
                continue
            t = prog.tensors[tid]
            st = dtypes.STORAGE[t.dtype]
            arrs = [c[pos] if pos < len(c) else None for c in cases]
            for arr in arrs:
                if arr is None or list(arr.shape) != t.shape:
                    raise NKIRuntimeError(
                        "err_invalid_argument",
                        f"argument {pos} ('{t.name}') should be an array of shape {t.shape}",
                    )
            if n == 1:
                stacked = np.ascontiguousarray(arrs[0], dtype=st)[None]
            else:
                stacked = np.empty((n, *t.shape), dtype=st)
                for i, arr in enumerate(arrs):
                    stacked[i] = arr
            view = stacked.view()
            view.flags.writeable = False
            self.hbm[tid] = view
        for t in prog.tensors:
            if t.id in self.hbm:
                continue
            if t.buffer == "const":
                c = prog.constants[t.const]
                arr = np.frombuffer(c.data, dtype=dtypes.STORAGE[c.dtype]).reshape(1, *c.shape)
                arr.flags.writeable = False
                self.hbm[t.id] = arr  # one copy for every case (case stride 0)
            elif t.buffer in ("shared_hbm", "hbm") and t.alias < 0:
                # device memory is not cleared: what a kernel leaves unwritten is garbage (NaN here)
                self.hbm[t.id] = np.full(
                    (n, *t.shape), dtypes.garbage(t.dtype), dtype=dtypes.STORAGE[t.dtype]
                )
        for t in prog.tensors:
            if t.alias >= 0:
                base = self.hbm[t.alias]
                self.hbm[t.id] = base.reshape(base.shape[0], *t.shape)

    def alloc(self, tid: int) -> None:
        self.inst[tid] = self.inst.get(tid, 0) + 1

    def block(self, tid: int, key: tuple[int, ...]) -> np.ndarray:
        arr = self.hbm.get(tid)
        if arr is not None:
            return arr
        full = (tid, self.inst.get(tid, 0), key)
        arr = self.blocks.get(full)
        if arr is None:
            t = self.prog.tensors[tid]
            shape = (self.cases, *t.shape[t.par_axis :])
            if t.init == "zeros":
                arr = np.zeros(shape, dtype=dtypes.STORAGE[t.dtype])
            elif t.init == "fill":
                arr = np.full(shape, t.fill, dtype=np.float32).astype(dtypes.STORAGE[t.dtype])
            else:
                arr = np.full(shape, dtypes.garbage(t.dtype), dtype=dtypes.STORAGE[t.dtype])
            self.blocks[full] = arr
        return arr

    def free(self, keys: list[tuple[int, int, tuple[int, ...]]]) -> None:
        for k in keys:
            self.blocks.pop(k, None)


class _Resolved:
    """An access compiled for fast resolution: block key, base offset and axis strides as
    functions of the loop counters."""

    __slots__ = (
        "access",
        "axis_strides",
        "block",
        "const_block",
        "dims",
        "forward",
        "loop_terms",
        "offset",
        "shape",
        "tid",
    )

    def __init__(self, a: Access, prog: Program) -> None:
        t = prog.tensors[a.tensor]
        self.tid = a.tensor
        self.access = a
        self.shape: tuple[int, ...] = tuple(a.shape)
        self.block = [(e.c, e.loops) for e in a.block]
        self.const_block = tuple(c for c, _ in self.block) if all(not lp for _, lp in self.block) else None
        inner = t.shape[t.par_axis :] if t.buffer in ("sbuf", "psum") and t.par_axis > 0 else t.shape
        if t.alias >= 0 or t.buffer not in ("sbuf", "psum"):
            inner = t.shape
        strides = [math.prod(inner[i + 1 :]) for i in range(len(inner))]
        self.dims = [(e, strides[i], inner[i]) for i, e in enumerate(a.dims)]
        self.offset = sum(e.c * st for e, st, _ in self.dims)
        terms: dict[int, int] = {}
        for e, st, _ in self.dims:
            for v, k in e.loops:
                terms[v] = terms.get(v, 0) + k * st
        self.loop_terms = [(v, k) for v, k in terms.items() if k]
        ax = [0] * len(self.shape)
        for e, st, _ in self.dims:
            for axis, k in e.axes:
                ax[axis] += k * st
        self.axis_strides = ax
        self.forward = all(k >= 0 for k in ax)  # no axis walks its tensor backwards

    def key(self, env: list[int]) -> tuple[int, ...]:
        if self.const_block is not None:
            return self.const_block
        out = []
        for c, lp in self.block:
            for v, k in lp:
                c += k * env[v]
            out.append(c)
        return tuple(out)

    def view(
        self, mem: Memory, env: list[int], box: list[tuple[int, int]] | None = None, check: bool = False
    ) -> np.ndarray:
        """The access as a strided view (cases, *tile) of its tensor (of `box` within the tile)."""
        arr = mem.block(self.tid, self.key(env))
        off = self.offset
        for v, k in self.loop_terms:
            off += k * env[v]
        shape: tuple[int, ...] | list[int] = self.shape
        if box is not None:
            cut = list(self.shape)
            for axis, (lo, hi) in enumerate(box):
                if axis < len(cut) and cut[axis] > 1:
                    off += lo * self.axis_strides[axis]
                    cut[axis] = hi - lo
            shape = cut
        if check:
            self._check(env, box)
        item = arr.itemsize
        n = arr.shape[0]
        case_stride = (arr.size // n) * item if n > 1 else 0
        strides = (case_stride, *(s * item for s in self.axis_strides))
        if FAST_PATHS and self.forward and arr.flags.c_contiguous:
            # a view of the block's own buffer (numpy checks it lies inside it); read-only
            # where the block is (the inputs)
            return np.ndarray((mem.cases, *shape), arr.dtype, arr, off * item, strides)
        flat = arr.reshape(-1)
        return as_strided(
            flat[off:],
            shape=(mem.cases, *shape),
            strides=strides,
            writeable=flat.flags.writeable,
        )

    def _check(self, env: list[int], box: list[tuple[int, int]] | None) -> None:
        for dim, (e, _, size) in enumerate(self.dims):
            lo = hi = e.c + sum(k * env[v] for v, k in e.loops)
            for axis, k in e.axes:
                a_lo, a_hi = (
                    box[axis]
                    if box is not None and axis < len(box) and self.shape[axis] > 1
                    else (0, self.shape[axis])
                )
                if a_hi <= a_lo:
                    return
                span = k * (a_hi - 1 - a_lo)
                lo, hi = lo + k * a_lo + min(0, span), hi + k * a_lo + max(0, span)
            if lo < 0 or hi >= size:
                t = self.tid
                raise NKIRuntimeError(
                    "err_tensor_access_out_of_bound",
                    f"Out-of-bound access for tensor {t} on dimension {dim}: index range [{lo}, {hi}] "
                    f"exceed dimension size of {size} (under the instruction's mask)",
                )


# --- instructions ----------------------------------------------------------------------------------


def _as_nd(x: np.ndarray, ndim: int) -> np.ndarray:
    """A tile (cases, P, free...) with its free dims right-aligned to `ndim` dims (NKI
    broadcasting; `ndim` counts the case axis)."""
    if x.ndim == ndim or x.ndim == 0:
        return x
    if x.ndim < ndim:
        return x.reshape(x.shape[:2] + (1,) * (ndim - x.ndim) + x.shape[2:])
    return x.reshape((x.shape[0], x.shape[1], -1))


def _vec(x: np.ndarray, ndim: int) -> np.ndarray:
    """A per-partition vector (cases, P, 1...) broadcastable against a tile of `ndim` dims."""
    return x.reshape(x.shape[:2] + (1,) * (ndim - 2))


def _f32(x: np.ndarray) -> np.ndarray:
    """x as float32, without a copy when it is already (the engines' arithmetic never writes
    its operands in place)."""
    return x if x.dtype == F32 else x.astype(F32)


def _blas_operand(x: np.ndarray) -> np.ndarray:
    """A matmul operand (cases, K, N) as BLAS is given it: float32 rows of unit stride, a view
    where the tile already is one (BLAS reads a row stride as it reads a packed copy: the
    same bits, tests/hardware_agents/neuron/test_emulator_batch.py), a packed copy otherwise
    (a single row or column goes to a matrix-vector kernel whose result depends on the layout)."""
    if (
        FAST_PATHS
        and x.dtype == F32
        and x.shape[1] > 1
        and x.shape[2] > 1
        and x.strides[2] == x.itemsize
        and x.strides[1] >= x.shape[2] * x.itemsize
        and x.strides[1] % x.itemsize == 0
    ):
        return x
    return np.ascontiguousarray(x, dtype=F32)


class Executor:
    """Runs a program on one or more cases at once (`cases`: per case, the arguments)."""

    def __init__(
        self, prog: Program, cases: list[list[np.ndarray | None]], analysis: Analysis | None = None
    ) -> None:
        if not cases:
            raise ValueError("no cases to run")
        self.prog = prog
        self.mem = Memory(prog, cases)
        self.analysis = analysis or analyze(prog, check=False)
        self.env = [0] * (max(prog.loop_trips, default=-1) + 1)
        self.step = 0
        self.resolved: dict[int, tuple[_Resolved | None, list[_Resolved], list[int]]] = {}

    def run(self) -> list[list[np.ndarray]]:
        """Per case, the output tensors in the kernel's return order."""
        # one BLAS thread: the tiles are small, and threads contending for a busy machine's cores
        # make a 128x128x512 matmul fifty times slower (measured)
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1), np.errstate(all="ignore"):
            self._walk(self.prog.body)
        outs = [self.mem.hbm[t] for t in self.prog.outputs]
        return [[o[c] for o in outs] for c in range(self.mem.cases)]  # views: no copy of the outputs

    def _walk(self, nodes: list[Node]) -> None:
        for n in nodes:
            if isinstance(n, Instr):
                self._instr(n)
                frees = self.analysis.free_at.get(self.step)
                if frees:
                    self.mem.free(frees)
                self.step += 1
            elif isinstance(n, Loop):
                for k in range(n.trip):
                    self.env[n.var] = k
                    self._walk(n.body)
                self.env[n.var] = 0
            elif isinstance(n, Alloc):
                self.mem.alloc(n.tensor)

    def _resolve(self, ins: Instr) -> tuple[_Resolved | None, list[_Resolved], list[int]]:
        r = self.resolved.get(id(ins))
        if r is None:
            from hardware_agents.neuron.emulator.validate import check_instr

            outside = check_instr(ins, self.prog.tensor, self.prog.loop_trips)
            dst = _Resolved(ins.dst, self.prog) if ins.dst is not None else None
            r = (dst, [_Resolved(a, self.prog) for a in ins.srcs], outside)
            self.resolved[id(ins)] = r
        return r

    def _box(
        self, ins: Instr, tile: list[int]
    ) -> tuple[bool, list[tuple[int, int]] | None, np.ndarray | None]:
        """(executes at all, a box of the tile it covers, or an element mask)."""
        env = self.env
        nd = len(tile)
        mshape = ins.mask_shape
        shift = nd - len(mshape)
        box = [(0, s) for s in tile]
        general = []
        for t in ins.mask:
            c = t.c + sum(k * env[v] for v, k in t.loops)
            axes = [(a + shift, k) for a, k in t.axes]
            if not axes:
                if c < 0:
                    return False, None, None
            elif len(axes) == 1:
                a, k = axes[0]
                lo, hi = box[a]
                if k > 0:
                    lo = max(lo, -(c // k))  # c + k*x >= 0  <=>  x >= ceil(-c/k)
                else:
                    hi = min(hi, c // (-k) + 1)
                box[a] = (lo, hi)
            else:
                general.append((c, axes))
        if any(hi <= lo for lo, hi in box):
            return False, None, None
        elem = None
        if general:
            grids = np.ogrid[tuple(slice(lo, hi) for lo, hi in box)]
            elem = np.ones([hi - lo for lo, hi in box], dtype=bool)
            for c, axes in general:
                acc: Any = c
                for a, k in axes:
                    acc = acc + k * grids[a]
                elem &= np.asarray(acc >= 0)
        return True, box, elem

    def _instr(self, ins: Instr) -> None:
        dst, srcs, outside = self._resolve(ins)
        env, mem = self.env, self.mem
        box = elem = None
        tile: list[int] = []
        if ins.mask:
            # the mask is over the instruction's output tile, except for reductions (their input's)
            lead = (
                srcs[0]
                if ins.op in ("reduce", "bn_stats", "bn_aggr") and srcs
                else (dst if dst is not None else srcs[0])
            )
            tile = list(lead.shape)
            run, box, elem = self._box(ins, tile)
            if not run:
                return
        checks = set(outside)
        base = 1 if dst is not None else 0
        vals = [
            s.view(mem, env, self._box_for(box, tile, s), check=(i + base) in checks)
            for i, s in enumerate(srcs)
        ]
        out = (
            dst.view(mem, env, self._box_for(box, tile, dst), check=0 in checks) if dst is not None else None
        )
        res = self._compute(ins, vals, out)
        if out is None:
            return
        res = np.asarray(res)
        if res.shape != out.shape:
            # (cases, P, ...): the same cases and partitions in another free layout, or broadcast
            if res.size == out.size and res.shape[:2] == out.shape[:2]:
                res = res.reshape(out.shape)
            else:
                res = np.broadcast_to(_as_nd(res, out.ndim), out.shape)
        name = self.prog.tensors[dst.tid].dtype  # type: ignore[union-attr]
        if FAST_PATHS and elem is None and name == "float32" and res.dtype == F32 and out.dtype == F32:
            # float32 in float32: nothing to round (the general path's arithmetic, in place)
            if ins.acc:
                np.add(out, res, out=out)
            else:
                out[...] = res
            return
        if ins.acc:
            res = _f32(out) + res
        res = dtypes.to_storage(np.asarray(res, dtype=F32) if dtypes.is_float(name) else res, name)
        if elem is not None:
            inner = out.shape[1:]
            res = np.where(elem.reshape(inner) if elem.size == math.prod(inner) else elem, res, out)
        out[...] = res

    @staticmethod
    def _box_for(
        box: list[tuple[int, int]] | None, tile: list[int], r: _Resolved
    ) -> list[tuple[int, int]] | None:
        """The instruction's box restricted to one operand: axes of the tile's size are cut,
        broadcast (size-1) and other axes are kept whole."""
        if box is None:
            return None
        return [
            box[i] if i < len(tile) and r.shape[i] == tile[i] else (0, r.shape[i])
            for i in range(len(r.shape))
        ]

    def _compute(self, ins: Instr, vals: list[np.ndarray], out: np.ndarray | None) -> Any:
        """The instruction's result over every case: operands and result are (cases, P, ...).
        Long because it is one flat dispatch over the instruction kinds, a few lines each: each
        kind's arithmetic reads best beside the others'."""
        op, args = ins.op, ins.args
        role = dict(zip(ins.roles, vals, strict=True))
        if op in ("dma", "copy"):  # (a transposing load's access pattern already walks its source transposed)
            src = vals[0]
            return src if out is not None and src.dtype == out.dtype else _f32(src)
        if op == "memset":
            return np.full(out.shape, args["value"], dtype=F32)  # type: ignore[union-attr]
        if op == "iota":
            shape = out.shape[1:]  # type: ignore[union-attr]
            val = np.full(shape, args["c"] + sum(k * self.env[v] for v, k in args["loops"]), dtype=np.int64)
            for a, k in args["axes"]:
                idx = np.arange(shape[a]).reshape([-1 if i == a else 1 for i in range(len(shape))])
                val = val + k * idx
            return np.broadcast_to(val.astype(F32), out.shape)  # type: ignore[union-attr]
        x: Any = role.get("data")
        if op == "act":
            xf = _f32(x)
            nd = xf.ndim
            sc = role.get("scale")
            scale = _vec(_f32(sc), nd) if sc is not None else F32(args.get("scale", 1.0))
            y = xf * scale if not (sc is None and args.get("scale", 1.0) == 1.0) else xf
            b = role.get("bias")
            if b is not None:
                y = y + _vec(_f32(b), nd)
            return activation(args["fn"], y)
        if op == "tensor_scalar":
            xf = _f32(x)
            nd = xf.ndim
            r = xf
            for k in (0, 1):
                name = args.get(f"op{k}")
                if name is None:
                    break
                operand = role.get(f"operand{k}")
                s = _vec(_f32(operand), nd) if operand is not None else F32(args[f"scalar{k}"])
                r = alu(name, s, r) if args.get(f"reverse{k}") else alu(name, r, s)
            return r
        if op == "scalar_tensor_tensor":
            xf = _f32(x)
            o0 = role.get("operand0")
            s = _vec(_f32(o0), xf.ndim) if o0 is not None else F32(args["scalar0"])
            r = alu(args["op0"], s, xf) if args.get("reverse0") else alu(args["op0"], xf, s)
            o1 = _f32(role["operand1"]).reshape(r.shape)
            return alu(args["op1"], o1, r) if args.get("reverse1") else alu(args["op1"], r, o1)
        if op == "tensor_tensor":
            a, b = role["data1"], role["data2"]
            nd = max(a.ndim, b.ndim, out.ndim if out is not None else 0)
            return alu(args["op"], _as_nd(_f32(a), nd), _as_nd(_f32(b), nd))
        if op == "reduce":
            axes = tuple(int(a) for a in args["axes"])
            if any(not 0 <= a < x.ndim - 1 for a in axes):
                raise NKIRuntimeError(
                    "err_invalid_program", f"reduction over axes {axes} of a {x.ndim - 1}-d tile"
                )
            r = reduce_values(args["op"], _f32(x), tuple(a + 1 for a in axes))
            if args.get("negate"):
                r = -r
            if args.get("scale", 1.0) != 1.0:
                r = r * F32(args["scale"])
            return r
        if op == "matmul":
            s, m = role["stationary"], role["moving"]
            self._check_onezero(role, args)
            s2 = _blas_operand(s.reshape(s.shape[0], s.shape[1], -1))
            m2 = _blas_operand(m.reshape(m.shape[0], m.shape[1], -1))
            res = np.empty((s2.shape[0], s2.shape[2], m2.shape[2]), dtype=F32)
            for c in range(s2.shape[0]):  # one BLAS call per case, on the operands it has alone
                np.matmul(s2[c].T, m2[c], out=res[c])
            return res
        if op == "transpose":
            return x.reshape(x.shape[0], x.shape[1], -1).transpose(0, 2, 1).astype(F32)
        if op == "broadcast":
            return np.broadcast_to(_f32(x), out.shape)  # type: ignore[union-attr]
        if op == "loop_reduce":
            xf = _f32(x)
            if all(self.env[v] == 0 for v in args["loops"]):
                return xf
            return alu(args["op"], _as_nd(xf, out.ndim), _f32(out))  # type: ignore[union-attr,arg-type]
        if op == "scan":
            return self._scan(role, args)
        if op == "select":
            cond = role["condition"]
            nd = out.ndim  # type: ignore[union-attr]
            xs = _f32(role["x"]) if "x" in role else F32(args["x"])
            ys = _f32(role["y"]) if "y" in role else F32(args["y"])
            return np.where(
                _as_nd(cond, nd) != 0,
                _as_nd(np.asarray(xs), nd) if "x" in role else xs,
                _as_nd(np.asarray(ys), nd) if "y" in role else ys,
            )
        if op == "affine_select":
            shape = x.shape  # (cases, tile...): the predicate is over the tile's trailing axes
            shift = len(shape) - len(args["pred_shape"])
            keep = np.ones(shape[1:], dtype=bool)
            for c, loops, axes in args["pred"]:
                acc: Any = c + sum(k * self.env[v] for v, k in loops)
                for a, k in axes:
                    if not (shift >= 1 and 0 <= a < len(args["pred_shape"])):
                        raise NKIRuntimeError(
                            "err_invalid_program", "affine_select predicate over a missing axis"
                        )
                    acc = acc + k * np.arange(shape[a + shift]).reshape(
                        [-1 if i == a + shift - 1 else 1 for i in range(len(shape) - 1)]
                    )
                keep &= np.asarray(acc >= 0)
            return np.where(keep, _f32(x), F32(args["fill"]))
        if op == "bn_stats":
            xf = _f32(x).reshape(x.shape[0], x.shape[1], -1)
            ev, od = xf[..., 0::2], xf[..., 1::2]
            cols = []
            for part in (ev, od):
                n = part.shape[2]
                zeros = np.zeros(xf.shape[:2], F32)
                mean = part.mean(axis=2) if n else zeros
                var_n = ((part - mean[..., None]) ** 2).sum(axis=2) if n else zeros
                cols += [np.full(xf.shape[:2], n, F32), mean, var_n]
            return np.stack(cols, axis=2)
        if op == "bn_aggr":
            xf = x.reshape(x.shape[0], x.shape[1], -1, 3).astype(np.float64)
            n, mean, m2 = xf[..., 0], xf[..., 1], xf[..., 2]
            tot = n.sum(axis=2)
            mu = (n * mean).sum(axis=2) / np.maximum(tot, 1)
            var = (m2 + n * (mean - mu[..., None]) ** 2).sum(axis=2) / np.maximum(tot, 1)
            return np.stack([mu, var], axis=2).astype(F32)
        raise NKIRuntimeError("err_invalid_program", f"unknown instruction {op!r}")

    @staticmethod
    def _check_onezero(role: dict[str, np.ndarray], args: dict[str, Any]) -> None:
        """Each flag the cost model believed (`validate.onezero_claims`), true on every case's
        data? A claim fails on a case where each of its operands holds something not 0 or 1
        (each operand scanned once per instruction, and only while the claim can still fail)."""
        claims = onezero_claims(args)
        if not claims:
            return
        scanned: dict[str, np.ndarray] = {}

        def breaks(r: str) -> np.ndarray:  # per case: the operand holds something not 0 or 1
            got = scanned.get(r)
            if got is None:
                x = role[r]
                off = (x != 0) & (x != 1)
                got = scanned[r] = off.reshape(off.shape[0], -1).any(axis=1)
            return got

        for claim in claims:
            order = sorted(claim, key=lambda r: r not in scanned)  # what is scanned already first
            per_case = breaks(order[0])
            for r in order[1:]:
                if not per_case.any():
                    break
                per_case = per_case & breaks(r)
            if per_case.any():
                c = int(np.argmax(per_case))
                x = role[claim[0]][c]
                raise OneZeroFlagError(" or ".join(claim), float(x[(x != 0) & (x != 1)].flat[0]))

    @staticmethod
    def _scan(role: dict[str, np.ndarray], args: dict[str, Any]) -> np.ndarray:
        d0, d1 = role["data0"], role["data1"]
        a = _f32(d0).reshape(d0.shape[0], d0.shape[1], -1)
        b = _f32(d1).reshape(d1.shape[0], d1.shape[1], -1)
        init = role.get("initial")
        prev = (
            _f32(init).reshape(a.shape[0], -1)
            if init is not None
            else np.full(a.shape[:2], args["initial"], F32)
        )
        op0, op1, r0, r1 = args["op0"], args["op1"], args.get("reverse0"), args.get("reverse1")
        out = np.empty_like(a)
        for i in range(a.shape[2]):
            t = alu(op0, prev, a[..., i]) if r0 else alu(op0, a[..., i], prev)
            prev = alu(op1, b[..., i], t) if r1 else alu(op1, t, b[..., i])
            out[..., i] = prev
        return out.reshape(d0.shape)


def execute(
    prog: Program, inputs: list[np.ndarray | None], analysis: Analysis | None = None
) -> list[np.ndarray]:
    """Run a (validated) program on its array arguments (None for scalar arguments); returns
    the output tensors in the kernel's return order."""
    return Executor(prog, [inputs], analysis).run()[0]


def execute_batch(
    prog: Program, cases: list[list[np.ndarray | None]], analysis: Analysis | None = None
) -> list[list[np.ndarray]]:
    """Run a (validated) program on several cases' arguments at once (see the module doc);
    per case, what `execute` returns for it alone."""
    return Executor(prog, cases, analysis).run()


__all__ = ["Executor", "Memory", "activation", "alu", "execute", "execute_batch", "reduce_values"]
