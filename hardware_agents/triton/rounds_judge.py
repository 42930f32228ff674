"""The Triton judge's verdict on the timing rounds (`RoundsJudge`, one per harness child, made by
`TritonJudge`): each round as it ends (`round_rejected`: its protocol, set-up and calls against
our clock; its kept outputs read from the judge's region, `read_round`), then the rounds as the
harness reported them (`timing`: the protocol, inputs unchanged, every timed call's outputs at
secret positions and the secret calls in full), the kernel's clock bounded by ours over the
counted rounds (`clock_bound`, `timing_clock_mismatch`) and the latency with the roofline gate
(`gate`). The settings both judges read (`JudgeSettings`) are here, the lower of the two modules.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import msgspec
import numpy as np
import torch

from accelopt.problem import Problem
from accelopt.profile import Profile, SeedCheck
from hardware_agents.pipeline import compare
from hardware_agents.pipeline.cases import describe_axes
from hardware_agents.pipeline.clock import ClockBound, clock_mismatch
from hardware_agents.pipeline.device_spec import DeviceSpec
from hardware_agents.pipeline.roofline import achieved, speed_verdict
from hardware_agents.pipeline.rounds import RoundClock
from hardware_agents.pipeline.stats import latency_stats
from hardware_agents.pipeline.verdict import Verdict
from hardware_agents.sandbox import Sandbox
from hardware_agents.triton.case_check import check_case, load_outputs
from hardware_agents.triton.data import ProblemData, TimedRound, tolerance_for
from hardware_agents.triton.device_judge import InPlace, RoundRead
from hardware_agents.triton.figures import figures
from hardware_agents.triton.records import (
    HarnessResult,
    TimingRun,
    TimingSpec,
)
from hardware_agents.triton.specs import spec_for_dtypes

# How the kernel's clock is held to ours, per mode (`pipeline/clock.py`).
# - GPU: every call is synchronised (`timing.py`), so a round's wall time is its calls' device
#   time plus n x the calibrated untimed work of a call (the flush, the loop, the wake-up), which
#   does not depend on the kernel: a tight margin on it (5%), a little per call and per round
#   (the stop/continue handshake's jitter), and 8% of each call's time above 0.1 ms for what
#   grows with a long kernel. Measured on an H200: calls of 0.04-0.4 ms ran 1-17 us past the
#   calibrated untimed work (inside the fixed slack); a 3.8-4.4 ms gemm ran 145-222 us a call
#   past it (3.8-5.0% of its time: the untimed copies after a kernel that held the chip at its
#   power limit), which a 4% share of the whole time rejected, twice in a row. Counting the
#   share only above 0.1 ms keeps a 1.25x lie caught from about 80 us and a 2x lie from
#   about 32 us a call (untimed work 105 us, 60 calls a round: `ClockBound.catches`).
# - Interpreter: calls run Python, whose garbage collector may pause anywhere, and an interpreted
#   kernel's own launches do untimed Python work a null entry cannot show (3.1-3.9 ms a call
#   observed against 0.85 ms calibrated on rmsnorm_h4096, where 10% left ~5 ms of a 0.3 s round
#   and one profile in four needed its confirmation): 25% of the kernel's time.
CLOCK_BOUNDS = {
    "cuda": ClockBound(
        over=0.02, share=0.08, share_above_s=1e-4, margin=0.05, per_call_s=2e-6, per_round_s=5e-4
    ),
    "interpreter": ClockBound(over=0.02, share=0.25),
}
# A round's set-up (loading its file, stocking the buffer sets) may take this much more than the
# slowest calibration set-up, which loaded a file of the same size and stocked the same sets
# before the kernel existed: the kernel holds the round's inputs during the set-up, so whatever
# it computes there before the clock starts is bounded by this (checked with the round's calls,
# `round_rejected`).
SETUP_MARGIN = 0.5
SETUP_SLACK_S = 0.02
# The clock bound holds the sum of a round's calls (warm-ups included); the latency is the median
# of its reps. A kernel that does other calls' work in a few calls keeps the sum honest while
# the median drops: a round whose calls' mean exceeds the median of its reps by more than this
# share (plus UNEVEN_SLACK_S a call, a short kernel's jitter) is rejected (`uneven_round`). What
# it can still gain unseen is that share.
UNEVEN_SHARE = 0.25
UNEVEN_SLACK_S = 5e-6


class JudgeSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What the agent sets for judging its profiles."""

    mode: str  # "cuda" or "interpreter"
    spec: DeviceSpec
    max_pct_peak: float
    sample_positions: int
    clock_bound: ClockBound | None = None  # how the kernel's clock is held to ours (None: the mode's)
    mode_note: str = ""


