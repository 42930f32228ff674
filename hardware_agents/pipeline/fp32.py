"""The float32 floor of the tolerance (`Fp32Floor`, `fp32_floor`): the bar widened by what
the reference formula itself misses by in float32 on the same inputs, where float32 cannot
meet the tolerance (the Neuron agent passes it for an output that missed it; the Triton agent,
for an adversarial case that missed it, with the floor its reference child measures:
`hardware_agents/triton/reference.py`, `fp32_floor_of`). `compare` applies it.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from accelopt.problem import Problem
from hardware_agents.pipeline.numpy_ref import reference_outputs

# How many times the error of the reference formula's own float32 evaluation a kernel may make
# (see `Fp32Floor`).
FP32_FLOOR_FACTOR = 4.0


class Fp32Floor(msgspec.Struct, kw_only=True):
    """What float32 arithmetic cannot resolve on one case's inputs: the error, against the
    float64 reference, of the reference formula itself evaluated in float32 (the larger of
    two evaluations: on the inputs, and on the inputs moved by one unit in the last place in
    random directions), per row of the output (`rows`: the largest error along the last
    axis, one value per row) and overall (`rel_l2`).

    Why: the tolerance is a bar for float32 kernels, and float32 accumulation error grows with
    the reduction length and with the magnitude of the summands, not of the result: a sum
    of n products has error up to ~n u sum|a_i b_i| (u = 2^-24; typically sqrt(n) u sum|a_i b_i|),
    far above `rtol * |result|` where the summands cancel, and a nonlinear stage amplifies it
    further (a softmax over scores of 1e6 whose top two differ by a few units of the scores'
    last place has no float32 answer closer than a few units of the output). The
    adversarial `large` case puts kernels exactly there: NKIBench's own gqa_full baseline
    misses 85 of 8.4 M elements (one query whose two best keys are 13 ulps apart: ten honest
    float32 summation orders give 4.4 to 76 there, numpy's float32 evaluation 36) and mamba
    one of 1.8 M (a 7168-step scan: every float32 evaluation carries the rounding of its
    decay factors; the kernel is within 7 % of numpy's float32 result everywhere).

    Measuring the floor by evaluating the reference in float32 covers every formula without
    knowing its reduction lengths. Where the error is random rather than systematic (the
    tie above: which summation order lands where is chance), one evaluation's error at one
    element says little about another's: two evaluations, and the largest error of the
    element's row (the elements that share every index but the last: in the 14 NKIBench
    outputs, one row of features computed from the same row of inputs) make the scale
    robust. A kernel may miss by FP32_FLOOR_FACTOR times the floor (4: the ten orders above
    spread over 2.1x of numpy's error). Where float32 is accurate (every seed case of the 14
    NKIBench problems) the floor is ~u|ref| and the bar is the tolerance's; reduced precision
    (bf16, tf32: 2^-8, 2^-11 relative) stays hundreds of times above it."""

    rows: Any  # np.ndarray, float32, one value per row (the output's size / its last dimension)
    rel_l2: float

    def per_element(self, shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
        """The floor of the flat elements [lo, hi) of an output of `shape`."""
        row = shape[-1] if shape and shape[-1] > 0 else 1
        rows = np.asarray(self.rows).reshape(-1)
        first, last = lo // row, (hi - 1) // row
        return np.repeat(rows[first : last + 1], row)[lo - first * row : hi - first * row]


def error_floor(got: dict[str, Any], reference: dict[str, np.ndarray]) -> dict[str, Fp32Floor]:
    """The `Fp32Floor` of `got`'s own error against `reference` (float64), per output: e.g.
    of a trusted float32 implementation (the problem's baseline) on the same inputs."""
    out: dict[str, Fp32Floor] = {}
    for name, ref in reference.items():
        r = np.asarray(ref, dtype=np.float64)
        with np.errstate(all="ignore"):
            e = np.abs(np.asarray(got[name], dtype=np.float64) - r)
        e[~np.isfinite(e)] = 0.0
        norm = float(np.linalg.norm(r[np.isfinite(r)]))
        rows = (e.reshape(-1, r.shape[-1]).max(axis=1) if r.ndim and r.size else e.reshape(-1)).astype(
            np.float32
        )
        out[name] = Fp32Floor(rows=rows, rel_l2=float(np.linalg.norm(e)) / norm if norm > 0 else 0.0)
    return out


def widest(*floors: dict[str, Fp32Floor]) -> dict[str, Fp32Floor]:
    """Per output, the larger of the floors' rows and overall errors."""
    out: dict[str, Fp32Floor] = {}
    for floor in floors:
        for name, f in floor.items():
            prev = out.get(name)
            if prev is None:
                out[name] = Fp32Floor(rows=np.array(f.rows, dtype=np.float32), rel_l2=f.rel_l2)
            else:
                np.maximum(prev.rows, f.rows, out=prev.rows)
                prev.rel_l2 = max(prev.rel_l2, f.rel_l2)
    return out


def moved_twin(inputs: dict[str, Any], seed: int) -> dict[str, Any]:
    """The inputs moved one unit in the last place, each float32 element in a random direction
    (`Fp32Floor`'s second evaluation), drawn in blocks: the same numbers as one draw of each
    input's size, without a float64 array of it."""
    rng = np.random.default_rng([seed, 0xF10])
    moved: dict[str, Any] = {}
    for name, v in inputs.items():
        if not (isinstance(v, np.ndarray) and v.dtype == np.float32):
            moved[name] = v
            continue
        src = np.ascontiguousarray(v).reshape(-1)
        dst = np.empty_like(src)
        for a in range(0, src.size, _MOVE_BLOCK):
            z = min(src.size, a + _MOVE_BLOCK)
            away = np.where(rng.random(z - a) < 0.5, np.float32(-np.inf), np.float32(np.inf))
            dst[a:z] = np.nextafter(src[a:z], away)
        moved[name] = dst.reshape(v.shape)
    return moved


_MOVE_BLOCK = 1 << 22


def fp32_floor(
    problem: Problem, inputs: dict[str, Any], reference: dict[str, np.ndarray], seed: int
) -> dict[str, Fp32Floor]:
    """The `Fp32Floor` of each output on these inputs (`reference`: their float64 outputs)."""
    # non-finite twins say nothing (the finite check stays as it is)
    return widest(
        *(
            error_floor(reference_outputs(problem, twin, precision=np.float32), reference)
            for twin in (inputs, moved_twin(inputs, seed))
        )
    )
