"""The correctness rule of `validity.compare_outputs`, as torch operations on the device that
holds the outputs: the first piece of a judge that compares on the GPU instead of copying every
production-size output to the host (a float64 numpy pass of 8.5 ns an element there).

Same rule, same figures: relative L2 error in float64 against the reference's norm (over its
finite elements), the elementwise allclose bound `atol x max(1, rms) + rtol x |ref|` rounded to
float32 as `RefStats` keeps it, a non-finite value where the reference is finite (or a
non-finite value that differs from the reference's) refused. Only the sums' order differs
from numpy's chunked one (the relative L2 agrees to ~1e-12); the count outside the bound, the
largest error and the first index outside are the same. Without the float32 floor (the agent
compares a case that needs it on the host). `test_triton_device_compare.py` holds it to the
numpy rule on CPU tensors; gpu_check's probe times it on a GPU.
"""

from __future__ import annotations

import math

import msgspec
import torch

from accelopt.problem import Tolerance


class DeviceCheck(msgspec.Struct, frozen=True, kw_only=True):
    passed: bool
    rel_l2: float
    max_abs: float
    outside: int  # elements outside the allclose bound
    first: int = -1  # the first of them (flat index)
    nonfinite: int = 0  # non-finite values where the reference is finite


def compare_on_device(got: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> DeviceCheck:
    """`got` (any float dtype) against `ref` (float64, rounded to the output dtype as the
    agent's references are), both on one device."""
    g, r = got.reshape(-1).to(torch.float64), ref.reshape(-1).to(torch.float64)
    ref_fin, got_fin = torch.isfinite(r), torch.isfinite(g)
    if not bool(ref_fin.all() and got_fin.all()):
        bad = int((~got_fin & ref_fin).sum())
        differs = bool((ref_fin != got_fin).any()) or bool((g[~ref_fin] != r[~ref_fin]).any())
        if bad or differs:
            return DeviceCheck(passed=False, rel_l2=math.inf, max_abs=math.inf, outside=0, nonfinite=bad)
        g, r = g[ref_fin], r[ref_fin]
    if r.numel() == 0:
        return DeviceCheck(passed=True, rel_l2=0.0, max_abs=0.0, outside=0)
    norm = float(torch.linalg.vector_norm(r))
    atol = tol.atol * max(1.0, norm / math.sqrt(r.numel()))
    a = r.abs()
    bound = (a * tol.rtol + atol).to(torch.float32).to(torch.float64)
    d = g - r
    err = math.sqrt(float((d * d).sum()))
    ad = d.abs()
    over = ad > bound
    outside = int(over.sum())
    first = int(torch.argmax(over.to(torch.uint8))) if outside else -1
    rel = err / norm if norm > 0 else err
    return DeviceCheck(
        passed=rel <= tol.rel_l2 and not outside,
        rel_l2=rel,
        max_abs=float(ad.max()),
        outside=outside,
        first=first,
    )


__all__ = ["DeviceCheck", "compare_on_device"]