def setup_allowance(clock: RoundClock, spec: TimingSpec) -> float:
    """The most a round's set-up may take (`SETUP_MARGIN`; with graphs, the capture budget of
    every call beyond the null graph's, `capture_budget_s`)."""
    capture = spec.calls * spec.capture_budget_s if spec.graphs else 0.0
    return (1 + SETUP_MARGIN) * max(clock.cal_setups, default=0.0) + SETUP_SLACK_S + capture


def reported_s(run: TimingRun) -> float:
    """The kernel's clock of a round: every call and graph replay, warm-ups included, in seconds."""
    return (
        sum(run.samples_ms) + sum(run.warmup_ms) + sum(run.graph_samples_ms) + sum(run.graph_warmup_ms)
    ) / 1e3


def calls_of(run: TimingRun) -> int:
    """The timed calls of a round: its calls and their graph replays."""
    return len(run.samples_ms) + len(run.warmup_ms) + len(run.graph_samples_ms) + len(run.graph_warmup_ms)


def untimed_per_call(clock: RoundClock, spec: TimingSpec) -> float | None:
    """u: the calibration rounds' untimed work a call (their calls and, with graphs, the null
    graph's replays: 2 x `calls` a round, whatever the child reported of them)."""
    return clock.untimed_per_call(spec.calls * (2 if spec.graphs else 1))


def uneven_round(k: int, run: TimingRun) -> str | None:
    """Why round k's calls (or their graph replays) cannot be one kernel's calls each doing its
    own work (`UNEVEN_SHARE`)."""
    return _uneven(k, run.warmup_ms, run.samples_ms) or _uneven(
        k, run.graph_warmup_ms, run.graph_samples_ms, " (graph replays)"
    )


def _uneven(k: int, warmup_ms: list[float], samples_ms: list[float], what: str = "") -> str | None:
    calls = [*warmup_ms, *samples_ms]
    if not samples_ms:
        return None
    median, mean = statistics.median(samples_ms), statistics.fmean(calls)
    if mean / 1e3 <= median / 1e3 * (1 + UNEVEN_SHARE) + UNEVEN_SLACK_S:
        return None
    slowest = max(calls)
    return (
        f"timing_mismatch: in timing round {k} the kernel's {len(calls)} calls{what} took {mean:.4g} ms each on "
        f"average but the median of its timed calls is {median:.4g} ms (the slowest took {slowest:.4g} ms): "
        "calls doing other calls' work make the median a figure the clock bound does not bound"
    )


def round_rejected(
    k: int, run: TimingRun, clock: RoundClock, spec: TimingSpec, *, mode: str, bound: ClockBound | None = None
) -> str | None:
    """Why timing round k cannot be counted, judged as soon as it is over (the child stopped):
    its clock against our wall time of its calls (`pipeline/clock.py`), its calls and set-up
    together against our wall time of both (`setup_allowance`: what it computed before the
    clock started), its calls' mean against their median (`uneven_round`)."""
    bound = bound or CLOCK_BOUNDS[mode]
    u, n = untimed_per_call(clock, spec), calls_of(run)
    t, wall, setup = reported_s(run), clock.walls[k], clock.setups[k]
    why = clock_mismatch(bound, [t], [wall], calls=n, untimed_per_call=u, first_round=k)
    if why is not None:
        return why
    if u is not None:
        allow, per_setup = bound.allowance(n, u, t), setup_allowance(clock, spec)
        if t < wall + setup - allow - per_setup:
            return (
                f"timing_mismatch: timing round {k}'s set-up took {setup * 1e3:.4g} ms by our clock (calibrated "
                f"with a round file of the same size: at most {per_setup * 1e3:.4g} ms) and its {n} "
                f"calls, timed at {t * 1e3:.4g} ms, took {wall * 1e3:.4g} ms: work done before the clock "
                "started was left out of the calls' time"
            )
    return uneven_round(k, run)


