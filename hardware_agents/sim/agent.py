"""The simulated hardware agent (see `hardware_agents/sim/__init__.py`)."""

from __future__ import annotations

import hashlib
import math
import threading
from typing import Any, ClassVar

import msgspec

from accelopt.problem import ExpressionError, Problem, Solution
from accelopt.profile import LatencyStats, Profile, SeedCheck
from hardware_agents.base import HardwareAgent
from hardware_agents.pipeline.device_spec import DeviceSpec
from hardware_agents.pipeline.roofline import Placement, place
from hardware_agents.pipeline.stages import SKIPPED, Outcome, Stages
from hardware_agents.pipeline.stats import latency_stats
from hardware_agents.pipeline.verdict import Verdict
from hardware_agents.sim.gate import ALLOW_ENV, KIND, sim_allowed

# Peaks high enough that drawn latencies of a millisecond or so stay well under the roof.
SPEC = DeviceSpec(
    kind=KIND,
    name="simulated device",
    peak_bw_bytes_s=1e12,
    peak_matmul_flops=1e15,
    peak_vector_flops=1e13,
    source="simulated: no device, latencies are drawn",
    measured=False,
)
SAMPLES = 5


class SimNotAllowed(ValueError):
    """The simulated device was asked for without the opt-in."""


def _unit(*parts: object) -> float:
    """A uniform draw in (0, 1) that is a pure function of `parts`."""
    h = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return (int.from_bytes(h[:8], "big") + 0.5) / 2.0**64


def _normal(*parts: object) -> float:
    """A standard normal draw (Box-Muller) that is a pure function of `parts`."""
    u1, u2 = _unit(*parts, "a"), _unit(*parts, "b")
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


class SimAgent(HardwareAgent):
    """Options: `latency_ms` (median kernel latency), `spread` (sigma of its log),
    `pass_rate` (share of kernels that pass; the problem's baseline always passes unless
    `baseline_passes=False`), `profile_s` (how long a profile occupies the device, plus up to
    `profile_jitter` of it, drawn), `seed`, `allow` (the opt-in, see `gate.py`)."""

    kind: ClassVar[str] = KIND
    languages: ClassVar[tuple[str, ...]] = ("c", "triton", "python", "nki", "cpp", "cuda", "tilelang")
    concurrent_profiles: ClassVar[bool] = True  # no device to hold: a profiler host may run many at once

    def __init__(
        self,
        *,
        latency_ms: float = 1.0,
        spread: float = 0.25,
        pass_rate: float = 0.9,
        profile_s: float = 0.5,
        profile_jitter: float = 0.0,
        seed: int = 0,
        baseline_passes: bool = True,
        allow: bool = False,
        timeout_s: float = 60.0,
        cache_dir: Any = None,
    ) -> None:
        del cache_dir  # `accelopt profile --cache-dir` passes it; nothing is cached
        if not sim_allowed({"allow": allow}):
            raise SimNotAllowed(
                f"the {KIND!r} device is simulated (made-up latencies); set {ALLOW_ENV}=1 or "
                f"pass allow=True (devices.{KIND}.options.allow=true) to use it on purpose"
            )
        if latency_ms <= 0 or spread < 0 or profile_s < 0 or profile_jitter < 0:
            raise ValueError("sim agent: latency_ms must be > 0; spread, profile_s and profile_jitter >= 0")
        if not 0.0 <= pass_rate <= 1.0:
            raise ValueError(f"sim agent: pass_rate must be between 0 and 1 (got {pass_rate})")
        self.latency_ms, self.spread, self.pass_rate = float(latency_ms), float(spread), float(pass_rate)
        self.profile_s, self.profile_jitter = float(profile_s), float(profile_jitter)
        self.seed, self.baseline_passes, self.timeout_s = int(seed), bool(baseline_passes), float(timeout_s)
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self.in_flight = 0  # profiles sleeping right now, and the most at once (for tests and benchmarks)
        self.max_in_flight = 0

    @property
    def spec(self) -> DeviceSpec:
        return SPEC

    def toolchain(self) -> dict[str, str]:
        return {"simulated": "1", "seed": str(self.seed)}

    def close(self) -> None:
        self._closed.set()  # wakes every profile in progress

    def draw(self, problem: Problem, source: str) -> tuple[bool, float, float]:
        """(passes, median latency in ms, profile duration in s) for a kernel: deterministic."""
        key = (self.seed, problem.name, hashlib.sha256(source.encode()).hexdigest())
        is_baseline = bool(problem.baseline.sources) and source == problem.baseline.sources[0].content
        passes = (is_baseline and self.baseline_passes) or _unit(*key, "pass") < self.pass_rate
        median_ms = self.latency_ms * math.exp(self.spread * _normal(*key, "latency"))
        duration = self.profile_s * (1.0 + self.profile_jitter * _unit(*key, "duration"))
        return passes, median_ms, duration

    def wait(self, seconds: float) -> bool:
        """Sleep `seconds` without CPU; True when `close()` cut it short."""
        return self._closed.wait(seconds)

    def occupy(self, seconds: float) -> bool:
        """The simulated device busy for `seconds`, counted in `in_flight` meanwhile; True when
        `close()` cut it short."""
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return self.wait(seconds)
        finally:
            with self._lock:
                self.in_flight -= 1

    def stages(
        self, problem: Problem, solution: Solution, seeds: tuple[int, ...], timeout_s: float, measure: bool
    ) -> Stages:
        return SimStages(self, problem, solution, seeds, timeout_s, measure)


