"""The hardware-agent interface (see hardware_agents/README.md).

A hardware agent turns (problem, solution) into a `Profile`: compile, check correctness on
fresh and adversarial inputs, time, and place the result on the device's roofline (its
`DeviceSpec`, `pipeline/device_spec.py`), through the stages of `pipeline/stages.py`.

Agents are made by their device family (`hardware_agents/family.py`), found in the
registry of families (`hardware_agents/families.py`: `get_agent`, `available_devices`).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from accelopt.problem import Problem, Solution
from accelopt.profile import Profile
from hardware_agents import host_memory
from hardware_agents.pipeline.device_spec import DeviceSpec
from hardware_agents.pipeline.stages import Stages, run_stages

__all__ = ["DEFAULT_SEEDS", "MAX_SOURCE_BYTES", "HardwareAgent"]

# Correctness seeds used when the caller names none (three fresh seeds).
DEFAULT_SEEDS: tuple[int, ...] = (0, 21, 42)
MAX_SOURCE_BYTES = 1 << 20  # a kernel's sources, all files together: a larger one is a compile error


class HardwareAgent(ABC):
    """Profiles kernels for one device kind. `profile` blocks and is safe to call from threads.

    An agent implements `stages(problem, solution, seeds, timeout_s, measure)`: its hooks for
    one profile, which `profile` runs in the one order of `pipeline/stages.py` (static checks,
    build, stage inputs, correctness, timing rounds, clock bound, roofline gate, verdict),
    recording each stage in the profile's counters. `profile` normalises the arguments and
    records the wall time, and `fail` makes a failed Profile with the device and toolchain
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
        return self.fail(
            "compile_error",
            f"the solution's sources are {size / 2**20:.1f} MiB; the limit is {MAX_SOURCE_BYTES >> 20} MiB",
        )

    def _seeds(self, seeds: tuple[int, ...]) -> tuple[int, ...]:
        """The correctness seeds this device checks, given the ones asked for (a device with a
        minimum count extends them)."""
        return seeds

    def fail(self, status: str, log: str, extra_tools: dict[str, str] | None = None, **kw: Any) -> Profile:
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