def timing_clock_mismatch(
    res: HarnessResult,
    clock: RoundClock,
    spec: TimingSpec,
    *,
    rounds: Sequence[int],
    mode: str,
    bound: ClockBound | None = None,
    counters: dict[str, float],
) -> str | None:
    """The kernel's timer (CUDA events, or the host clock in the interpreter) lives in the
    kernel's process: the n = warmup + reps calls of each counted round (`rounds`) summing
    to T by it are bounded by our wall time W of the round (`pipeline/clock.py`), the untimed
    work allowed being what the calibration rounds measured through the same loop with a
    null entry point, before the solution was imported; the whole timing phase too, each
    set-up allowed `setup_allowance`."""
    bound = bound or CLOCK_BOUNDS[mode]
    why = clock_mismatch(
        bound,
        [reported_s(res.timing[k]) for k in rounds],
        [clock.walls[k] for k in rounds],
        calls=max((calls_of(res.timing[k]) for k in rounds), default=spec.calls),
        untimed_per_call=untimed_per_call(clock, spec),
        setups=[clock.setups[k] for k in rounds],
        per_setup_s=setup_allowance(clock, spec),
        counters=counters,
    )
    if why is None:
        counters["calibration_wall_s"] = sum(clock.cal_walls) + sum(clock.cal_setups)
        counters["timing_setup_allowance_s"] = len(rounds) * setup_allowance(clock, spec)
    return why


def call_count_error(res: HarnessResult, spec: TimingSpec) -> str | None:
    for k, run in enumerate([*res.calibration, *res.timing]):
        graphed = (len(run.graph_warmup_ms), len(run.graph_samples_ms))
        if graphed != (0, 0) and (not spec.graphs or graphed != (spec.warmup, spec.reps)):
            asked = spec.calls if spec.graphs else 0
            return f"reported {sum(graphed)} graph replays in a round; {asked} were asked for"
        if run.samples_ms and run.median_ms != statistics.median(run.samples_ms):
            return f"reported a median of {run.median_ms:.6g} ms for a round whose median is not that"
        n = len(run.samples_ms) + len(run.warmup_ms)
        if n != spec.calls:
            what = (
                f"calibration round {k}" if k < len(res.calibration) else f"round {k - len(res.calibration)}"
            )
            return f"reported {n} timed calls in {what}; {spec.calls} were asked for"
    return None


