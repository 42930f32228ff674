"""The hardware-agent interface and the roofline (see hardware_agents/README.md).

A hardware agent turns (problem, solution) into a `Profile`: compile, check correctness on
fresh and adversarial inputs, time, and place the result on the device's roofline:

    T_peak = max(bytes_min / BW, flops_matmul / PEAK_MM, flops_vector / PEAK_VEC)
    peak_fraction = T_peak / t_measured      (accelopt.profile.peak_fraction; 1.0 = on the roofline)

Roofline expressions come from problem files, i.e. from outside the program, so they are
evaluated by a small AST whitelist (numbers, axis names, + - * / ** and parentheses; see
`accelopt.problem.eval_expression`), never by `eval`.

Agents are made by their device family (`hardware_agents/family.py`), found in the
registry of families (`hardware_agents/families.py`: `get_agent`, `available_devices`).
"""

from __future__ import annotations

import itertools
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

import msgspec

from accelopt.problem import (
    ExpressionError,
    Problem,
    Solution,
    eval_expression,
    expression_names,
    parse_expression,
)
from accelopt.profile import Bound, Profile
from hardware_agents import host_memory
from hardware_agents.pipeline.stages import Stages, run_stages

__all__ = [
    "DEFAULT_SEEDS",
    "BandwidthPoint",
    "DeviceSpec",
    "ExpressionError",
    "HardwareAgent",
    "RooflineTerms",
    "eval_expression",
    "expression_names",
    "parse_expression",
    "roofline_terms",
    "t_peak",
]

# Correctness seeds used when the caller names none (three fresh seeds).
DEFAULT_SEEDS: tuple[int, ...] = (0, 21, 42)
MAX_SOURCE_BYTES = 1 << 20  # a kernel's sources, all files together: a larger one is a compile error


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


# --- roofline --------------------------------------------------------------------------------


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


# --- the interface ---------------------------------------------------------------------------


class HardwareAgent(ABC):
    """Profiles kernels for one device kind. `profile` blocks and is safe to call from threads.

    An agent implements `stages(problem, solution, seeds, timeout_s, measure)`: its hooks for
    one profile, which `profile` runs in the one order of `pipeline/stages.py` (static checks,
    build, stage inputs, correctness, timing rounds, clock bound, roofline gate, verdict),
    recording each stage in the profile's counters. `profile` normalises the arguments and
    records the wall time, and `_fail` makes a failed Profile with the device and toolchain
    filled in, so every agent reports the same way (the isolation a sandbox applied goes into
    `Profile.isolation`).
    """

    kind: ClassVar[str]
    languages: ClassVar[tuple[str, ...]]
    timeout_s: float = 60.0

    @property
    @abstractmethod
    def spec(self) -> DeviceSpec:
        """The roofline spec used for % of peak (measured or cited); `kind` is the device kind."""

    def profile(
        self,
        problem: Problem,
        solution: Solution,
        *,
        seeds: Sequence[int] = DEFAULT_SEEDS,
        timeout_s: float | None = None,
        measure: bool = True,
    ) -> Profile:
        """Compile, check correctness on `seeds` plus adversarial inputs, time (if `measure`),
        and return the Profile. Never raises for a bad kernel: failures are statuses."""
        seeds = self._seeds(tuple(int(s) for s in seeds))
        if not seeds:
            raise ValueError("at least one correctness seed is required")
        # the host's memory for what this profile declares it holds at most (host_memory.py)
        with host_memory.reserve(self.memory_bytes(problem)) as held:
            t0 = time.perf_counter()
            prof = self._profile(problem, solution, seeds, timeout_s or self.timeout_s, measure)
            prof.wall_s = time.perf_counter() - t0
        if held.bytes:
            prof.counters["memory_declared_bytes"] = float(held.bytes)
            prof.counters["memory_wait_s"] = round(held.waited_s, 3)
        return prof

    def memory_bytes(self, problem: Problem) -> int | None:
        """The most memory one profile of `problem` holds at once, declared before it runs:
        what the profile reserves of the host's budget (`host_memory.py`). None: undeclared
        (nothing reserved), the default: a family declares it where its profiles are big."""
        return None

    def _profile(
        self, problem: Problem, solution: Solution, seeds: tuple[int, ...], timeout_s: float, measure: bool
    ) -> Profile:
        """One profile through the stages (`pipeline/stages.py`) with this family's hooks. A
        family overrides this only to repeat a whole profile (a `timing_mismatch` confirmed by
        a second one), each through `run_stages`."""
        return self._run_stages(self.stages(problem, solution, seeds, timeout_s, measure), solution)

    def _run_stages(self, hooks: Stages, solution: Solution) -> Profile:
        """`hooks` through the stages, the checks every family shares first."""
        return run_stages(hooks, pre=lambda: self._source_size(solution))

    def stages(
        self, problem: Problem, solution: Solution, seeds: tuple[int, ...], timeout_s: float, measure: bool
    ) -> Stages:
        """This family's hooks for one profile (a `Stages` with a method per stage it has)."""
        raise NotImplementedError(f"{type(self).__name__} implements neither stages nor _profile")

    def _source_size(self, solution: Solution) -> Profile | None:
        """The static check every family shares: a kernel's sources over `MAX_SOURCE_BYTES` are a
        compile error, before anything hashes, stages or compiles them."""
        size = sum(len(src.content) for src in solution.sources)  # characters <= bytes: no copy of a huge one
        if size <= MAX_SOURCE_BYTES:
            size = sum(len(src.content.encode()) for src in solution.sources)
        if size <= MAX_SOURCE_BYTES:
            return None
        return self._fail(
            "compile_error",
            f"the solution's sources are {size / 2**20:.1f} MiB; the limit is {MAX_SOURCE_BYTES >> 20} MiB",
        )

    def _seeds(self, seeds: tuple[int, ...]) -> tuple[int, ...]:
        """The correctness seeds this device checks, given the ones asked for (a device with a
        minimum count extends them)."""
        return seeds

    def _fail(self, status: str, log: str, extra_tools: dict[str, str] | None = None, **kw: Any) -> Profile:
        """A profile that did not pass (`extra_tools`: versions learnt on the way, e.g. from the
        device's harness)."""
        return Profile(
            status=status,  # type: ignore[arg-type]
            device=self.kind,
            log=log,
            toolchain={**self.toolchain(), **(extra_tools or {})},
            **kw,
        )

    def toolchain(self) -> dict[str, str]:
        """Versions of the tools that produced a profile (compiler, runtime, libraries)."""
        return {}

    def close(self) -> None:  # noqa: B027 (optional hook, default: nothing to release)
        """Release cached resources (temporary data, worker processes)."""