class SimStages(Stages[SimAgent]):
    """The simulated profile's stages: static checks (the language), correctness (the drawn
    verdict, after the drawn duration), timing rounds (drawn latencies), the roofline gate
    (never faster than the simulated roof allows) and the verdict. It builds nothing, stages
    nothing and reads no kernel clock: those stages are skipped."""

    def setup(self) -> None:
        self.v = Verdict(self.agent.fail)
        self.median_ms = 0.0
        self.stats: LatencyStats | None = None
        self.where: Placement | None = None

    def static_checks(self) -> Profile | None:
        agent, solution = self.agent, self.solution
        if solution.spec.language not in agent.languages or not solution.sources:
            return agent.fail(
                "compile_error",
                f"the {KIND} agent takes one of {', '.join(agent.languages)} "
                f"with a source file, not {solution.spec.language!r}",
            )
        return None

    def correctness(self) -> Profile | None:
        agent, v, source = self.agent, self.v, self.solution.sources[0].content
        passes, self.median_ms, duration = agent.draw(self.problem, source)
        if duration > self.timeout_s:
            agent.wait(self.timeout_s)
            return agent.fail(
                "timeout", f"simulated profile takes {duration:.3g} s, over the {self.timeout_s:g} s limit"
            )
        if agent.occupy(duration):  # sleeps without CPU; close() cuts it short
            raise RuntimeError("sim agent closed during a profile")
        cases = [f"seed{s}" for s in self.seeds] + ["large"]
        if not passes:
            bad = cases[int(_unit(agent.seed, source, "case") * len(cases))]
            v.checks.extend(
                SeedCheck(
                    case=c,
                    passed=c != bad,
                    rel_l2=0.5 if c == bad else 0.0,
                    note="simulated wrong values" if c == bad else "",
                )
                for c in cases
            )
            return v.profile("incorrect", f"{bad}: simulated wrong values (rel_l2 0.5)")
        v.checks.extend(SeedCheck(case=c, passed=True, rel_l2=0.0, max_abs_err=0.0) for c in cases)
        return None

    def timing_rounds(self) -> Outcome:
        if not self.measure:
            return SKIPPED
        try:
            where = place(self.problem, SPEC, 0.0)
        except ExpressionError:
            where = Placement(t_peak_s=0.0, bound="memory", t_measured_s=0.0)
        # never faster than the simulated roof allows
        median_ms = max(self.median_ms, where.t_peak_s * 1e3 / 0.9)
        jitter = [1.0 + 0.02 * (_unit(median_ms, i, self.seeds) - 0.5) for i in range(SAMPLES)]
        self.stats = latency_stats([median_ms * j for j in jitter])
        self.v.counters["simulated"] = 1.0
        self.where = where
        return None

    def roofline_gate(self) -> Outcome:
        if not self.measure:
            return SKIPPED
        assert self.where is not None and self.stats is not None
        self.where = msgspec.structs.replace(self.where, t_measured_s=self.stats.median_ms / 1e3)
        return None

    def verdict(self) -> Profile:
        if self.stats is None or self.where is None:
            return self.v.profile("unmeasured", "correct; not timed")
        return self.v.profile("passed", "", latency=self.stats, **self.where.fields())
