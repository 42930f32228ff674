"""A problem's float64 reference, computed and kept a slice at a time, never whole in memory.

NKIBench's references are big and their formulas make temporaries of the same size: the
float64 reference of bmm_softmax is 2 GiB a case and numpy's softmax holds three such arrays
at once (6.1 GiB measured), gqa_full's attention scores are 2 GiB a case against a 64 MiB
output (6.4 GiB), and its float32 floor (`fp32.Fp32Floor`) adds float64 differences of the
whole output (bmm_softmax: 9.1 GiB). A profile computed two or three of them at once and kept
the fresh cases' references in memory: 16 GiB on one profile of bmm_softmax.

Where the definition says the reference is independent along an axis
(`Definition.x_reference_slices`: the NKIBench importer declares it for its 14 problems), the
inputs it names are cut along that axis `size` positions at a time and the reference runs on
each slice; each slice of each output goes straight into its `.npy` file (a mapping of the
slice's part, dropped after each slice), with its norm accumulated on the way, so the memory
the reference holds is one slice's temporaries. The float32 floor is computed the same way,
slice by slice against the reference's file. A definition without the declaration is one
slice: the whole reference, as before.

`reference_bytes(problem)`: the most memory one reference (or floor) evaluation holds, what
the agent's declared budget counts per reference thread (`neuron/memory.py`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from accelopt.problem import Problem, Tolerance
from hardware_agents.pipeline import compare, fp32, numpy_ref

FLOAT64 = 8
# the working memory of a reference without a declaration, per byte of its float64 outputs:
# NKIBench's formulas make up to three temporaries of an output's size at once
WHOLE_WORK = 4.0


def spans(problem: Problem) -> list[tuple[int, int]]:
    """The slices [lo, hi) of the declared axis (one slice, (0, 0), where nothing is declared)."""
    sl = problem.definition.x_reference_slices
    if sl is None:
        return [(0, 0)]
    n = problem.axis_values()[sl.axis]
    return [(lo, min(n, lo + sl.size)) for lo in range(0, max(n, 1), sl.size)]


def _dim(shape: list[str] | None, axis: str) -> int:
    return (shape or []).index(axis)


def sliced_inputs(problem: Problem, inputs: dict[str, Any], lo: int, hi: int) -> dict[str, Any]:
    """`inputs` with the declared ones cut to [lo, hi) along the axis (views, no copies)."""
    sl = problem.definition.x_reference_slices
    if sl is None:
        return inputs
    out = dict(inputs)
    for name in sl.inputs:
        d = _dim(problem.definition.inputs[name].shape, sl.axis)
        out[name] = inputs[name][(slice(None),) * d + (slice(lo, hi),)]
    return out


def output_index(problem: Problem, name: str, lo: int, hi: int) -> tuple[slice, ...]:
    """Where a slice's part of output `name` lies in the whole output."""
    sl = problem.definition.x_reference_slices
    if sl is None:
        return ()
    d = _dim(problem.definition.outputs[name].shape, sl.axis)
    return (slice(None),) * d + (slice(lo, hi),)


def slice_shapes(problem: Problem, lo: int, hi: int) -> dict[str, tuple[int, ...] | None]:
    """Each output's shape on the slice [lo, hi)."""
    shapes = problem.output_shapes()
    sl = problem.definition.x_reference_slices
    if sl is None:
        return shapes
    out: dict[str, tuple[int, ...] | None] = {}
    for name, shape in shapes.items():
        if shape is None:
            out[name] = None
            continue
        d = _dim(problem.definition.outputs[name].shape, sl.axis)
        out[name] = (*shape[:d], hi - lo, *shape[d + 1 :])
    return out


# float64 evaluations (a slice of a reference or of a floor) under way at once in this process,
# whatever computes them (the seeds' reference thread and its helper, the fresh cases' thread,
# the judge's floor): what the declared budget counts (`neuron/memory.py`)
EVALUATIONS = 2
_evaluations = threading.BoundedSemaphore(EVALUATIONS)


