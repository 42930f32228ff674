"""The Triton agent's steps of the judging pipeline: reading its harness's result.

`TritonJudge.judge(out)` turns one harness child's outcome into the verdict: how the child
ended (`Verdict.ended`), every case's outputs (dtype, shape, values; mutated inputs and
writes outside the outputs; an adversarial case's overflow said as such, its finite misses
judged again with float32's own error as the floor of the bar), a Triton solution that
launched no Triton kernel, and when it timed: the rounds' protocol, every timed call's
outputs at secret positions and the secret calls in full, the kernel's clock bounded by
ours (`timing_clock_mismatch`, the pipeline's calibrated bound with Triton's parameters),
the latency (mean of the rounds' medians) and the roofline with the peaks of the
problem's dtypes.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence

import msgspec
import numpy as np
import torch

from accelopt.problem import AxisConst, Problem
from accelopt.profile import Profile, SeedCheck
from hardware_agents.pipeline import compare, fp32, inputgen
from hardware_agents.pipeline.cases import PlannedCase, describe_axes
from hardware_agents.pipeline.clock import ClockBound, clock_mismatch
from hardware_agents.pipeline.device_spec import DeviceSpec
from hardware_agents.pipeline.roofline import achieved, speed_verdict
from hardware_agents.pipeline.rounds import RoundClock
from hardware_agents.pipeline.stats import latency_stats
from hardware_agents.pipeline.verdict import Verdict, fail_case
from hardware_agents.sandbox import Sandbox, SandboxOutcome
from hardware_agents.triton.convention_hint import convention_hint
from hardware_agents.triton.data import CaseData, ProblemData, TimedRound, to_float64, tolerance_for
from hardware_agents.triton.device_judge import CaseRead, InPlace, RoundRead, snapshot
from hardware_agents.triton.figures import figures
from hardware_agents.triton.harness import COMPILE_ERRORS
from hardware_agents.triton.inputs import INTERPRETER_LIMIT, input_elements, torch_dtype
from hardware_agents.triton.records import (
    NO_TRITON_LAUNCH,
    RAN_AHEAD,
    CaseRun,
    CorrectnessReport,
    HarnessRequest,
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


def ran_ahead(out: SandboxOutcome) -> str | None:
    """Why the harness child ran while it was held stopped, when it says so itself: it found a
    file the agent hands over between calls missing (records.RAN_AHEAD), so something continued it before the agent
    handed them over. Trusted only because it can only fail the kernel; a freeze breach the
    agent saw itself comes first (None then, and for any other end)."""
    if out.freeze_breach is not None or out.status != "error" or out.error_type != RAN_AHEAD:
        return None
    last = out.error.strip().splitlines()[-1] if out.error.strip() else ""
    return (
        "the kernel's process ran while it was stopped between calls: it looked for a file the "
        f"agent hands over before the agent had written it ({last})"
    )


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


def load_outputs(box: Sandbox, rel: str, max_bytes: int) -> dict[str, torch.Tensor]:
    with box.open_file(rel, max_bytes=max_bytes) as f:
        obj = torch.load(f, weights_only=True)
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ValueError(f"{rel} does not hold a dict of tensors")
    return obj


def check_case(
    problem: Problem,
    case: CaseData,
    label: str,
    got: dict[str, torch.Tensor],
    floor: dict[str, fp32.Fp32Floor] | None = None,
) -> SeedCheck:
    """dtype, shape and values of one case's outputs (FlashInfer-Bench's INCORRECT_DTYPE,
    INCORRECT_SHAPE and INCORRECT_NUMERICAL, all reported as `incorrect`); with `floor`, the
    values' bar widened by float32's own error on the case's inputs (`fp32.Fp32Floor`)."""
    for meta in case.outputs:
        t = got.get(meta.name)
        if t is None:
            return SeedCheck(case=label, passed=False, note=f"output {meta.name} missing")
        if t.dtype != torch_dtype(meta.dtype):
            return SeedCheck(
                case=label,
                passed=False,
                note=f"output {meta.name} has dtype "
                f"{str(t.dtype).removeprefix('torch.')}, the definition says {meta.dtype}",
            )
        expected = tuple(meta.shape or ())
        if tuple(t.shape) != expected:
            return SeedCheck(
                case=label,
                passed=False,
                note=f"output {meta.name} has shape {list(t.shape)}, the definition says {list(expected)}",
            )
    outputs = {n: to_float64(got[n]) for n in case.ref64}
    return compare.compare_outputs(
        label, outputs, case.ref64, tolerance_for(problem.definition), stats=case.stats, floor=floor
    )


