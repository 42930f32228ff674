"""Text blocks the templates are filled with: problem, profile, fences, speedup.

Fixes over the paper's prompts (see `prompts/__init__.py`): concrete workload shapes, the
true correctness bar, a full profile (latency, % of peak, bound, counters) whose lines are
shuffled deterministically per request, and a substituted speedup.
"""

from __future__ import annotations

import hashlib
import random

from accelopt.problem import AxisConst, Problem, ScalarInput, Tolerance, Workload
from accelopt.profile import Profile
from hardware_agents.languages import fence, get_language

__all__ = [
    "axis_lines",
    "check_workload_line",
    "correctness_bar",
    "fence",
    "format_problem",
    "format_profile",
    "format_speedup",
    "interface_lines",
    "shuffle_key",
]


def axis_lines(problem: Problem) -> list[str]:
    values = problem.axis_values()
    out = []
    for name, axis in problem.definition.axes.items():
        value = values.get(name)
        shown = str(value) if value is not None else "(not fixed by the workload)"
        note = f"  ({axis.description})" if axis.description else ""
        kind = "" if isinstance(axis, AxisConst) else " [workload]"
        out.append(f"- {name} = {shown}{kind}{note}")
    return out


def _tensor_lines(problem: Problem, outputs: bool) -> list[str]:
    d = problem.definition
    specs = d.outputs if outputs else d.inputs
    values = problem.axis_values()
    lines = []
    for name, spec in specs.items():
        if spec.shape is None:
            src = problem.workload.inputs.get(name)
            value = f" = {src.value!r}" if isinstance(src, ScalarInput) else ""
            lines.append(f"- {name}: scalar {spec.dtype}{value}")
            continue
        symbolic = ", ".join(spec.shape)
        concrete = ", ".join(str(values.get(a, a)) for a in spec.shape)
        note = f"  ({spec.description})" if spec.description else ""
        lines.append(f"- {name}: {spec.dtype}[{symbolic}] = [{concrete}]{note}")
    return lines


def check_workload_line(problem: Problem, workload: Workload) -> str:
    axes = ", ".join(f"{k} = {v}" for k, v in workload.axes.items()) or "(no variable axes)"
    return f"{workload.x_label}: {axes}" if workload.x_label else axes


def correctness_bar(problem: Problem, language: str = "c") -> str:
    tol = problem.definition.x_tolerance or Tolerance()
    return (
        "A kernel counts only if every output matches the reference (computed in float64) on every "
        f"check: relative L2 error ||out - ref||_2 / ||ref||_2 < {tol.rel_l2:g}, and elementwise "
        f"|out - ref| <= {tol.atol:g} * max(1, rms(ref)) + {tol.rtol:g} * |ref|. The checks use several "
        "fresh random seeds plus adversarial inputs (for example inputs scaled by 1000, which break a "
        "softmax without max subtraction or an unguarded exp). Inputs must not be modified. "
        + get_language(language).output_rule
        + "Timing is done by the harness."
    )


def interface_lines(problem: Problem, language: str) -> list[str]:
    """How the harness calls the kernel (what the generated code must keep)."""
    return get_language(language).interface_lines(problem)


def format_problem(problem: Problem, language: str) -> str:
    """The problem section: what to compute, at which shapes, to which correctness bar."""
    d = problem.definition
    parts = [f"Name: {d.name} (operator type: {d.op_type})"]
    if d.description:
        parts.append(d.description.strip())
    parts += ["", "## Shapes (fixed for this problem)", *axis_lines(problem)]
    parts += ["", "## Inputs", *_tensor_lines(problem, outputs=False)]
    parts += ["", "## Outputs", *_tensor_lines(problem, outputs=True)]
    if problem.check_workloads:
        parts += [
            "",
            "## Also checked at (correctness only; the kernel must handle these sizes too)",
            *(f"- {check_workload_line(problem, w)}" for w in problem.check_workloads),
        ]
    if d.constraints:
        parts += ["", "## Constraints", *(f"- {c}" for c in d.constraints)]
    parts += ["", "## Kernel interface", *interface_lines(problem, language)]
    parts += ["", "## Correctness bar", correctness_bar(problem, language)]
    if d.x_numpy_reference and get_language(language).numpy_reference:
        parts += ["", "## Reference implementation (numpy)", fence(d.x_numpy_reference, "python")]
    else:
        parts += ["", "## Reference implementation", fence(d.reference, "python")]
    return "\n".join(parts)


def shuffle_key(seed: int, request_id: str) -> int:
    digest = hashlib.sha256(f"profile-order\x1f{seed}\x1f{request_id}".encode()).hexdigest()
    return int(digest[:16], 16)


def _num(x: float) -> str:
    return f"{x:.6g}"


def format_profile(profile: Profile | None, *, seed: int, request_id: str) -> str:
    """`key: value` lines, in an order shuffled by (run seed, request id) as the paper shuffles
    its profile lines per call (but reproducibly)."""
    if profile is None:
        return "No profile is available for this kernel."
    lines = [f"status: {profile.status}"]
    lat = profile.latency
    if lat is not None:
        lines.append(f"latency_ms (median of {len(lat.samples_ms)} runs): {_num(lat.median_ms)}")
        lines.append(f"latency_ms_min_max: {_num(lat.min_ms)} / {_num(lat.max_ms)}")
        lines.append(f"latency_spread: {lat.spread * 100:.2f}%")
    if profile.t_peak_ms is not None:
        lines.append(f"roofline_time_ms (fastest possible on this device): {_num(profile.t_peak_ms)}")
    if profile.peak_fraction is not None:
        lines.append(f"percent_of_peak: {profile.peak_fraction * 100:.1f}%")
    if profile.bound is not None:
        lines.append(f"bound (roof that limits this problem): {profile.bound}")
    est = profile.estimate
    if est is not None:  # a cost model's figures: named as estimates, never as the latency
        lines.append(f"ESTIMATED_latency_ms (cost model {est.model}, not measured): {_num(est.latency_ms)}")
        if est.t_peak_ms is not None:
            lines.append(f"roofline_time_ms (fastest possible on this device): {_num(est.t_peak_ms)}")
        if est.peak_fraction is not None:
            lines.append(f"ESTIMATED_percent_of_peak: {est.peak_fraction * 100:.1f}%")
        if est.bound:
            lines.append(f"ESTIMATED_bottleneck_engine: {est.bound}")
        for eng, ms in sorted(est.engines_ms.items()):
            lines.append(f"ESTIMATED_{eng}_busy_ms: {_num(ms)}")
        for key, value in sorted(est.detail.items()):
            lines.append(f"ESTIMATED_{key}: {_num(value)}")
    for key, value in sorted(profile.counters.items()):
        lines.append(f"{key}: {_num(value)}")
    random.Random(shuffle_key(seed, request_id)).shuffle(lines)
    return "\n".join(lines)


def format_speedup(speedup: float, *, positive: bool, device: str, estimated: bool = False) -> str:
    s = speedup if speedup >= 1.0 else 1.0 / speedup
    how = (
        f"ESTIMATED for {device} by a cost model, not measured: both kernels were checked in an emulator"
        if estimated
        else f"measured on {device}"
    )
    text = f"{s:.3f}x: the fast kernel runs {s:.3f} times faster than the slow kernel ({how})."
    if not positive:
        text += (
            " This pair is a regression seen in reverse: the slow kernel is a change that made the"
            " fast kernel slower, so the lesson is how to undo or avoid that change."
        )
    return text
