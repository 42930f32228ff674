"""The interleaved re-measure: one protocol for every figure that compares kernels again.

A run's end-of-problem re-measure (the coordinator's `ProblemRemeasured`), `accelopt
remeasure` and the benchmarks' re-measured speedups all run it:

- sides: side 0 is the baseline, the others the kernels compared with it;
- round r profiles every side once, in side order on even rounds and reversed on odd ones,
  all on the round's seed offset (`round_seeds`), so every side sees the same machine
  conditions and the same fresh inputs;
- a profile without a time (a failure, or unmeasured) is its side's result: that side is
  not profiled again. The rounds end early once the comparison is lost (the baseline, or
  every other side, has no time) unless `every_side` asks for each side's own status;
- a side's figure (`side_result`) is the median of its rounds with the larger of their
  spread and its profiles' own; a speedup is the ratio of two sides' medians (`speedup`),
  and it agrees with a recorded one within both pairs' noise (`compare`).

Use: `Remeasure(sides, rounds, seed_base)`, then `next_slot()` (what to profile, on which
seed offset; None when done) and `record(slot, profile)` for each; `drive` does the loop
with a profiling callable; `results(kernel_ids)` gives each side's `RemeasuredSide`.
Pure: no clock, no I/O; the caller profiles (the coordinator through requests on the log,
the command line and the benchmarks in-process).
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import msgspec

from accelopt.beam_policy import noise_margin, relative_spread
from accelopt.catalog import RemeasuredSide
from accelopt.profile import Profile, peak_fraction

# seed offsets of consecutive rounds lie this far apart (the profiler checks a kernel on a
# handful of seeds from its offset, `actors.roles.profiler.offset_seeds`)
SEED_STRIDE = 10_000
# a run's own re-measure draws its offsets from here: no search profile uses one (candidates
# use offsets below 100,000)
RUN_SEED_BASE = 700_000


def round_seeds(base: int, rounds: int) -> list[int]:
    """The seed offset of each round: fresh for each round, the same for every side of it."""
    return [base + SEED_STRIDE * r for r in range(rounds)]


def run_seed_base(run_id: str, problem: str) -> int:
    """The first round's seed offset of a run's own re-measure of `problem`."""
    h = int(hashlib.sha256(f"remeasure\x1f{run_id}\x1f{problem}".encode()).hexdigest()[:6], 16)
    return RUN_SEED_BASE + h % SEED_STRIDE


def has_time(profile: Profile) -> bool:
    """A profile that gives its side a round: it passed (or is unmeasured) with a latency."""
    return profile.status in ("passed", "unmeasured") and profile.latency_ms is not None


@dataclass(frozen=True)
class Slot:
    """One profile of the protocol: the `step`-th of its plan (a stable key for a request)."""

    step: int
    round: int
    side: int
    seed_offset: int


@dataclass
class Remeasure:
    """The protocol's state for `sides` sides (side 0 the baseline) over `rounds` rounds."""

    sides: int
    rounds: int
    seed_base: int
    every_side: bool = False
    step: int = 0  # the next step of the plan
    profiles: list[list[Profile]] = field(default_factory=list)
    done: set[int] = field(default_factory=set)  # sides whose last profile had no time

    def __post_init__(self) -> None:
        if not self.profiles:
            self.profiles = [[] for _ in range(self.sides)]

    @property
    def seed_offsets(self) -> list[int]:
        return round_seeds(self.seed_base, self.rounds)

    @property
    def lost(self) -> bool:
        """Nothing left to compare: the baseline, or every other side, has no time."""
        return 0 in self.done or all(s in self.done for s in range(1, self.sides))

    def slot(self, step: int) -> Slot:
        r, i = divmod(step, self.sides)
        side = i if r % 2 == 0 else self.sides - 1 - i
        return Slot(step, r, side, self.seed_offsets[r])

    def next_slot(self) -> Slot | None:
        """The next profile to take (and the plan moves past it), or None when it is over."""
        while self.step < self.sides * self.rounds:
            if self.lost and not self.every_side:
                return None
            s = self.slot(self.step)
            self.step += 1
            if s.side not in self.done:
                return s
        return None

    def record(self, slot: Slot, profile: Profile) -> None:
        """The profile `slot` got; one without a time ends its side."""
        self.profiles[slot.side].append(profile)
        if not has_time(profile):
            self.done.add(slot.side)

    def results(self, kernel_ids: Sequence[str]) -> list[RemeasuredSide]:
        return [side_result(k, ps) for k, ps in zip(kernel_ids, self.profiles, strict=True)]


def drive(protocol: Remeasure, profile: Callable[[Slot], Profile]) -> Remeasure:
    """Run the protocol to its end with `profile(slot)` taking each profile in turn."""
    while (s := protocol.next_slot()) is not None:
        protocol.record(s, profile(s))
    return protocol


def side_result(kernel_id: str, profiles: Sequence[Profile]) -> RemeasuredSide:
    """A side's rounds as one figure: the median of its timed rounds, its spread (the larger
    of the rounds' and its profiles' median one), the status of its first profile without a
    time (else passed) and that profile's first log line."""
    failed = next((x for x in profiles if x.status != "passed" or x.latency_ms is None), None)
    rounds = [x.latency_ms for x in profiles if x.status == "passed" and x.latency_ms is not None]
    median = statistics.median(rounds) if rounds else None
    spreads = [x.latency.spread for x in profiles if x.latency is not None]
    spread = max(relative_spread(rounds), statistics.median(spreads) if spreads else 0.0)
    t_peak = next((x.t_peak_ms for x in profiles if x.t_peak_ms), None)
    return RemeasuredSide(
        kernel_id=kernel_id,
        status=failed.status if failed is not None else "passed",
        rounds_ms=rounds,
        median_ms=median,
        spread=spread,
        peak_fraction=peak_fraction(t_peak, median) if failed is None else None,
        log_head=first_line(failed.log) if failed is not None else "",
    )


def first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def speedup(baseline: RemeasuredSide, kernel: RemeasuredSide) -> float | None:
    """baseline / kernel of the medians, where both sides passed with a time."""
    if baseline.status == kernel.status == "passed" and baseline.median_ms and kernel.median_ms:
        return baseline.median_ms / kernel.median_ms
    return None


class Comparison(msgspec.Struct, frozen=True):
    """A re-measured speedup beside the one the search recorded for the same two kernels."""

    recorded_speedup: float | None
    speedup: float | None
    noise: float  # relative band within which the two cannot be told apart
    agrees: bool  # the recorded speedup is within that band of the re-measured one


def compare(
    baseline: RemeasuredSide,
    kernel: RemeasuredSide,
    recorded_ms: tuple[float | None, float | None],
    recorded_spreads: tuple[float, float],
) -> Comparison:
    """The re-measure of two sides against what the search recorded of them (latency and
    spread of each): both the re-measure's and the recorded profiles' noise bound what can
    be told apart."""
    base_ms, kernel_ms = recorded_ms
    recorded = base_ms / kernel_ms if base_ms and kernel_ms else None
    s = speedup(baseline, kernel)
    noise = noise_margin(baseline.spread, kernel.spread) * noise_margin(*recorded_spreads) - 1.0
    agrees = recorded is None or s is None or max(recorded / s, s / recorded) <= 1.0 + noise
    return Comparison(recorded, s, noise, agrees)
