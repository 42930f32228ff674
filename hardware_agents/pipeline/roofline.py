"""A measured kernel on the roofline, and the plausibility gate.

    where = place(problem, spec, t_measured_s, working_set_bytes=None)   # Placement
    where.fields()                       # t_peak_ms, peak_fraction, bound: the Profile's fields
    implausible(t_measured_s, t_peak_s, max_pct_peak)                     # reason | None
    speed_verdict(verdict, problem, spec, latency, max_pct_peak=1.25)     # passed or incorrect

A result faster than `max_pct_peak` x the roofline cannot be real: the timed calls did not
do the work (a cache, deferred work, a forged clock). Every agent's gate is this one, on
its own roofline: the CPU agent's on the FMA peak for matmuls (`gate_spec`), and after it
re-measured its calibrated peaks once (`remeasured`), in case they were measured on a busy
machine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from accelopt.problem import Problem
from accelopt.profile import Bound, LatencyStats, Profile, peak_fraction
from hardware_agents.pipeline.device_spec import DeviceSpec, roofline_terms, t_peak
from hardware_agents.pipeline.verdict import Verdict


class Placement(msgspec.Struct, frozen=True, kw_only=True):
    """Where a measured time sits on a roofline."""

    t_peak_s: float
    bound: Bound
    t_measured_s: float

    def fields(self) -> dict[str, Any]:
        """The Profile fields of the placement."""
        return {
            "t_peak_ms": self.t_peak_s * 1e3,
            "peak_fraction": peak_fraction(self.t_peak_s, self.t_measured_s),
            "bound": self.bound,
        }


def place(
    problem: Problem,
    spec: DeviceSpec,
    t_measured_s: float,
    *,
    working_set_bytes: float | None = None,
) -> Placement:
    tp, bound = t_peak(problem, spec, working_set_bytes=working_set_bytes)
    return Placement(t_peak_s=tp, bound=bound, t_measured_s=t_measured_s)


TIMED_CAUSE = "so the timed calls did not do the work (cached or deferred results?)"


def implausible(
    t_measured_s: float,
    t_peak_s: float,
    max_pct_peak: float,
    *,
    what: str = "measured",
    cause: str = TIMED_CAUSE,
) -> str | None:
    """Why a measurement (or, with `what`/`cause` saying so, an estimate) cannot be real
    (faster than the roofline allows), or None."""
    if t_measured_s <= 0:
        return f"{what} time is not positive"
    pct = peak_fraction(t_peak_s, t_measured_s) or 0.0
    if pct > max_pct_peak:
        return (
            f"{what} {t_measured_s * 1e3:.4g} ms is {pct:.2f}x the roofline "
            f"(T_peak {t_peak_s * 1e3:.4g} ms): faster than the machine allows, {cause}"
        )
    return None


def achieved(
    problem: Problem,
    t_measured_s: float,
    counters: dict[str, float],
    *,
    flops_unit: str = "gflops",
) -> None:
    """The achieved bandwidth and FLOP rate of the problem's minimal work (`achieved_gbs`,
    `achieved_<flops_unit>`: gflops or tflops)."""
    if t_measured_s <= 0:
        return
    terms = roofline_terms(problem)
    counters["achieved_gbs"] = terms.bytes_min / t_measured_s / 1e9
    scale = {"gflops": 1e9, "tflops": 1e12}[flops_unit]
    counters[f"achieved_{flops_unit}"] = (terms.flops_matmul + terms.flops_vector) / t_measured_s / scale


def speed_verdict(
    v: Verdict,
    problem: Problem,
    spec: DeviceSpec,
    latency: LatencyStats,
    *,
    max_pct_peak: float,
    log: str = "",
    working_set_bytes: float | None = None,
    gate_spec: Callable[[DeviceSpec], DeviceSpec] | None = None,
    remeasured: Callable[[], DeviceSpec | None] | None = None,
) -> Profile:
    """A correct, measured kernel's verdict: `passed` with its place on the roofline (the
    latency's median at `working_set_bytes` on `spec`), or `incorrect` (with that place)
    when it is faster than `max_pct_peak` x the roofline of `gate_spec(spec)` (default: the
    same roofline). `remeasured` gives the device's peaks measured again (or None: not now);
    the gate then judges on those."""
    t_meas = latency.median_ms / 1e3

    def gate(s: DeviceSpec) -> tuple[Placement, str | None]:
        where = place(problem, s, t_meas, working_set_bytes=working_set_bytes)
        hard = (
            where.t_peak_s
            if gate_spec is None
            else t_peak(problem, gate_spec(s), working_set_bytes=working_set_bytes)[0]
        )
        return where, implausible(t_meas, hard, max_pct_peak)

    where, why = gate(spec)
    if why and remeasured is not None:
        again = remeasured()
        if again is not None:
            where, why = gate(again)
    if why:
        return v.profile("incorrect", why, latency=latency, **where.fields())
    return v.profile("passed", log, latency=latency, **where.fields())


__all__ = ["Placement", "achieved", "implausible", "place", "speed_verdict"]
