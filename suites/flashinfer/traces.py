"""Our profiles as FlashInfer-Bench traces (and back to a status).

FlashInfer-Bench's rules (`flashinfer_bench.data.trace.Evaluation`): PASSED carries
correctness and performance, INCORRECT_NUMERICAL correctness only, every other status
neither; errors and latencies are non-negative (errors may be NaN/inf). Our statuses map so:

    passed            PASSED (latency = our median; FlashInfer-Bench's own is a mean of medians)
    incorrect         INCORRECT_NUMERICAL with the errors measured, else (no values compared:
                      missing output, wrong shape or dtype) RUNTIME_ERROR naming the reason
    compile_error     COMPILE_ERROR
    runtime_error     RUNTIME_ERROR
    timeout           TIMEOUT
    (reason no_triton_launch: RUNTIME_ERROR, "launched no Triton kernel", whatever the status)
    timing_mismatch   RUNTIME_ERROR (the kernel's own clock disagreed with ours)
    sandbox_error     RUNTIME_ERROR (the isolation could not be applied; nothing ran)
    unmeasured        no evaluation (FlashInfer-Bench's "not evaluated yet": `flashinfer-bench
                      run --resume` times it); our correctness goes under `x_untimed`
    unchecked         no evaluation and no `x_untimed`: nothing ran here (a shape this host's
                      checker cannot run), so nothing is claimed

`max_relative_error` is FlashInfer-Bench's: the largest |got - ref| / (|ref| + 1e-8) over the
elements of every check; our relative L2 error rides in `correctness.extra["x_rel_l2"]`.
"""

from __future__ import annotations

import math
import time

from accelopt.problem import Correctness, Environment, Evaluation, Performance, Problem, Solution, Trace
from accelopt.profile import Profile, SeedCheck
from hardware_agents.families import runtime_reason

FIB_STATUS = {
    "passed": "PASSED",
    "compile_error": "COMPILE_ERROR",
    "runtime_error": "RUNTIME_ERROR",
    "incorrect": "INCORRECT_NUMERICAL",
    "timeout": "TIMEOUT",
    "timing_mismatch": "RUNTIME_ERROR",
    "sandbox_error": "RUNTIME_ERROR",
}


def _worst(checks: list[SeedCheck], field: str) -> float:
    """The largest value of `field` over the checks: inf where an output was non-finite, NaN
    where a check has no value (a record from before the field existed)."""
    vals = [
        getattr(c, field)
        if getattr(c, field) is not None
        else (math.inf if "non-finite" in c.note else math.nan)
        for c in checks
    ]
    if any(math.isinf(v) for v in vals):
        return math.inf
    if any(math.isnan(v) for v in vals):
        return math.nan
    return max(vals, default=0.0)


def correctness_of(checks: list[SeedCheck]) -> Correctness | None:
    """FlashInfer-Bench's Correctness over the checks that compared values (None if none did)."""
    compared = [
        c
        for c in checks
        if c.rel_l2 is not None
        or c.max_abs_err is not None
        or c.max_rel_err is not None
        or (not c.passed and "non-finite" in c.note)
    ]
    if not compared:
        return None
    return Correctness(
        max_relative_error=_worst(compared, "max_rel_err"),
        max_absolute_error=_worst(compared, "max_abs_err"),
        extra={"x_rel_l2": _worst(compared, "rel_l2"), "x_cases": {c.case: c.passed for c in checks}},
    )


def to_trace(
    problem: Problem, solution: Solution, profile: Profile, *, hardware: str, timestamp: str | None = None
) -> Trace:
    """The FlashInfer Trace of one profile (our extras in x_ fields)."""
    env = Environment(hardware=hardware, libs=dict(profile.toolchain))
    stamp = timestamp or time.strftime("%Y-%m-%dT%H:%M:%S")
    correctness = correctness_of(profile.correctness)
    log = profile.log
    if profile.status == "unchecked":
        return Trace(definition=problem.definition.name, workload=problem.workload, solution=solution.name)
    if profile.status == "unmeasured":
        untimed = Evaluation(
            status="PASSED", environment=env, timestamp=stamp, log=log, correctness=correctness
        )
        return Trace(
            definition=problem.definition.name,
            workload=problem.workload,
            solution=solution.name,
            x_untimed=untimed,
        )
    status = FIB_STATUS[profile.status]
    performance = None
    if status == "PASSED":
        if profile.latency is None or correctness is None:
            raise ValueError(f"a passed profile of {solution.name} without latency or correctness checks")
        performance = Performance(latency_ms=profile.latency.median_ms)
    elif status == "INCORRECT_NUMERICAL" and correctness is None:
        status = (
            "RUNTIME_ERROR"  # no values were compared: FlashInfer-Bench's INCORRECT_NUMERICAL needs errors
        )
    said = runtime_reason(profile.reason)
    if said is not None:
        status = "RUNTIME_ERROR"
        log = said + (f"\n{log}" if log else "")
    return Trace(
        definition=problem.definition.name,
        workload=problem.workload,
        solution=solution.name,
        evaluation=Evaluation(
            status=status,  # type: ignore[arg-type]
            environment=env,
            timestamp=stamp,
            log=log,
            correctness=correctness if status in ("PASSED", "INCORRECT_NUMERICAL") else None,
            performance=performance,
            x_pct_peak=profile.peak_fraction,
            x_bound=profile.bound,
        ),
    )
