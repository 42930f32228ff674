"""The rounds of a driven child: the agent's own clock around everything it runs.

A timing child (`Sandbox.spawn`) stops itself whenever it waits for the agent, and the
agent continues it (`hardware_agents/sandbox/freeze.py` proves it stayed stopped in between). A
round is two steps: set-up (the child takes the round's inputs, which the agent handed over
while it was stopped, and stops, ready) and the timed calls (to its next stop). Every step
is clocked by the agent, from the continue to the stop report:

    clock = RoundClock()
    verdict = drive_rounds(child, clock, rounds=3, hand_over=stage_inputs, after_round=judge_round,
                           calibration=2, untimed_step=True)
    out = child.finish()          # a child that ran while held stopped: out.freeze_breach

- `calibration` rounds come first: the same loop with a null entry point, before the kernel
  is loaded (`RoundClock.cal_walls`: the untimed work per call on this host, see clock.py;
  `hand_over_calibration(k)` gives calibration round k its inputs where it needs any);
- `untimed_step`: one command between calibration and the rounds (loading the kernel,
  the correctness cases), not clocked;
- `hand_over(k)`: while the child waits for round k, give it round k's inputs (fresh ones,
  drawn or handed over only now);
- `after_round(k)`: while the child is stopped after round k, judge it or hand over what
  the next needs; a failed Profile ends the rounds with that verdict, `STOP` ends them as
  planned, None goes on;
- `at_end()`: before the child is continued for its report and exit (e.g. tell it so).

After the last round the child is continued once more to report and exit; a child that
stops again instead is not the agent's harness talking, and is killed. A child that exits,
dies or is killed for running while stopped ends the rounds: its outcome (`finish()`) says
why, and the caller judges it (`Verdict.ended`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from accelopt.profile import Profile
from hardware_agents.sandbox import RanWhileStopped, SandboxChild

STOP: Final = "stop"  # after_round's answer: no more rounds


class RoundClock:
    """Our wall times of a timed child's rounds: `walls[k]` from continuing it to time round k
    to its next stop; `setups[k]` from handing it round k's inputs to its ready stop; the
    same for the calibration rounds (`cal_walls`, `cal_setups`)."""

    def __init__(self) -> None:
        self.walls: list[float] = []
        self.setups: list[float] = []
        self.cal_walls: list[float] = []
        self.cal_setups: list[float] = []
        self.ready_s = 0.0  # from `drive_rounds` (just after the spawn) to the child's first stop
        self.start_s = 0.0  # before that: starting the child, or waiting for a spare to be ready
        self.untimed_s = 0.0  # the untimed step (loading the kernel, the correctness cases)
        self.exit_s = 0.0  # from the last continue to the child's exit

    def phases(self) -> dict[str, float]:
        """Our own clock of each phase of the child's life, for a profile's counters."""
        return {
            "phase_child_start_s": self.start_s + self.ready_s,
            "phase_calibration_s": sum(self.cal_walls) + sum(self.cal_setups),
            "phase_load_and_check_s": self.untimed_s,
            "phase_timing_rounds_s": sum(self.walls) + sum(self.setups),
            "phase_child_exit_s": self.exit_s,
        }

    def untimed_per_call(self, calls: int) -> float | None:
        """The calibrated untimed work per call: the fastest calibration round's wall time per
        call (noise only ever adds time), or None when no calibration round was clocked."""
        return min(self.cal_walls) / calls if self.cal_walls and calls else None


def timed_step(child: SandboxChild) -> float | None:
    """Continue the child and clock it to its next stop: our seconds from the continue to the
    stop report (the freeze checks on both sides stay outside the interval), or None when it
    exited or died instead. Raises `RanWhileStopped` (the child killed) if it ran while held."""
    t0 = child.resume()
    if not child.wait_stopped():
        return None
    return child.stopped_at - t0


def _step(child: SandboxChild, times: list[float]) -> bool:
    dt = timed_step(child)
    if dt is None:
        return False
    times.append(dt)
    return True


def _round(child: SandboxChild, setups: list[float], walls: list[float]) -> bool:
    return _step(child, setups) and _step(child, walls)  # set up (ready to be timed), then the timed calls


def drive_rounds(
    child: SandboxChild,
    clock: RoundClock,
    *,
    rounds: int,
    hand_over: Callable[[int], object],
    after_round: Callable[[int], Profile | str | None] | None = None,
    calibration: int = 0,
    untimed_step: bool = False,
) -> Profile | None:
    """Drive a child that has just been spawned through its calibration and timing rounds,
    filling `clock` (see the module doc). Returns the verdict an `after_round` gave, or None
    (the rounds ended, or the child left the protocol: the caller judges its outcome)."""
    if not drive_to_rounds(child, clock, calibration=calibration, untimed_step=untimed_step):
        return None
    return drive_timing(child, clock, rounds=rounds, hand_over=hand_over, after_round=after_round)


def drive_to_rounds(
    child: SandboxChild,
    clock: RoundClock,
    *,
    calibration: int = 0,
    untimed_step: bool = False,
    hand_over_calibration: Callable[[int], object] | None = None,
) -> bool:
    """The first half of `drive_rounds`: the child's first stop, its calibration rounds and the
    untimed step. True: it is stopped, waiting for round 0's inputs (what it did so far may be
    read now: it stays stopped); False: it exited, died or ran while stopped (its outcome says)."""
    try:
        t0 = time.perf_counter()
        if not child.wait_stopped():  # exited or died before its first round
            return False
        clock.ready_s = child.stopped_at - t0
        for k in range(calibration):
            if hand_over_calibration is not None:
                hand_over_calibration(k)
            if not _round(child, clock.cal_setups, clock.cal_walls):
                return False
        if untimed_step:
            t0 = child.resume()
            stopped = child.wait_stopped()
            clock.untimed_s = (child.stopped_at if stopped else time.perf_counter()) - t0
            if not stopped:  # exited (a failed check: no timing) or died
                return False
        return True
    except RanWhileStopped:  # killed already; `finish()` carries the breach to the verdict
        return False


def drive_timing(
    child: SandboxChild,
    clock: RoundClock,
    *,
    rounds: int,
    hand_over: Callable[[int], object],
    after_round: Callable[[int], Profile | str | None] | None = None,
    at_end: Callable[[], object] | None = None,
) -> Profile | None:
    """The second half of `drive_rounds`: from a child stopped before round 0, the timing rounds
    (at most `rounds`) and the child's report and exit."""
    try:
        for k in range(rounds):  # the child is stopped, waiting for round k's inputs
            hand_over(k)
            if not _round(child, clock.setups, clock.walls):
                return None
            verdict = after_round(k) if after_round is not None else None
            if verdict == STOP:
                break
            if isinstance(verdict, Profile):
                return verdict
        if at_end is not None:
            at_end()
        t0 = child.resume()  # no inputs for another round: the child reports and exits
        if child.wait_stopped():  # one stop more than the protocol has: not our harness talking
            child.kill()
        clock.exit_s = time.perf_counter() - t0
        return None
    except RanWhileStopped:  # killed already; `finish()` carries the breach to the verdict
        return None


__all__ = ["STOP", "RoundClock", "drive_rounds", "drive_timing", "drive_to_rounds", "timed_step"]