class RoundsJudge:
    """The verdict on one harness child's timing rounds (see the module doc). `floor_notes`:
    the case judge's list of cases passed only with the float32 floor, for the verdict's log."""

    def __init__(
        self,
        verdict: Verdict,
        settings: JudgeSettings,
        problem: Problem,
        data: ProblemData,
        box: Sandbox,
        clock: RoundClock,
        inplace: InPlace | None,
        max_bytes: int,
        floor_notes: list[str],
    ) -> None:
        self.v, self.s, self.problem, self.data, self.box, self.clock = (
            verdict,
            settings,
            problem,
            data,
            box,
            clock,
        )
        self.inplace, self.max_bytes, self.floor_notes = inplace, max_bytes, floor_notes
        self.round_reads: dict[int, RoundRead] = {}  # each round's kept outputs, read at its stop
        # each timing round's readings as read while the child was stopped after it, and the
        # rounds not counted (why: `round_rejected`)
        self.readings: dict[int, TimingRun] = {}
        self.rejected: dict[int, str] = {}
        self.stands = ""  # a rejection confirmed: the verdict once the outputs are judged

    def read_round(self, k: int, run: TimingRun, spec: TimingSpec) -> None:
        """Round k's kept outputs read from the judge's region while the child is held stopped
        after it (`InPlace.read_round`): the values at the secret positions, the secret calls
        checked in full; judged with the rounds (`_timed_outputs_wrong`)."""
        assert self.inplace is not None
        copies = 2 if run.graph_samples_ms else 1  # the calls, then their graph replays
        self.round_reads[k] = self.inplace.read_round(self.problem, self.data.rounds[k], spec.calls, copies)

    def _timed_outputs_wrong(
        self,
        tr: TimedRound,
        res: HarnessResult,
        spec: TimingSpec,
    ) -> tuple[str, list[SeedCheck]] | None:
        """Round `tr`'s outputs against the references of exactly its calls: every call at the
        secret positions (the allclose rule), the secretly chosen calls in full. (message,
        failed checks) or None. Read by the judge from its region at the round's stop
        (`read_round`), or sent back by the child in files (the old path)."""
        read = self.round_reads.get(tr.k) if self.inplace is not None and spec.keep_outputs else None
        if self.inplace is not None and spec.keep_outputs:
            if read is None:
                return f"the judge read no timed outputs of round {tr.k}", []
            got: object = {n: torch.from_numpy(v) for n, v in read.samples.items()}
        else:
            rel = res.timed_samples.get(tr.k)
            if rel is None:
                return f"the harness sent back no timed outputs of round {tr.k}", []
            with self.box.open_file(rel, max_bytes=self.max_bytes) as f:
                got = torch.load(f, weights_only=True)
        tol = tolerance_for(self.problem.definition)
        copies = 2 if res.timing[tr.k].graph_samples_ms else 1  # the calls, then their graph replays
        for name, ref0 in tr.ref_samples.items():
            ref = np.concatenate([ref0] * copies)
            g = got.get(name) if isinstance(got, dict) else None
            if not isinstance(g, torch.Tensor) or tuple(g.shape) != ref.shape:
                return f"the harness sent back malformed samples of {name} for round {tr.k}", []
            rms = np.concatenate([tr.ref_rms[name]] * copies)
            ok = compare.sampled_agreement(g.to(torch.float64).numpy(), ref, rms, tol)
            ok[~np.concatenate([tr.covered] * copies)] = True  # calls whose reference was not computed
            bad = np.flatnonzero(~ok.all(axis=1))
            if bad.size:
                t = int(bad[0])
                j = int(np.flatnonzero(~ok[t])[0])
                kind = "warm-up" if t % spec.calls < spec.warmup else "timed"
                kind += " (graph replay)" if t >= spec.calls else ""
                return (
                    f"the output of a timed call is wrong: {bad.size} of {len(tr.calls)} calls of timing round "
                    f"{tr.k} disagree with the reference at sampled elements (e.g. {kind} call {t}: "
                    f"{int((~ok[t]).sum())} of {ok.shape[1]} sampled elements of {name} wrong, "
                    f"{float(g[t, j]):.6g} where the reference is {float(ref[t, j]):.6g})"
                ), []
        for t, case in tr.full_cases.items():
            if read is not None:
                chk = read.full[t]
            else:
                rel_full = res.timed_full.get(f"{tr.k}-{t}")
                if rel_full is None:
                    return f"the harness sent back no output of call {t} of round {tr.k}", []
                chk = check_case(
                    self.problem,
                    case,
                    f"timed:r{tr.k}-call{t}",
                    load_outputs(self.box, rel_full, self.max_bytes),
                )
            if not chk.passed:
                return f"the output of a timed call is wrong ({chk.note})", [chk]
        return None

    def timing(self, res: HarnessResult, spec: TimingSpec) -> Profile | None:
        """The timing rounds as the harness reported them: the protocol (rounds, timer, calls),
        inputs unchanged, the values returned, every timed call's outputs at secret positions
        and the secret calls in full (None: all as asked and correct)."""
        v, data, walls = self.v, self.data, self.clock.walls
        if res.skipped_timing or not res.timing:
            return v.profile("unmeasured", res.skipped_timing or "no timing result")
        if len(res.timing) != len(walls) or (len(self.counted()) != spec.trials and not self.stands):
            return v.profile(
                "runtime_error",
                f"the harness reported {len(res.timing)} timing rounds and stopped for "
                f"{len(walls)}; {spec.trials} were asked for",
            )
        if self.readings and any(
            (r := self.readings.get(k)) is None
            or (r.samples_ms, r.warmup_ms) != (run.samples_ms, run.warmup_ms)
            for k, run in enumerate(res.timing)
        ):  # (what it found of the inputs after the clock stopped comes later: not in the readings)
            return v.profile(
                "runtime_error",
                f"the harness's final result does not repeat the readings it left after each round{v.tail}",
            )
        if res.timer != spec.timer:  # the child's record of how it timed is checked, never believed
            return v.profile(
                "timing_mismatch",
                f"timing_mismatch: the kernel's process reported timing with "
                f"{res.timer!r}; {spec.timer!r} was asked for",
            )
        wrong_count = call_count_error(res, spec)
        if wrong_count:  # not our harness's protocol
            return v.profile("runtime_error", wrong_count)
        changed = sum(r.mutated for r in res.timing)
        if changed:
            return v.profile(
                "incorrect", f"modified its inputs in {changed} timed call(s); inputs are read-only"
            )
        malformed = sum(r.malformed for r in res.timing)
        if malformed:
            return v.profile(
                "incorrect", f"returned the wrong number or kind of values in {malformed} timed call(s)"
            )
        for tr in data.rounds[: len(walls)]:
            wrong = self._timed_outputs_wrong(tr, res, spec)
            if wrong is not None:
                return v.profile("incorrect", wrong[0], correctness=[*v.checks, *wrong[1]])
        counters = v.counters
        counters["timing_rounds_rejected"] = float(len(self.rejected))
        if self.stands:
            return v.profile("timing_mismatch", self.stands)
        checked = sum(int(tr.covered.sum()) for tr in data.rounds[: len(walls)])
        counters["timing_checked_calls"] = float(checked)
        counters["timing_calls"] = float(sum(len(tr.calls) for tr in data.rounds[: len(walls)]))
        # the chance that a kernel wrong on a random 5% of its calls passes every checked call
        counters["timing_escape_lazy_5pct"] = 0.95**checked
        counters["timing_sampled_positions"] = float(self.s.sample_positions)
        return None

    def round_rejected(self, k: int, run: TimingRun, spec: TimingSpec) -> str | None:
        """Why timing round k, just over, cannot be counted (`round_rejected`), or None."""
        return round_rejected(k, run, self.clock, spec, mode=self.s.mode, bound=self.s.clock_bound)

    def counted(self) -> list[int]:
        """The timing rounds that count: every round driven but those `round_rejected`."""
        return [k for k in range(len(self.clock.walls)) if k not in self.rejected]

    def clock_bound(self, res: HarnessResult, spec: TimingSpec) -> Profile | None:
        """The kernel's clock bounded by ours over the counted rounds, each round on its own too
        (`round_rejected`, for a child timed without the parent reading its rounds as they end)."""
        counted = self.counted()
        for k in counted:
            why_round = round_rejected(
                k, res.timing[k], self.clock, spec, mode=self.s.mode, bound=self.s.clock_bound
            )
            if why_round is not None:
                return self.v.profile("timing_mismatch", why_round)
        why = timing_clock_mismatch(
            res,
            self.clock,
            spec,
            rounds=counted,
            mode=self.s.mode,
            bound=self.s.clock_bound,
            counters=self.v.counters,
        )
        return self.v.profile("timing_mismatch", why) if why else None

    def gate(self, res: HarnessResult, spec: TimingSpec) -> Profile:
        """The latency (mean of the rounds' medians), the roofline with the peaks of the
        problem's dtypes and the gate: `passed` or `incorrect`."""
        v, problem, data, counters = self.v, self.problem, self.data, self.v.counters
        runs = [res.timing[k] for k in self.counted()]
        fig = figures(runs)
        lat = fig.latency_ms
        stats = latency_stats(fig.samples_ms, median_ms=lat)
        counters["eager_latency_ms"] = fig.eager_ms
        counters["host_bound"] = float(fig.host_bound)
        if fig.device_ms is not None:
            counters["device_latency_ms"] = fig.device_ms
        timing_workload = data.by_name[spec.like].planned.workload
        timed_problem = (
            problem
            if timing_workload == problem.workload
            else msgspec.structs.replace(problem, workload=timing_workload)
        )
        counters.update(
            {
                "footprint_bytes": float(spec.rotation * data.by_name[spec.like].set_bytes),
                "trials": float(len(runs)),
                "reps_per_trial": float(len(runs[0].samples_ms)),
                # what the clock bound bounds: the mean of every call, warm-ups included
                "timing_call_mean_ms": statistics.fmean(
                    c for r in runs for c in [*r.warmup_ms, *r.samples_ms]
                ),
                "trial_median_spread": (max(r.median_ms for r in runs) - min(r.median_ms for r in runs)) / lat
                if lat > 0
                else 0.0,
            }
        )
        v.tools = {
            "timer": res.timer,
            **res.versions,
            **({"gpu": res.device_name} if res.device_name else {}),
        }
        where = f"timed at {describe_axes(timing_workload)}" + "".join(
            f"\nnote: {n}" for n in [fig.note, *data.notes, *self.floor_notes] if n
        )
        if problem.definition.x_roofline is None:  # e.g. imported definitions: no % of peak, no gate
            return v.profile(
                "passed", f"{where}; the definition has no x_roofline, so no % of peak", latency=stats
            )
        dtypes = [s.dtype for s in problem.definition.inputs.values() if s.shape is not None]
        achieved(timed_problem, lat / 1e3, counters, flops_unit="tflops")
        return speed_verdict(
            v,
            timed_problem,
            spec_for_dtypes(self.s.spec, dtypes),
            stats,
            max_pct_peak=self.s.max_pct_peak,
            log=where,
        )


__all__ = [
    "CLOCK_BOUNDS",
    "JudgeSettings",
    "RoundsJudge",
    "call_count_error",
    "reported_s",
    "round_rejected",
    "setup_allowance",
    "timing_clock_mismatch",
    "uneven_round",
]
