"""The stages of every profile, in their one order, and the runner that goes through them.

    static_checks -> build -> stage_inputs -> correctness -> timing_rounds -> clock_bound
        -> roofline_gate -> verdict

A device family plugs in one `Stages` object per profile (its agent's `stages(...)`): a
method per stage it has. `run_stages` calls them in `STAGES` order, each timed on our clock:

- a hook returns None: the stage passed, the next one runs;
- a hook returns a `Profile`: the profile ends with it (its status says why; later stages do
  not run). `verdict` always returns the profile;
- a hook returns `SKIPPED` (this profile does not have the stage: not timed, `measure=False`,
  or no device here), or the family does not override it: the stage is recorded as skipped;
- the profile's cancel scope cancelled (`sandbox/cancel.py`: whoever asked gave up on it):
  `WorkCancelled` is raised before the next stage (its children are already killed);
- `finish(profile)` runs last, whatever happened (a failure or an exception included): it
  releases what the run holds (children, sandboxes, locks) and may amend the profile with
  what only a child's end shows (a child that ran while held stopped voids any verdict).

The record, in the profile's counters (the same names for every family):

    stage_<k>_<name>_s         the stage ran: its wall time on our clock (k = 1..8, its place)
    stage_<k>_<name>_skipped   1.0: the family has no such stage, or this profile skips it

A stage after the one that ended the profile is absent: `stages_of(counters)` lists the
stages a profile went through, in order. The `phase_<name>_s` counters (`phases.py`) say where
the time goes inside a stage, in each family's own words.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Final, Generic, TypeVar

import msgspec

from accelopt.problem import Problem, Solution
from accelopt.profile import Profile
from hardware_agents.sandbox import raise_if_cancelled

AgentT = TypeVar("AgentT")  # the family's agent, as its stages see it (a Protocol of what they use)

STAGES: Final[tuple[str, ...]] = (
    "static_checks",  # the sources: language, entry point, forbidden types, size
    "build",  # compile / trace / import checks: a compile_error ends here
    "stage_inputs",  # the cases' inputs and the agent's own references
    "correctness",  # the kernel on every case, judged against the references
    "timing_rounds",  # the latency: timed rounds the agent drives and clocks (or an estimate)
    "clock_bound",  # the kernel's own clock readings bounded by ours
    "roofline_gate",  # the place on the roofline; faster than it allows: incorrect
    "verdict",  # the profile
)
PREFIX = "stage_"
_KEY = re.compile(r"^stage_(\d+)_([a-z_]+?)_(s|skipped)$")


class _Skipped:
    def __repr__(self) -> str:
        return "SKIPPED"


SKIPPED: Final = _Skipped()  # a hook's answer: this stage does not apply to this profile

Outcome = Profile | None | _Skipped


class Stages(Generic[AgentT]):
    """A family's hooks for one profile. A method it does not override is a stage it does not
    have (recorded as skipped); `verdict` it must have. `setup` makes the family's own state."""

    def __init__(
        self,
        agent: AgentT,
        problem: Problem,
        solution: Solution,
        seeds: tuple[int, ...],
        timeout_s: float,
        measure: bool,
    ) -> None:
        self.agent, self.problem, self.solution, self.seeds = agent, problem, solution, seeds
        self.timeout_s, self.measure = timeout_s, measure
        self.setup()

    def setup(self) -> None:
        """The family's per-profile state (its verdict, clocks, what the run will hold)."""

    def static_checks(self) -> Outcome:
        return SKIPPED

    def build(self) -> Outcome:
        return SKIPPED

    def stage_inputs(self) -> Outcome:
        return SKIPPED

    def correctness(self) -> Outcome:
        return SKIPPED

    def timing_rounds(self) -> Outcome:
        return SKIPPED

    def clock_bound(self) -> Outcome:
        return SKIPPED

    def roofline_gate(self) -> Outcome:
        return SKIPPED

    def verdict(self) -> Profile:
        raise NotImplementedError(f"{type(self).__name__} has no verdict stage")

    def finish(self, prof: Profile) -> Profile:
        """Release what the run holds; the profile, amended where the end shows more."""
        self.release()
        return prof

    def release(self) -> None:
        """Release what the run holds, after an exception (no profile to amend)."""


class StageRecord(msgspec.Struct, frozen=True):
    name: str
    ran: bool  # False: skipped
    seconds: float


def stage_key(name: str, skipped: bool = False) -> str:
    return f"{PREFIX}{STAGES.index(name) + 1}_{name}_{'skipped' if skipped else 's'}"


def stages_of(counters: dict[str, float]) -> list[StageRecord]:
    """The stages a profile went through (ran or skipped), in order, from its counters."""
    found = []
    for key, value in counters.items():
        m = _KEY.match(key)
        if m and m.group(2) in STAGES:
            ran = m.group(3) == "s"
            found.append((int(m.group(1)), StageRecord(m.group(2), ran, value if ran else 0.0)))
    return [rec for _, rec in sorted(found, key=lambda kv: kv[0])]


def run_stages(hooks: Stages, *, pre: Callable[[], Profile | None] | None = None) -> Profile:
    """Go through `STAGES` with `hooks` (see the module doc); `pre` is the checks every family
    shares, run first inside `static_checks`."""
    record: dict[str, float] = {}
    prof: Profile | None = None
    try:
        for name in STAGES:
            raise_if_cancelled()  # whoever asked gave up on it (`sandbox/cancel.py`): no next stage
            hook = getattr(hooks, name)
            if getattr(type(hooks), name) is getattr(Stages, name):  # the family has no such stage
                record[stage_key(name, skipped=True)] = 1.0
                continue
            t0 = time.perf_counter()
            try:
                got: Outcome = (pre() if pre is not None and name == "static_checks" else None) or hook()
            finally:
                seconds = time.perf_counter() - t0
            if isinstance(got, _Skipped):
                record[stage_key(name, skipped=True)] = 1.0
                continue
            record[stage_key(name)] = seconds
            if got is not None:
                prof = got
                break
            if name == "verdict":
                raise TypeError(f"{type(hooks).__name__}.verdict returned no profile")
        assert prof is not None
    finally:
        if prof is not None:
            prof = hooks.finish(prof)
        else:  # an exception: release what the run holds, the exception goes on
            hooks.release()
    prof.counters.update(record)
    return prof


__all__ = [
    "PREFIX",
    "SKIPPED",
    "STAGES",
    "Outcome",
    "StageRecord",
    "Stages",
    "run_stages",
    "stage_key",
    "stages_of",
]