def overflowed(case: CaseData, got: dict[str, torch.Tensor]) -> list[str]:
    """The outputs with a non-finite value where the case's reference is finite."""
    bad = []
    for name, ref in case.ref64.items():
        t = got.get(name)
        if t is None or not t.is_floating_point() or tuple(t.shape) != ref.shape:
            continue
        finite_ref = torch.from_numpy(np.isfinite(ref))
        if bool((~torch.isfinite(t.cpu()) & finite_ref).any()):
            bad.append(name)
    return bad


def overflow_reason(problem: Problem, outputs: Sequence[str]) -> str:
    """Why an adversarial case's non-finite outputs refuse the kernel, said precisely.

    The `large` case scales every float input by 1000 (inputgen.LARGE_SCALE). That is the
    size of activations real models carry (hidden-state "massive activations" of 1e3 to 1e4
    in LLaMA-2, Sun et al. 2024), though not of every intermediate: an attention's logits,
    products of two scaled inputs, reach 1e6 there, beyond any real model's. The case is
    kept at that scale, and a kernel whose output is non-finite there is refused, because:

    - the reference is finite there (a case whose reference overflows is skipped), and an
      honest kernel is too: softmax is shift-invariant, and the kernel that subtracts the
      running max and accumulates in float32 (FlashAttention's and FlashInfer's own way) is
      right at any scale, save where two logits tie at float32's resolution, which the
      float32 floor forgives (`TritonJudge._floor_check`);
    - an `exp` without max subtraction overflows float32 once one logit passes 88.7, and
      real attention heads pass it: Kimi K2, a DeepSeek-V3-shaped MLA model, reports max
      logits past 1000 in training without its QK-Clip, which then holds them at 100. A
      scale that kept logits to what real models produce (~100) would refuse such a kernel
      all the same, and one that passed it (inputs under ~4x for FlashInfer-Bench's MLA
      decode) would stress nothing: the overflow is the kernel's at realistic magnitudes
      (that baseline, an exp without max subtraction, at inputs x4 instead of x1000, largest
      logits 74 to 156: 7 of its 64 heads NaN, measured in the interpreter);
    - a sum of squares or an accumulator in fp16 overflows at 65504, which 1000-scale
      activations pass, as real ones do.

    So the verdict stays `incorrect`, and says which case, at what scale, and the likely
    cause instead of a bare mismatch."""
    default = problem.definition.x_adversarial is None
    scale = f"at inputs scaled x{inputgen.LARGE_SCALE:g}" if default else "at its inputs"
    return (
        f"overflow: non-finite {', '.join(outputs)} where the reference is finite, {scale} (see the note): "
        "the kernel overflows at magnitudes the reference computes, e.g. an exp without max "
        "subtraction (float32's exp overflows past 88.7, a logit real attention heads reach) or a "
        "sum of squares or accumulator in fp16 (past 65504)"
    )


def _constant_part(problem: Problem) -> tuple[int, list[str]]:
    """Input elements of the definition with every variable axis at 1 (what no smaller
    workload can shrink), and its largest inputs at that size, as `name[shape]`."""
    d = problem.definition
    axes = {a: 1 for a in d.axes} | {k: v.value for k, v in d.axes.items() if isinstance(v, AxisConst)}
    sizes = []
    for name, spec in d.inputs.items():
        shape = d.shape_of(name, axes)
        if spec.shape is not None and shape is not None:
            sizes.append((math.prod(shape), f"{name}{list(shape)}"))
    sizes.sort(reverse=True)
    return sum(n for n, _ in sizes), [s for _, s in sizes[:3]]


