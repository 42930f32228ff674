"""The correctness rule of `compare.compare_outputs`, as torch operations on the device that
holds the outputs: the judge compares in place (`device_judge.py`) instead of copying every
production-size output to the host (a float64 numpy pass of 8.5 ns an element there).

Same rule, same figures, same words: relative L2 error in float64 against the reference's
norm (over its finite elements), the elementwise allclose bound `atol x max(1, rms) + rtol x
|ref|` rounded to float32 as `RefStats` keeps it, a non-finite value where the reference is
finite (or a non-finite value that differs from the reference's) refused, FlashInfer-Bench's
largest relative error, and with the float32 floor (`fp32.Fp32Floor`) each element's bar
widened by FP32_FLOOR_FACTOR times float32's own error in its row and the relative L2 bar by
that factor times float32's. Where the reference's statistics are known (`RefNorm`: the
problem's, computed once) the norm and atol are exactly numpy's; only the sum of squared
errors is summed in another order (the relative L2 agrees to ~1e-12). The count outside
the bound, the largest errors, the first index outside and every note are numpy's.
`test_triton_device_compare.py` holds it to the numpy rule on CPU tensors; gpu_check times
it on a GPU.

Chunked: the float64 temporaries of one chunk, never of a whole production-size output;
`CHUNK` elements a pass on the CPU (cache-sized: 32 K elements took 25-45 ms a million
elements on this 2-core host under load, numpy's chunked rule 27 ms, 4 M-element chunks
120-310 ms), `CUDA_CHUNK` on a GPU (a pass there costs a launch, not a cache).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import msgspec
import torch

from accelopt.problem import Tolerance
from accelopt.profile import SeedCheck
from hardware_agents.pipeline.fp32 import FP32_FLOOR_FACTOR

CHUNK = 1 << 15
CUDA_CHUNK = 1 << 24


def _chunk(t: torch.Tensor) -> int:
    return CUDA_CHUNK if t.is_cuda else CHUNK


class RefNorm(msgspec.Struct, frozen=True, kw_only=True):
    """A reference's statistics as `compare.RefStats` computed them (norm and RMS over its
    finite elements, atol, whether every element is finite)."""

    norm: float
    rms: float
    atol: float
    finite: bool


class Floor(msgspec.Struct, frozen=True, kw_only=True):
    """`fp32.Fp32Floor` on the device: float32's own error per row of the output (the
    row is the last axis) and its relative L2."""

    rows: torch.Tensor
    rel_l2: float


class DeviceCheck(msgspec.Struct, frozen=True, kw_only=True):
    passed: bool
    rel_l2: float
    max_abs: float
    outside: int  # elements outside the allclose bound
    first: int = -1  # the first of them (flat index)
    nonfinite: int = 0  # non-finite values where the reference is finite
    max_rel: float = 0.0  # FlashInfer-Bench's |got - ref| / (|ref| + 1e-8)
    note: str = ""  # validity's words for what failed


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def ref_norm(ref: torch.Tensor, tol: Tolerance) -> RefNorm:
    """`RefStats`' norm, RMS and atol of a reference over its finite elements (summed here)."""
    r = ref.reshape(-1)
    sq, count, finite, step = 0.0, 0, True, _chunk(ref)
    for lo in range(0, r.numel(), step):
        c = r[lo : lo + step].to(torch.float64)
        fin = torch.isfinite(c)
        if not bool(fin.all()):
            finite = False
            c = c[fin]
        sq += float((c * c).sum())
        count += c.numel()
    norm = math.sqrt(sq)
    rms = norm / math.sqrt(count) if count else 0.0
    return RefNorm(norm=norm, rms=rms, atol=tol.atol * max(1.0, rms), finite=finite)


def compare_on_device(
    got: torch.Tensor,
    ref: torch.Tensor,
    tol: Tolerance,
    *,
    stats: RefNorm | None = None,
    floor: Floor | None = None,
) -> DeviceCheck:
    """`got` (any dtype) against `ref` (its values as the agent keeps them: rounded to the
    output dtype), both on one device; `stats`: the reference's (computed here if absent);
    `floor`: the float32 floor of this output (`Floor`)."""
    if tuple(got.shape) != tuple(ref.shape):
        return DeviceCheck(
            passed=False,
            rel_l2=math.inf,
            max_abs=math.inf,
            outside=0,
            max_rel=math.inf,
            note=f"shape {tuple(got.shape)} != expected {tuple(ref.shape)}",
        )
    st = stats or ref_norm(ref, tol)
    g, r = got.reshape(-1), ref.reshape(-1)
    if not (st.finite and _all_finite(g)):
        return _compare_nonfinite(g, r, tol, floor, tuple(ref.shape))
    return _compare_finite(g, r, tol, st, floor, None, tuple(ref.shape))


def _all_finite(t: torch.Tensor) -> bool:
    if not t.is_floating_point():
        return True
    step = _chunk(t)
    return all(bool(torch.isfinite(t[lo : lo + step]).all()) for lo in range(0, t.numel(), step))


def _floor_elems(floor: Floor, shape: tuple[int, ...], lo: int, hi: int) -> torch.Tensor:
    """The floor of the flat elements [lo, hi) (`Fp32Floor.per_element`), float64."""
    row = shape[-1] if shape and shape[-1] > 0 else 1
    rows = floor.rows.reshape(-1)
    first, last = lo // row, (hi - 1) // row
    per = torch.repeat_interleave(rows[first : last + 1], row)
    return per[lo - first * row : hi - first * row].to(torch.float64)


