"""The kernel's clock, bounded by ours.

Whatever times a kernel's calls (CUDA events, the host clock, a profiler's trace files) is
written in the kernel's own process, so the agent checks each round's reading T against
its own wall time W of that round (`RoundClock.walls`, from continuing the child to its
next stop). The calls run inside W, so T <= W: a reading above W (x (1 + `over`), plus
`over_s` for the two clocks' granularity) was not taken on these calls. Where the untimed
work around the calls is known (`lower`), the calls also cannot have taken much less than
W: per round, calibration rounds the child ran through the same loop with a null entry
point, before the kernel was loaded, measured u per call on this host (the fastest
calibration round's wall time per call), and an honest round has

    W - A <= T <= W,    A = n u (1 + margin) + share x max(0, T - n x share_above_s) + n x per_call_s + per_round_s

(share: what grows with the calls' own time, counted on the part of each call above
`share_above_s`). T < W - A is a clock slowed or replaced. A clock slowed by s reports
T = K / s for calls that took K: it is caught once K - K / s exceeds what A allows beyond
n u (`ClockBound.catches`), i.e. for s = 2 once the kernel's time is about a quarter of the
untimed work or more. The same bound holds over the whole timing
phase, set-ups included (`per_setup_s` each), so a child that stops itself out of turn (so
that its calls fall in what we take for a set-up) is bounded too.

    TRITON_BOUND = ClockBound(over=0.02, share=0.05)          # CUDA events against the calibrated loop
    NEURON_BOUND = ClockBound(over=0.01, lower=False, ...)    # device times: no lower bound
    why = clock_mismatch(bound, reported_s, clock.walls, calls=n, untimed_per_call=u, ...)
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from accelopt.profile import Profile

# The kernel's clock must cover our wall time of a round less the calibrated untimed work, with
# this much room: a relative margin on the calibrated figure, plus a little per call and per
# round (scheduling jitter of the stop/continue handshake).
CLOCK_MARGIN = 0.10
CLOCK_SLACK_PER_CALL_S = 5e-6
CLOCK_SLACK_PER_ROUND_S = 1e-3


class ClockBound(msgspec.Struct, frozen=True, kw_only=True):
    """How a language's reading of a round is held to our clock (see the module doc)."""

    over: float  # the reading may exceed our wall time by this share (plus over_s)
    over_s: float = 1e-3
    lower: bool = True  # the lower bound applies (the untimed work is calibrated)
    margin: float = CLOCK_MARGIN
    share: float = 0.05  # of the reading: host noise that grows with the calls
    share_above_s: float = 0.0  # ... counted on each call's time above this
    per_call_s: float = CLOCK_SLACK_PER_CALL_S
    per_round_s: float = CLOCK_SLACK_PER_ROUND_S
    reading: str = "kernel time"  # what the reading is, for the messages
    forged: str = ""  # what a reading above our clock means, for the messages

    def allowance(self, calls: int, untimed_per_call: float, reported_s: float) -> float:
        """A: the most of a round's wall time that may lie outside its calls."""
        return (
            calls * untimed_per_call * (1 + self.margin)
            + calls * self.per_call_s
            + self.per_round_s
            + self.share * max(0.0, reported_s - calls * self.share_above_s)
        )

    def catches(self, slowed_by: float, kernel_s: float, untimed_s: float, calls: int) -> bool:
        """Whether a round of `calls` calls of `kernel_s` each, with `untimed_s` of untimed
        work a call as calibrated, is refused when its clock runs `slowed_by` times slow."""
        reported = calls * kernel_s / slowed_by
        wall = calls * (kernel_s + untimed_s)
        return reported < wall - self.allowance(calls, untimed_s, reported)


def clock_mismatch(
    bound: ClockBound,
    reported_s: Sequence[float],
    walls: Sequence[float],
    *,
    calls: int,
    untimed_per_call: float | None = None,
    setups: Sequence[float] = (),
    per_setup_s: float = 0.0,
    first_round: int = 0,
    counters: dict[str, float] | None = None,
) -> str | None:
    """Why the readings of rounds `first_round`, ... (`reported_s[i]` seconds for `calls`
    calls; our wall times `walls[i]`) cannot be the calls' own time, or None. With a lower
    bound, `setups` (our times of the rounds' set-ups, `per_setup_s` allowed each) bound the
    whole timing phase too, and `counters` receives the sums (timing_wall_s, ...)."""
    u = untimed_per_call
    if bound.lower and u is None:
        return "runtime_error: the child ran no calibration round (not our harness's protocol)"
    total_w = total_t = total_a = 0.0
    for i, (t, wall) in enumerate(zip(reported_s, walls, strict=True)):
        k = first_round + i
        total_w, total_t = total_w + wall, total_t + t
        if t > wall * (1 + bound.over) + bound.over_s:
            forged = f": {bound.forged}" if bound.forged else ""
            return (
                f"reported {bound.reading} ({t * 1e3:.4g} ms over {calls} calls) exceeds the wall time of timing "
                f"round {k} ({wall * 1e3:.4g} ms by our clock){forged}"
            )
        if u is None:
            continue
        allow = bound.allowance(calls, u, t)
        total_a += allow
        if t < wall - allow:
            return (
                f"timing_mismatch: in timing round {k} the kernel's process timed its {calls} calls at "
                f"{t * 1e3:.4g} ms in all, but they took {wall * 1e3:.4g} ms by our clock, of which at most "
                f"{allow * 1e3:.4g} ms is the untimed work between calls (calibrated on this host: "
                f"{u * 1e6:.4g} us a call): its clock was slowed or replaced"
            )
    if u is None:
        return None
    setup_allow = len(setups) * per_setup_s
    all_w = total_w + sum(setups)
    if total_t < all_w - total_a - setup_allow:
        return (
            f"timing_mismatch: the kernel's process ran {all_w * 1e3:.4g} ms in its timing phase by our "
            f"clock (at most {(total_a + setup_allow) * 1e3:.4g} ms of it outside the calls) but timed its "
            f"calls at {total_t * 1e3:.4g} ms: its clock was slowed or replaced"
        )
    if counters is not None:
        n = calls * len(walls)
        counters.update(
            {
                "timing_wall_s": total_w,
                "timing_kernel_clock_s": total_t,
                "timing_untimed_bound_s": total_a,
                "timing_setup_s": sum(setups),
                "timing_untimed_per_call_s": u,
                "timing_overhead_per_call_s": (total_w - total_t) / n if n else 0.0,
            }
        )
    return None


def confirmed(first: Profile, again: Profile) -> Profile:
    """A `timing_mismatch` stands only when a second profile, in a fresh child, finds one too:
    a busy host can stretch one profile's untimed work past its allowance, a forged clock is
    caught every time. `again` is that second profile, which is the verdict either way."""
    head = first.log.splitlines()[0] if first.log else ""
    if again.status == "timing_mismatch":
        again.counters["timing_mismatch_confirmed"] = 1.0
        again.log = f"{again.log}\n(confirmed by a second profile; the first said: {head})"
    else:
        again.counters["timing_mismatch_retried"] = 1.0
        again.log = f"{again.log}\nnote: a first profile was rejected ({head}); this one stands"
    return again


__all__ = [
    "CLOCK_MARGIN",
    "CLOCK_SLACK_PER_CALL_S",
    "CLOCK_SLACK_PER_ROUND_S",
    "ClockBound",
    "clock_mismatch",
    "confirmed",
]