def too_big_to_interpret(problem: Problem, plan: Sequence[PlannedCase], mode: str, device_name: str) -> str:
    """Why the interpreter is not even started (a production shape it would run for hours):
    the status is `unchecked`, and the message says to check it on a GPU, and why."""
    if mode != "interpreter":
        return ""
    worst = max(plan, key=lambda pc: input_elements(problem.definition, pc.workload))
    n = input_elements(problem.definition, worst.workload)
    if n <= INTERPRETER_LIMIT:
        return ""
    why = (
        f"not checked: on this host (no {device_name}) correctness is checked in the Triton interpreter, "
        f"and the workload it would run, {worst.label} ({describe_axes(worst.workload)}), holds {n:,} input "
        f"elements: hours of interpretation (the limit is {INTERPRETER_LIMIT:,}). "
    )
    fixed, largest = _constant_part(problem)
    if fixed > INTERPRETER_LIMIT:
        return why + (
            f"The definition's constant axes alone hold {fixed:,} input elements ({', '.join(largest)}), "
            "so no smaller workload can be interpreted either: check it on a GPU"
        )
    return why + (
        "Give the problem small check workloads (check_workloads.jsonl; `accelopt suite import-flashinfer` "
        "derives them from the variable axes where it can), or check it on a GPU"
    )


