"""A device's roofline: its peaks (`DeviceSpec`, measured or cited) and the time a problem
takes on them (`t_peak`):

    T_peak = max(bytes_min / BW, flops_matmul / PEAK_MM, flops_vector / PEAK_VEC)
    peak_fraction = T_peak / t_measured      (accelopt.profile.peak_fraction; 1.0 = on the roofline)

Roofline expressions come from problem files, i.e. from outside the program, so they are
evaluated by a small AST whitelist (numbers, axis names, + - * / ** and parentheses; see
`accelopt.problem.eval_expression`), never by `eval`. Where a measured time sits on the
roofline, and the plausibility gate, are `roofline.py`.
"""

from __future__ import annotations

import itertools
import math

import msgspec

from accelopt.problem import ExpressionError, Problem, eval_expression
from accelopt.profile import Bound


class BandwidthPoint(msgspec.Struct, frozen=True, kw_only=True):
    """Measured bandwidth when the data of one pass occupies `working_set_bytes`."""

    working_set_bytes: int
    bytes_per_s: float


class DeviceSpec(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Roofline peaks of one device (per core / per chip as the kind defines it).

    `bw_curve`, when present, makes the memory roof cache-aware: the bandwidth that applies
    is the one measured at the working set the kernel is timed with (see `bandwidth_at`).
    """

    kind: str
    name: str
    peak_bw_bytes_s: float
    peak_matmul_flops: float
    peak_vector_flops: float
    source: str = ""
    measured: bool = False
    bw_curve: list[BandwidthPoint] = []
    extra: dict[str, str] = {}

    def bandwidth_at(self, working_set_bytes: float | None) -> float:
        """Bandwidth for a working set: log-linear interpolation on `bw_curve`.

        Below the smallest point the smallest point's value is used, above the largest the
        largest's; with no curve (or no size given) it is `peak_bw_bytes_s`.
        """
        if not self.bw_curve or working_set_bytes is None:
            return self.peak_bw_bytes_s
        pts = sorted(self.bw_curve, key=lambda p: p.working_set_bytes)
        w = max(float(working_set_bytes), 1.0)
        if w <= pts[0].working_set_bytes:
            return pts[0].bytes_per_s
        for lo, hi in itertools.pairwise(pts):
            if w <= hi.working_set_bytes:
                f = (math.log(w) - math.log(lo.working_set_bytes)) / (
                    math.log(hi.working_set_bytes) - math.log(lo.working_set_bytes)
                )
                return lo.bytes_per_s + f * (hi.bytes_per_s - lo.bytes_per_s)
        return pts[-1].bytes_per_s


# --- the roofline --------------------------------------------------------------------------------


class RooflineTerms(msgspec.Struct, frozen=True, kw_only=True):
    flops_matmul: float
    flops_vector: float
    bytes_min: float


def roofline_terms(problem: Problem) -> RooflineTerms:
    """The problem's FLOPs and minimal bytes at its workload's axis values."""
    roof = problem.definition.x_roofline
    if roof is None:
        raise ExpressionError(f"{problem.name}: definition has no x_roofline")
    axes = problem.axis_values()
    return RooflineTerms(
        flops_matmul=eval_expression(roof.flops_matmul, axes),
        flops_vector=eval_expression(roof.flops_vector, axes),
        bytes_min=eval_expression(roof.bytes_min, axes),
    )


def t_peak(
    problem: Problem,
    spec: DeviceSpec,
    *,
    working_set_bytes: float | None = None,
) -> tuple[float, Bound]:
    """Roofline time in seconds and which roof binds.

    `working_set_bytes` selects the bandwidth on a cache-aware spec; by default it is the
    problem's `bytes_min`.
    """
    terms = roofline_terms(problem)
    ws = terms.bytes_min if working_set_bytes is None else working_set_bytes
    candidates: list[tuple[float, Bound]] = [
        (terms.bytes_min / spec.bandwidth_at(ws), "memory"),
        (terms.flops_matmul / spec.peak_matmul_flops, "matmul"),
        (terms.flops_vector / spec.peak_vector_flops, "vector"),
    ]
    return max(candidates, key=lambda c: c[0])


__all__ = ["BandwidthPoint", "DeviceSpec", "RooflineTerms", "roofline_terms", "t_peak"]