def _compare_nonfinite(
    g: torch.Tensor, r: torch.Tensor, tol: Tolerance, floor: Floor | None, shape: tuple[int, ...]
) -> DeviceCheck:
    """Some value is not finite: numpy's `_compare` path (whole tensors: such outputs are
    rare and refused or compared on their finite elements alone)."""
    g64, r64 = g.to(torch.float64), r.to(torch.float64)
    max_rel = _max_relative_error(g64, r64)
    ref_fin, got_fin = torch.isfinite(r64), torch.isfinite(g64)
    if bool((ref_fin != got_fin).any()) or bool((g64[~ref_fin] != r64[~ref_fin]).any()):
        bad = int((~got_fin & ref_fin).sum())
        nans = int((torch.isnan(g64) & ref_fin).sum())
        note = (
            f"{bad} non-finite values where the reference is finite ({nans} NaN; outputs are "
            "poisoned with NaN, so NaN can mean an element was never written)"
        )
        return DeviceCheck(
            passed=False,
            rel_l2=math.inf,
            max_abs=math.inf,
            outside=0,
            nonfinite=bad,
            max_rel=max_rel,
            note=note,
        )
    fe = None
    if floor is not None:
        fe = _floor_elems(floor, shape, 0, r64.numel())[ref_fin]
    gf, rf = g64[ref_fin], r64[ref_fin]
    st = ref_norm(rf, tol)
    chk = _compare_finite(gf, rf, tol, st, floor, fe, shape)
    return msgspec.structs.replace(chk, max_rel=max_rel)


def _max_relative_error(g64: torch.Tensor, r64: torch.Tensor) -> float:
    """`compare.max_relative_error` (equal infinities and NaN where the reference is NaN: 0)."""
    d = (g64 - r64).abs()
    d[(g64 == r64) | (torch.isnan(g64) & torch.isnan(r64))] = 0.0
    if not bool(torch.isfinite(d).all()):
        return math.inf
    return float((d / (r64.abs() + 1e-8)).max()) if d.numel() else 0.0


def _compare_finite(
    g: torch.Tensor,
    r: torch.Tensor,
    tol: Tolerance,
    st: RefNorm,
    floor: Floor | None,
    floor_elems: torch.Tensor | None,
    shape: tuple[int, ...],
) -> DeviceCheck:
    n = g.numel()
    if n == 0:
        return DeviceCheck(passed=True, rel_l2=0.0, max_abs=0.0, outside=0)
    k = FP32_FLOOR_FACTOR
    err2, max_abs, max_rel, outside, first = 0.0, 0.0, 0.0, 0, -1
    step = _chunk(g)
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        gs, rs = g[lo:hi].to(torch.float64), r[lo:hi].to(torch.float64)
        d = gs - rs
        err2 += float((d * d).sum())
        d.abs_()
        max_abs = max(max_abs, float(d.max()))
        a = rs.abs()  # (rs may be the reference itself: never in place)
        lim = (a * tol.rtol + st.atol).to(torch.float32).to(torch.float64)
        if floor_elems is not None:
            lim += k * floor_elems[lo:hi]
        elif floor is not None:
            lim += k * _floor_elems(floor, shape, lo, hi)
        over = d > lim
        n_over = int(over.sum())
        if n_over and first < 0:
            first = lo + int(torch.argmax(over.to(torch.uint8)))
        outside += n_over
        max_rel = max(max_rel, float((d / (a + 1e-8)).max()))
    err = math.sqrt(err2)
    rel = err / st.norm if st.norm > 0 else err
    rel_bar = tol.rel_l2 if floor is None else max(tol.rel_l2, k * floor.rel_l2)
    widened = "" if floor is None else f" (with {k:g}x float32's own error)"
    notes = []
    if rel > rel_bar:
        notes.append(f"relative L2 error {_fmt(rel)} > {_fmt(rel_bar)}{widened}")
    if outside:
        notes.append(
            f"{outside} of {n} elements outside allclose(atol={_fmt(st.atol)}, "
            f"rtol={_fmt(tol.rtol)}){widened}; first at flat index {first}: got {_fmt(float(g[first]))} "
            f"expected {_fmt(float(r[first]))}"
        )
    return DeviceCheck(
        passed=not notes,
        rel_l2=rel,
        max_abs=max_abs,
        outside=outside,
        first=first,
        max_rel=max_rel,
        note="; ".join(notes),
    )


def check_on_device(
    case: str,
    outputs: Mapping[str, torch.Tensor],
    reference: Mapping[str, torch.Tensor],
    tol: Tolerance,
    *,
    stats: Mapping[str, RefNorm] | None = None,
    floor: Mapping[str, Floor] | None = None,
) -> SeedCheck:
    """`compare.compare_outputs` on the device: one SeedCheck for a case, every output in
    the reference's order, the same figures and notes."""
    worst_rel, worst_abs, worst_elem, notes, ok = 0.0, 0.0, 0.0, [], True
    for name, ref in reference.items():
        got = outputs.get(name)
        if got is None:
            return SeedCheck(case=case, passed=False, note=f"output {name} missing")
        chk = compare_on_device(got, ref, tol, stats=(stats or {}).get(name), floor=(floor or {}).get(name))
        worst_rel, worst_abs = max(worst_rel, chk.rel_l2), max(worst_abs, chk.max_abs)
        worst_elem = max(worst_elem, chk.max_rel)
        if not chk.passed:
            ok = False
            notes.append(f"{name}: {chk.note}")
    return SeedCheck(
        case=case,
        passed=ok,
        rel_l2=_finite_or_none(worst_rel),
        max_abs_err=_finite_or_none(worst_abs),
        max_rel_err=_finite_or_none(worst_elem),
        note="; ".join(notes),
    )


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


__all__ = [
    "CHUNK",
    "CUDA_CHUNK",
    "DeviceCheck",
    "Floor",
    "RefNorm",
    "check_on_device",
    "compare_on_device",
    "ref_norm",
]