class TritonJudge:
    """The verdict on one harness child (see the module doc): `judge(out, needs_launch)` on a
    child that has ended, or step by step (`ended`, `cases`, `untimed`, `timing`,
    `clock_bound`, `gate`) as the agent's stages run them."""

    def __init__(
        self,
        verdict: Verdict,
        settings: JudgeSettings,
        problem: Problem,
        data: ProblemData,
        req: HarnessRequest,
        box: Sandbox,
        clock: RoundClock,
        inplace: InPlace | None = None,
    ) -> None:
        self.inplace = inplace  # the judge's region: outputs compared in place (`device_judge.py`)
        self.v, self.s, self.problem, self.data, self.req, self.box, self.clock = (
            verdict,
            settings,
            problem,
            data,
            req,
            box,
            clock,
        )
        self.max_bytes = max((c.set_bytes for c in data.cases), default=0) * 2 + (1 << 20)
        self.sweep = ""  # what the autotune sweep found (a note for the verdict)
        self.floor_notes: list[str] = []  # cases that passed only with the float32 floor
        # False while the harness child is held stopped before its first timing round: the
        # floor's reference child would need the device (the GPU slot) the stopped child
        # holds, so a case that needs it is judged after the child ends (`floor_deferred`)
        self.floor_now = True
        self.floor_deferred = False
        # The case outputs read while the child was held stopped (None: not kept). A case
        # judged again after the rounds is judged on these: the child could rewrite its
        # files in its folder once it was continued. `sealed`: nothing more may be read.
        self.kept: dict[str, dict[str, torch.Tensor]] | None = None
        self.kept_reads: dict[str, CaseRead] = {}  # the same, of the judge's region (`inplace`)
        self.sealed = False
        self.round_reads: dict[int, RoundRead] = {}  # each round's kept outputs, read at its stop
        # each timing round's readings as read while the child was stopped after it, and the
        # rounds not counted (why: `round_rejected`)
        self.readings: dict[int, TimingRun] = {}
        self.rejected: dict[int, str] = {}
        self.stands = ""  # a rejection confirmed: the verdict once the outputs are judged

    def judge(self, out: SandboxOutcome, needs_launch: bool) -> Profile:
        """Every step on a child that has ended: its end, its cases, then (timed) its rounds, the
        clock bound and the roofline gate. The agent runs the same steps stage by stage
        (`stages.py`), the cases judged while the child is stopped before its first round."""
        failed = self.ended(out)
        if failed is not None:
            return failed
        res = out.decode(HarnessResult)  # its phase_s are the kernel's process's word: not recorded
        failed = self.cases(res, out, needs_launch)
        if failed is not None:
            return failed
        if self.req.timing is None:
            return self.untimed()
        spec = self.req.timing
        return self.timing(res, spec) or self.clock_bound(res, spec) or self.gate(res, spec)

    def ended(self, out: SandboxOutcome) -> Profile | None:
        """The verdict on how the child ended (None: it ended `ok`): ran ahead of its inputs,
        a freeze breach, sandbox_error, timeout (with a hint for the interpreter), a crash."""
        v, problem, data = self.v, self.problem, self.data
        v.record_outcome(out)
        v.counters["sandbox_wall_s"] = out.wall_s
        hint = ""
        if out.status in ("timeout", "cpu_limit") and self.s.mode == "interpreter":
            biggest = max(data.cases, key=lambda c: input_elements(problem.definition, c.planned.workload))
            hint = (
                f"\nhint: the Triton interpreter ran {biggest.planned.label} "
                f"({describe_axes(biggest.planned.workload)}, "
                f"{input_elements(problem.definition, biggest.planned.workload):,} input elements); give the "
                "problem smaller check workloads (check_workloads.jsonl) or profile it on a GPU"
            )
        early = ran_ahead(out)
        if early is not None:
            return v.profile("incorrect", f"{early}{v.tail}")
        return v.ended(
            out,
            timeout=f"{out.error} (the worker was killed){hint}",
            crashed=f"the kernel crashed the harness: {out.error}",
            compile_error=out.status == "error" and out.error_type in COMPILE_ERRORS,
        )

    def cases(
        self, res: HarnessResult | CorrectnessReport, out: SandboxOutcome | None, needs_launch: bool
    ) -> Profile | None:
        """The correctness cases the harness ran, judged against our references (None: all
        correct). `out`: the child's end, for the processes it left (None: it is still
        running, held stopped before its first timing round: the caller checks them later)."""
        v = self.v
        v.checks.clear()  # judged again after the child ended: once
        self.floor_notes.clear()
        self.floor_deferred = False
        listed = self._listed_wrong(res)
        if listed is not None:
            return listed
        for run in res.cases:
            failed = self._case(run)
            if failed is not None:
                return failed
        if len(v.checks) != len(self.data.cases):
            return v.profile(
                "runtime_error", f"the harness ran {len(v.checks)} of {len(self.data.cases)} cases{v.tail}"
            )
        strays = v.left_processes(out) if out is not None else None
        if strays is not None:
            return strays
        self.sweep, configs_wrong = self._autotune_configs(res)
        wrong = v.wrong_cases(self._adversarial_note() + self.sweep)
        if wrong is not None:
            return wrong
        if configs_wrong:
            return v.profile("incorrect", self.sweep.lstrip("\n") + v.tail)
        idle = [r.name for r in res.cases if r.launches == 0]
        if needs_launch and idle:
            v.counters["cases_without_launch"] = float(len(idle))
            return v.profile(
                "incorrect",
                f"the Triton solution launched no Triton kernel in {len(idle)} of "
                f"{len(res.cases)} checks ({', '.join(idle[:4])}): its outputs came from other code "
                "(a torch fallback?), so they say nothing about its kernels. Under the interpreter "
                "torch.cuda.is_available() is true and device='cuda' works on CPU tensors: take the "
                f"Triton path.{v.tail}",
                reason=NO_TRITON_LAUNCH,
            )
        return None

    def _listed_wrong(self, res: HarnessResult | CorrectnessReport) -> Profile | None:
        """The verdict on a case list that is not every planned case exactly once (its order
        aside): the list is the kernel's process's word, and a case listed twice in place of
        another would leave that one unjudged with the count right."""
        counts: dict[str, int] = {}
        for run in res.cases:
            counts[run.name] = counts.get(run.name, 0) + 1
        repeated = [f"{n} {k} times" for n, k in counts.items() if k > 1]
        if not repeated:
            return None
        v = self.v
        return v.profile(
            "runtime_error", f"the harness ran {', '.join(repeated)}: each case runs once{v.tail}"
        )

    def _case(self, run: CaseRun) -> Profile | None:
        """One case's outputs (its check appended to the verdict's), or the verdict on a case
        the harness could not run."""
        v, data, req = self.v, self.data, self.req
        case = data.by_name.get(run.name)
        if case is None:
            return v.profile("runtime_error", f"the harness reported an unknown case {run.name!r}{v.tail}")
        label = (
            run.name
            if case.planned.label == data.cases[0].planned.label
            else f"{run.name} ({describe_axes(case.planned.workload)})"
        )
        hint = convention_hint(req.destination_passing, run, len(req.inputs), len(case.outputs))
        hint = f"\n{hint}" if hint else ""
        if run.error:
            if run.error_type == "OutputMismatch":
                v.checks.append(SeedCheck(case=label, passed=False, note=run.error.splitlines()[0]))
                return v.profile("incorrect", f"{label}: {run.error}{hint}{v.tail}")
            status = "compile_error" if run.error_type in COMPILE_ERRORS else "runtime_error"
            return v.profile(status, f"{label}: {run.error}{hint}{v.tail}")
        mutated, overflow = run.mutated, run.overflow
        if self.inplace is not None:  # its buffers, as the judge reads them (never the child's word)
            read = self._read_case(case.name)
            got, mutated, overflow = read.outputs, read.mutated, read.overflow
            wrong = "" if req.destination_passing else self.inplace.returned_wrong(case, run)
            chk = SeedCheck(case=label, passed=False, note=wrong) if wrong else self._check(case, label, got)
        else:
            got = self._case_outputs(run.output_file)
            chk = self._check(case, label, got)
        if not chk.passed and req.destination_passing:
            unwritten = all(bool(torch.isnan(t).all()) for t in got.values() if t.is_floating_point())
            hint = convention_hint(True, run, len(req.inputs), len(case.outputs), outputs_unwritten=unwritten)
            if hint:
                chk.note = f"{chk.note}\n{hint}"
        if mutated:
            fail_case(
                chk,
                f"modified its input(s) {', '.join(mutated)} (or memory next to them); inputs are read-only",
            )
        if overflow:
            fail_case(chk, f"wrote outside the bounds of output(s) {', '.join(overflow)}")
        v.checks.append(chk)
        return None

    def _read_case(self, name: str) -> CaseRead:
        """A case's buffers in the judge's region as read while the child was held stopped where
        they were kept, else read now (never once `sealed`: the child has run since)."""
        assert self.inplace is not None
        if self.kept is not None and name in self.kept_reads:
            return self.kept_reads[name]
        if self.sealed:
            raise ValueError(f"the buffers of {name} were not read while the child was held stopped")
        read = self.inplace.read_case(name)
        if self.kept is not None:
            self.kept_reads[name] = read
        return read

    def freeze_reads(self) -> None:
        """The cases' outputs read so far copied out of the region (the child is still held
        stopped): a case judged again later is judged on these, whatever the child writes."""
        self.kept_reads = snapshot(self.kept_reads)

    def _case_outputs(self, rel: str) -> dict[str, torch.Tensor]:
        """A case's outputs: as read while the child was stopped where they were kept, else
        read from its folder now (never once `sealed`: the child has run since)."""
        if self.kept is not None and rel in self.kept:
            return self.kept[rel]
        if self.sealed:
            raise ValueError(f"{rel} was not read while the child was held stopped")
        got = load_outputs(self.box, rel, self.max_bytes)
        if self.kept is not None:
            self.kept[rel] = got
        return got

    def untimed(self) -> Profile:
        """The verdict on a correct kernel that was not timed."""
        data = self.data
        where = "; ".join(
            sorted({f"{c.planned.label}: {describe_axes(c.planned.workload)}" for c in data.cases})
        )
        why = self.s.mode_note if self.s.mode == "interpreter" else "timing not requested"
        notes = "".join(f"\nnote: {n}" for n in [*data.notes, *self.floor_notes])
        return self.v.profile("unmeasured", f"correct at {where}; {why}{notes}{self.sweep}")

    def _check(self, case: CaseData, label: str, got: dict[str, torch.Tensor]) -> SeedCheck:
        """`check_case`; an adversarial case it fails is said precisely where its outputs
        overflow (`overflow_reason`) and judged again with the float32 floor where they do not
        (`_floor_check`)."""
        chk = (
            self.inplace.check(self.problem, case, label, got)
            if self.inplace is not None
            else check_case(self.problem, case, label, got)
        )
        if chk.passed or not case.planned.case.adversarial:
            return chk
        bad = self.inplace.overflowed(case, got) if self.inplace is not None else overflowed(case, got)
        if bad:
            chk.note = f"{overflow_reason(self.problem, bad)}; {chk.note}"
            return chk
        if chk.rel_l2 is None:  # a missing output, a dtype or shape the definition does not have
            return chk
        return self._floor_check(case, label, got, chk)

    def _floor_check(
        self, case: CaseData, label: str, got: dict[str, torch.Tensor], plain: SeedCheck
    ) -> SeedCheck:
        """An adversarial case whose finite outputs missed the tolerance, judged again with
        it widened by float32's own error on the case's inputs (`fp32.Fp32Floor`, as the
        Neuron agent's judge does; `ProblemData.floor`: the reference re-run in float32 on
        inputs moved by one ulp, in the reference's own sandboxed child, first time only).

        Why: at 1000x magnitudes an attention's logits are ~1e6, where float32's resolution
        is 0.06; where a query's two best keys are a few ulps apart, which of them the softmax
        favours depends on the order of the score's sum, so honest float32 kernels and the
        float32 reference disagree there by up to the output's size (FlashInfer-Bench's GQA
        ragged prefill baseline on an H200: 340 of 66.7 M elements). The floor is that
        disagreement measured on the reference itself; elsewhere it is a few ulps, so bf16 or
        fp16 arithmetic (2^-8, 2^-11 relative) stays far outside it. Consulted only while
        every earlier check passed (a kernel already wrong is wrong whatever this case
        says); where it cannot be measured, the plain verdict stands, saying so."""
        if any(not c.passed for c in self.v.checks):
            return plain
        if not self.floor_now:  # the child is held stopped: judged again once it has ended
            self.floor_deferred = True
            return plain
        t0 = time.perf_counter()
        try:  # measured once per case by the reference child (on the judge's device in place)
            on_device = self.inplace.floor(case.name) if self.inplace is not None else None
            floor = self.data.floor(case.name) if self.inplace is None else None
        except Exception as e:  # the reference's failure: the plain verdict stands
            plain.note += f" (the float32 floor could not be measured: {type(e).__name__}: {e})"
            return plain
        finally:
            self.v.counters["phase_fp32_floor_s"] = (
                self.v.counters.get("phase_fp32_floor_s", 0.0) + time.perf_counter() - t0
            )
        if self.inplace is not None:
            widened = self.inplace.check(self.problem, case, label, got, floor=on_device)
        else:
            widened = check_case(self.problem, case, label, got, floor=floor)
        if widened.passed:
            self.v.counters["fp32_floor_cases"] = self.v.counters.get("fp32_floor_cases", 0.0) + 1
            self.floor_notes.append(
                f"{label} passed only with the tolerance widened by "
                f"{fp32.FP32_FLOOR_FACTOR:g}x float32's own error on its inputs (the reference "
                f"re-run in float32 on them moved by one ulp): without it, {plain.note}"
            )
        return widened

    def _adversarial_note(self) -> str:
        """What the failed adversarial cases were (their names alone do not say)."""
        inits = inputgen.adversarial_cases(self.problem.definition)
        failed = {c.case for c in self.v.checks if not c.passed}
        return "".join(
            f"\nnote: {name} is an adversarial case: "
            + ", ".join(f"{n} = {e}" for n, e in inits[name].items())
            + " (finite in the reference: a kernel must be right at these magnitudes too)"
            for name in sorted(failed & set(inits))
        )

    def _autotune_configs(self, res: HarnessResult | CorrectnessReport) -> tuple[str, bool]:
        """What the interpreter found of each `triton.autotune` config (`autotune.py`): a note
        naming the configs that ran, which are wrong (and where) and which pass, and whether
        any config other than the first is wrong ("", False without autotuned kernels)."""
        if not res.autotune:
            return "", False
        first = "; ".join(f"{k}: {c}" for k, c in res.autotune.items())
        lines = [f"autotune: the checks above ran {first}"]
        verdicts: dict[int, list[str]] = {}
        described: dict[int, str] = {}
        for cr in res.config_runs:
            case = self.data.by_name.get(cr.run.name)
            if case is None:
                continue
            described[cr.index] = "; ".join(f"{k}: {c}" for k, c in cr.configs.items())
            if cr.run.error:
                why = f"{cr.run.name}: {cr.run.error.splitlines()[0]}"
            else:
                got = self._case_outputs(cr.run.output_file)
                chk = self._check(case, f"{cr.run.name}@config-group{cr.index}", got)
                why = "" if chk.passed else f"{cr.run.name}: {chk.note.splitlines()[0]}"
                if not chk.passed:
                    self.v.checks.append(chk)
            verdicts.setdefault(cr.index, [])
            if why:
                verdicts[cr.index].append(why)
        for k in sorted(verdicts):
            state = "wrong at " + "; ".join(verdicts[k]) if verdicts[k] else "correct"
            lines.append(f"then {described[k]}: {state}")
        wrong = any(verdicts.values())
        if verdicts:
            lines.append(
                "on a GPU the tuner may pick any of these configs: a wrong one is wrong there whenever it is picked"
            )
        return "\n" + "\n".join(lines), wrong

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
    "TritonJudge",
    "call_count_error",
    "check_case",
    "load_outputs",
    "overflow_reason",
    "overflowed",
    "reported_s",
    "round_rejected",
    "setup_allowance",
    "timing_clock_mismatch",
    "too_big_to_interpret",
    "uneven_round",
]
