"""The cases of one profile: the correctness seeds and adversarial cases of each workload a
plan checks, and the seeds of the timing inputs, drawn so that no kernel has seen them.

    plan_cases(problem, seeds)                  # every case at the problem's workload
    plan_cases(problem, seeds, [w0, w1, ...])   # every case at w0, the first seed at the others
    adversarial_overflow(problem_name, case, ref64)   # why a reference is unusable, or None
    fresh_seed(avoid)                           # a timing seed from the OS's random source
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping, Sequence

import msgspec
import numpy as np

from accelopt.problem import Problem, Workload
from hardware_agents.pipeline import inputgen


class PlannedCase(msgspec.Struct, frozen=True, kw_only=True):
    name: str  # unique in the plan, safe as a file name
    workload: Workload
    case: inputgen.InputCase
    label: str  # the workload's label, for logs


def case_name(prefix: str, case: inputgen.InputCase) -> str:
    base = f"{prefix}-{case.name}" if prefix else case.name
    return re.sub(r"[^A-Za-z0-9_.-]", "_", base)


def workload_label(w: Workload, index: int) -> str:
    return w.x_label or f"w{index}"


def describe_axes(w: Workload) -> str:
    return " ".join(f"{k}={v}" for k, v in w.axes.items()) or "(no variable axes)"


def plan_cases(
    problem: Problem,
    seeds: Sequence[int],
    workloads: Sequence[Workload] | None = None,
) -> list[PlannedCase]:
    """The cases of one profile: every seed and adversarial case (`inputgen.input_cases`) at
    the first workload (by default the problem's own, the only one), one seed at each other
    (a device's check workloads: other shapes, the seeds' values are the same draw)."""
    cases = inputgen.input_cases(problem.definition, seeds)
    first_seed = [c for c in cases if not c.adversarial][:1]
    plan: list[PlannedCase] = []
    for i, w in enumerate(workloads or [problem.workload]):
        label = workload_label(w, i)
        prefix = "" if i == 0 else label
        for c in cases if i == 0 else first_seed:
            plan.append(PlannedCase(name=case_name(prefix, c), workload=w, case=c, label=label))
    return plan


def adversarial_overflow(
    problem_name: str, case: inputgen.InputCase, ref64: Mapping[str, np.ndarray]
) -> str | None:
    """Why an adversarial case cannot be judged (its reference is non-finite: the magnitudes
    overflow the reference itself), or None. A seed case's reference is taken as it is."""
    bad = [n for n, r in ref64.items() if not np.all(np.isfinite(r))]
    if not bad or not case.adversarial:
        return None
    return f"{problem_name}: adversarial case {case.name!r} makes the reference non-finite in {bad}; fix x_adversarial"


def fresh_seed(avoid: Iterable[int]) -> int:
    """A seed from the OS's random source that is none of `avoid` (the correctness seeds and
    the timing seeds drawn so far): inputs no kernel has seen, so a cache keyed on content
    misses."""
    used = set(avoid)
    seed = secrets.randbits(31)
    while seed in used:
        seed = secrets.randbits(31)
    return seed


__all__ = [
    "PlannedCase",
    "adversarial_overflow",
    "case_name",
    "describe_axes",
    "fresh_seed",
    "plan_cases",
    "workload_label",
]