def slices(
    problem: Problem, inputs: dict[str, Any], precision: Any = np.float64
) -> Iterator[tuple[int, int, dict[str, np.ndarray]]]:
    """(lo, hi, the reference's outputs on that slice), slice after slice. The whole reference
    holds one of the process's `EVALUATIONS` from its first slice to its last (the inputs that
    are not cut are upcast once for it, not per slice: NKIBench matmul's rhs is 480 MiB as
    float64), so what the threads computing references hold at once is bounded, however many
    there are."""
    sl = problem.definition.x_reference_slices
    with _evaluations:  # from the upcast of the whole inputs to the last slice's outputs
        if sl is not None:
            inputs = {
                n: np.asarray(v, dtype=precision)
                if n not in sl.inputs and isinstance(v, np.ndarray) and v.dtype.kind == "f"
                else v
                for n, v in inputs.items()
            }
        for lo, hi in spans(problem):
            part = sliced_inputs(problem, inputs, lo, hi)
            out = numpy_ref.reference_outputs(
                problem, part, precision=precision, shapes=slice_shapes(problem, lo, hi)
            )
            yield lo, hi, out
            del out, part
        del inputs


class _Norm:
    """An output's norm and RMS as `compare.RefStats` computes them, accumulated slice by slice."""

    def __init__(self) -> None:
        self.squares = 0.0
        self.count = 0
        self.finite = True

    def add(self, r: np.ndarray) -> None:
        flat = r.reshape(-1)
        for a in range(0, flat.size, 1 << 22):
            c = flat[a : a + (1 << 22)]
            ok = np.isfinite(c)
            if not ok.all():
                self.finite = False
                c = c[ok]
            self.squares += float(np.einsum("i,i->", c, c))
            self.count += c.size

    def stats(self, tol: Tolerance) -> compare.RefStats:
        norm = math.sqrt(self.squares)
        return compare.RefStats.of_norm(
            norm, norm / math.sqrt(self.count) if self.count else 0.0, self.finite, tol
        )


class ReferenceFiles:
    """One case's float64 reference written to `.npy` files, slice by slice (see the module doc):
    `files` (output name -> path), `stats` (`compare.RefStats` without the bound array),
    `seconds` (what computing it took), `finite` (every value of every output)."""

    def __init__(self, problem: Problem, inputs: dict[str, Any], directory: Path, stem: str) -> None:
        tol = compare.tolerance_of(problem.definition)
        shapes = problem.output_shapes()
        self.files = {name: str(directory / f"{stem}-{name}.npy") for name in problem.definition.outputs}
        norms = {name: _Norm() for name in self.files}
        offsets = {name: _create(Path(path), shapes[name] or ()) for name, path in self.files.items()}
        t0 = time.perf_counter()
        for lo, hi, part in slices(problem, inputs):
            for name, r in part.items():
                r64 = np.asarray(r, dtype=np.float64)
                norms[name].add(r64)
                _write(
                    Path(self.files[name]),
                    offsets[name],
                    shapes[name] or (),
                    output_index(problem, name, lo, hi),
                    r64,
                )
            del part
        self.seconds = time.perf_counter() - t0
        self.stats = {name: n.stats(tol) for name, n in norms.items()}
        self.finite = all(n.finite for n in norms.values())

    def arrays(self) -> dict[str, np.ndarray]:
        """The references, memory-mapped read-only."""
        return {n: np.asarray(np.load(p, mmap_mode="r", allow_pickle=False)) for n, p in self.files.items()}


def _create(path: Path, shape: tuple[int, ...]) -> int:
    """An empty float64 .npy of `shape` (its data not written yet: a sparse file); the offset
    of its data."""
    m = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=shape)
    offset = int(m.offset)
    del m
    return offset


def _write(
    path: Path, offset: int, shape: tuple[int, ...], index: tuple[slice, ...], part: np.ndarray
) -> None:
    """Write one slice into the file, through a mapping dropped right after (its pages are then
    the page cache's, not this process's)."""
    m = np.memmap(path, dtype=np.float64, mode="r+", offset=offset, shape=shape)
    try:
        m[index] = part
        m.flush()
    finally:
        del m


def fp32_floor(
    problem: Problem, inputs: dict[str, Any], reference: dict[str, np.ndarray], seed: int
) -> dict[str, fp32.Fp32Floor]:
    """`fp32.fp32_floor`, slice by slice where the definition declares slices (the same
    twins, the same rows and relative L2; the reference read from its files a slice at a time)."""
    if problem.definition.x_reference_slices is None:
        return fp32.fp32_floor(problem, inputs, reference, seed)
    twins = (inputs, fp32.moved_twin(inputs, seed))
    shapes = problem.output_shapes()
    readers = {n: _slice_reader(r) for n, r in reference.items()}
    rows = {n: np.zeros(_rows_shape(shapes[n] or ()), dtype=np.float32) for n in reference}
    rel = dict.fromkeys(reference, 0.0)
    for twin in twins:
        err_sq = dict.fromkeys(reference, 0.0)
        ref_sq = dict.fromkeys(reference, 0.0)
        for lo, hi, got in slices(problem, twin, precision=np.float32):
            for name in reference:
                idx = output_index(problem, name, lo, hi)
                r = readers[name](idx)
                with np.errstate(all="ignore"):
                    e = np.abs(np.asarray(got[name], dtype=np.float64) - r)
                e[~np.isfinite(e)] = 0.0
                fin = r[np.isfinite(r)]
                ref_sq[name] += float(np.einsum("i,i->", fin, fin))
                err_sq[name] += float(np.einsum("i,i->", e.reshape(-1), e.reshape(-1)))
                target = rows[name][idx]  # (the axis is never an output's last: rows stay whole)
                np.maximum(target, e.max(axis=-1).astype(np.float32), out=target)
                del r, e, fin
            del got
        for name in reference:
            norm = math.sqrt(ref_sq[name])
            rel[name] = max(rel[name], math.sqrt(err_sq[name]) / norm if norm > 0 else 0.0)
    return {n: fp32.Fp32Floor(rows=rows[n].reshape(-1), rel_l2=rel[n]) for n in reference}


def _slice_reader(arr: np.ndarray) -> Callable[[tuple[slice, ...]], np.ndarray]:
    """A slice of `arr` as float64, read through a mapping of its own where `arr` maps a file
    (dropped after each slice: the file's pages do not stay in this process's memory, as they
    would through `arr`'s mapping)."""
    base: Any = arr
    while base is not None and not isinstance(base, np.memmap):
        base = base.base
    if isinstance(base, np.memmap) and base.filename and base.shape == arr.shape and base.dtype == arr.dtype:
        path, offset, shape, dtype = base.filename, base.offset, arr.shape, arr.dtype

        def read(idx: tuple[slice, ...]) -> np.ndarray:
            m = np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)
            try:
                return np.array(m[idx], dtype=np.float64)
            finally:
                del m

        return read
    return lambda idx: np.asarray(arr[idx], dtype=np.float64)


def _rows_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    return shape[:-1] if shape else ()


def reference_bytes(problem: Problem) -> int:
    """The most memory one evaluation of the reference (or of its float32 floor) holds: its
    float64 inputs (the sliced ones cut, the others whole, upcast once) and `work` times one
    slice's float64 outputs (the temporaries its formula makes: gqa_full's attention scores
    are 32 times its output), where the definition declares slices; the whole problem's inputs
    and its `x_reference_work` (else `WHOLE_WORK`) times its outputs where not. The floor's float32 evaluation and its
    float64 differences stay within the float64 evaluation's count."""
    d = problem.definition
    sl = d.x_reference_slices
    ins = problem.input_shapes()
    outs = [math.prod(s) for s in problem.output_shapes().values() if s is not None]
    if sl is None:
        whole_in = sum(math.prod(s) for s in ins.values() if s is not None)
        work = d.x_reference_work or WHOLE_WORK
        return int((whole_in + work * sum(outs)) * FLOAT64)
    frac = min(1.0, sl.size / max(1, problem.axis_values()[sl.axis]))
    total = sum(
        math.prod(s) * (frac if name in sl.inputs else 1.0) for name, s in ins.items() if s is not None
    )
    return int((total + sl.work * frac * sum(outs)) * FLOAT64)


__all__ = [
    "ReferenceFiles",
    "fp32_floor",
    "output_index",
    "reference_bytes",
    "slice_shapes",
    "sliced_inputs",
    "slices",
    "spans",
]
