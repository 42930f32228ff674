"""The Neuron agent's steps of the judging pipeline: reading its children's results.

- `judge_correctness(v, problem, data, out, box)`: how the correctness child ended (by the
  stage it reached: loading or compiling is a compile error), its error report, every
  case's outputs (mapped with `transform_nki_outputs`) against the float64 references, and
  the inputs it must not have modified;
- `TimingRounds`: the hooks of the pipeline's rounds driver for the timing child. Per round:
  fresh inputs drawn now and handed over while the child waits; after the round, every
  profiled run's output checked in full against that round's reference, the inputs
  checked, the profiler's files read in a child that loads neither the kernel nor the SDK,
  and their device times bounded by our clock (`NEURON_BOUND`: no lower bound, see below);
  re-run while (max - min) / min > `spread_threshold`;
- `timed_verdict(...)`: the timing child's end, the round with the smallest spread, its
  statistics, the roofline and the plausibility gate.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import numpy as np

from accelopt.problem import Problem, Solution
from accelopt.profile import Profile, SeedCheck
from hardware_agents.neuron.data import JudgedCase, ProblemData, TimingRound
from hardware_agents.neuron.profile_summary import COUNTER_FIELDS, ProfileSummary, SummaryError, parse_summary
from hardware_agents.neuron.protocol import (
    HarnessResult,
    SummaryRequest,
    SummaryResult,
    profiled_pair,
    report_file,
    round_dir,
    round_file,
    timed_output,
)
from hardware_agents.neuron.protocol import TimingRound as ChildRound
from hardware_agents.neuron.reference import ReferenceModule
from hardware_agents.pipeline import compare, fp32
from hardware_agents.pipeline.cases import fresh_seed
from hardware_agents.pipeline.clock import ClockBound, clock_mismatch
from hardware_agents.pipeline.device_spec import DeviceSpec
from hardware_agents.pipeline.phases import Phases
from hardware_agents.pipeline.roofline import achieved, speed_verdict
from hardware_agents.pipeline.rounds import STOP, RoundClock
from hardware_agents.pipeline.stats import latency_stats, range_spread
from hardware_agents.pipeline.verdict import Verdict, fail_case
from hardware_agents.sandbox import Sandbox, SandboxOutcome

_R = TypeVar("_R")
_MAX_PROFILE_FILE = 4 << 30  # a NEFF or NTFF copied for the summary child
# The profiled runs execute one after another inside the interval our clock measured (between
# two stops of the child), so their device times cannot add up to more. There is no lower
# bound: what nki.baremetal spends around each device run (tracing, compiling, loading the
# NEFF, copying tensors, writing the trace) is not known without a device, so the device time
# may be any fraction of our wall time; the roofline gate (`max_pct_peak`) is the floor.
NEURON_BOUND = ClockBound(
    over=0.01,
    lower=False,
    reading="device time in the profiler files",
    forged="the trace files were not written by these runs",
)


def decoded(v: Verdict, out: SandboxOutcome, result: type[_R], status: str, unreadable: str) -> _R | Profile:
    """The result a child that ended `ok` sent back, or the `status` verdict that it is
    `unreadable` (with the kernel's output)."""
    try:
        return out.decode(result)
    except Exception as e:
        return v.profile(status, f"{unreadable}: {e}{v.tail}")


def stage_sources(box: Sandbox, solution: Solution, entry_file: str) -> str:
    """The solution's files in the child's work dir; the entry file's path there."""
    for src in solution.sources:
        p = box.workdir / src.path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(src.content.encode())  # UTF-8 whatever the locale: the bytes a program is bound to
        box.give(src.path)
    return str(box.workdir / entry_file)


def output_cap(data: ProblemData) -> int:
    return 2 * max(data.output_bytes.values(), default=0) + (1 << 20)


def load_output(box: Sandbox, rel: str, cap: int) -> np.ndarray:
    """A .npy the child wrote, memory-mapped read-only (no copy of a large output): opened
    without following links, a regular file of at most `cap` bytes, a plain dtype."""
    with box.open_file(rel, max_bytes=cap) as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ValueError(f"unsupported .npy version {version}")
        if dtype.hasobject:
            raise ValueError("object arrays are not outputs")
        if math.prod(shape) == 0:
            return np.empty(shape, dtype=dtype)
        mapped = np.memmap(
            f, dtype=dtype, mode="r", offset=f.tell(), shape=shape, order="F" if fortran else "C"
        )
        return np.asarray(mapped)  # a plain view: numpy's memmap subclass slows every chunk of the judge


def check_outputs(
    problem: Problem,
    ref_mod: ReferenceModule,
    refs: dict[str, np.ndarray],
    box: Sandbox,
    name: str,
    rels: list[str],
    returned_tuple: bool,
    cap: int,
    *,
    stats: dict[str, compare.RefStats] | None = None,
    floor: Callable[[], dict[str, fp32.Fp32Floor]] | None = None,
) -> SeedCheck:
    """Judge one set of kernel outputs (files the child wrote) against the reference. With
    `floor` (float32's own error on these inputs, computed on demand), outputs that miss the
    tolerance are judged again with it widened by that error (`fp32.Fp32Floor`)."""
    try:
        outs = [load_output(box, rel, cap) for rel in rels]
    except (OSError, ValueError) as e:
        return SeedCheck(case=name, passed=False, note=f"cannot read the kernel's output: {e}")
    if not outs:
        return SeedCheck(case=name, passed=False, note="the kernel returned nothing")
    kernel_out: Any = tuple(outs) if (returned_tuple or len(outs) > 1) else outs[0]
    try:
        got = ref_mod.kernel_outputs(kernel_out, refs)
    except ValueError as e:
        return SeedCheck(case=name, passed=False, note=str(e))
    dtypes: dict[str, str] = {n: s.dtype for n, s in problem.definition.outputs.items()}
    tol = compare.tolerance_of(problem.definition)
    # one thread (validity's `threads`): the execute children or the timing child have the other cores
    chk = compare.compare_outputs(name, got, refs, tol, expected_dtypes=dtypes, stats=stats, threads=1)
    if chk.passed or floor is None:
        return chk
    return compare.compare_outputs(
        name, got, refs, tol, expected_dtypes=dtypes, stats=stats, floor=floor(), threads=1
    )


class FloorGate:
    """Which cases may be judged again with float32's own error as the floor of the bar
    (`fp32.Fp32Floor`): every case until one fails with it (then the kernel is wrong
    whatever the rest do, and the floor, two float32 evaluations of the reference, is not
    worth its time for them). The floor's time goes to the `floor` phase."""

    def __init__(self, problem: Problem, phases: Phases | None = None) -> None:
        self.problem = problem
        self.phases = phases
        self.wrong = False

    def of(self, case: JudgedCase) -> Callable[[], dict[str, fp32.Fp32Floor]] | None:
        if self.wrong:
            return None

        def floor() -> dict[str, fp32.Fp32Floor]:
            if self.phases is None:
                return case.floor(self.problem)
            with self.phases("floor"):
                return case.floor(self.problem)

        return floor

    def judged(self, chk: SeedCheck) -> None:
        self.wrong = self.wrong or not chk.passed


class CaseJudge:
    """Each case's outputs against its references as its child ends (the emulate mode judges a
    group of cases as soon as its execute child is done, then lets its outputs go), and a case
    that misses the tolerance judged again with float32's own error as its floor (`FloorGate`:
    until one fails with it). A case still computing its references is judged once they are
    there (the wait is `phases`' `references`). One thread: the comparison's chunks are many
    short numpy calls, and two threads taking turns at the GIL for each made six cases ten
    times slower than one thread (measured: 22 s against 1.6 s for add_rmsnorm_matmul)."""

    def __init__(self, problem: Problem, data: ProblemData, phases: Phases | None = None) -> None:
        self.problem = problem
        self.ref_mod = ReferenceModule(problem)
        self.cap = output_cap(data)
        self.phases = phases or Phases({})
        self.floors = FloorGate(problem, phases)

    def __call__(self, case: JudgedCase, run: tuple[Sandbox, str, list[str], bool]) -> SeedCheck:
        """`run`: the sandbox whose work dir holds the case's outputs, its name, output files and
        whether the kernel returned a tuple."""
        chk = self._check(case, run)
        if not chk.passed:
            floor = self.floors.of(case)
            if floor is not None:
                chk = self._check(case, run, floor)
                self.floors.judged(chk)
        return chk

    def _check(
        self,
        case: JudgedCase,
        run: tuple[Sandbox, str, list[str], bool],
        floor: Callable[[], dict[str, fp32.Fp32Floor]] | None = None,
    ) -> SeedCheck:
        box, name, rels, returned_tuple = run
        with self.phases("references"):  # a case still computing: judged once it is there
            refs = case.refs()
        return check_outputs(
            self.problem,
            self.ref_mod,
            refs,
            box,
            name,
            rels,
            returned_tuple,
            self.cap,
            stats=case.stats,
            floor=floor,
        )


def judge_correctness(
    v: Verdict,
    problem: Problem,
    data: ProblemData,
    out: SandboxOutcome,
    box: Sandbox,
) -> Profile | HarnessResult:
    """The verdict on the correctness child, or its result when every case passed (its
    versions in `v.tools`, its cases in `v.checks`)."""
    v.record_outcome(out)
    try:
        stage = box.read_file(".stage", 4096).decode(errors="replace")
    except OSError:
        stage = ""
    compiling = stage.startswith(("load", "compile"))
    ended = v.ended(
        out,
        timeout=f"{out.error} "
        + ("while compiling" if compiling else f"while running ({stage or 'unknown stage'})"),
        crashed=f"the harness crashed {'while compiling' if compiling else 'running the kernel'}"
        f" ({stage}): {out.error}",
        compile_error=out.status == "crashed" and compiling,
    )
    if ended is not None:
        return ended
    res = decoded(v, out, HarnessResult, "runtime_error", "unreadable harness result")
    if isinstance(res, Profile):
        return res
    v.tools = res.versions
    if res.error is not None:
        err = res.error
        status = "runtime_error" if err.phase == "run" else "compile_error"
        where = f" (case {err.case})" if err.case else ""
        what = {
            "load": "loading the kernel module failed",
            "compile": "compilation failed",
            "run": "the kernel failed at run time",
        }[err.phase]
        return v.profile(status, f"{what}{where}: {err.type}: {err.message}\n{err.traceback}{v.tail}")
    if len(res.cases) != len(data.cases):
        return v.profile(
            "runtime_error", f"the harness ran {len(res.cases)} of {len(data.cases)} cases{v.tail}"
        )
    ref_mod = ReferenceModule(problem)
    floors = FloorGate(problem)
    for case, run in zip(data.cases, res.cases, strict=True):
        if run.name != case.case.name:
            return v.profile("runtime_error", f"harness result out of order ({run.name} != {case.case.name})")
        chk = check_outputs(
            problem,
            ref_mod,
            case.refs(),
            box,
            run.name,
            run.outputs,
            run.returned_tuple,
            output_cap(data),
            stats=case.stats,
            floor=floors.of(case),
        )
        floors.judged(chk)
        if run.mutated:
            fail_case(chk, f"modified its input argument(s) {run.mutated}; inputs are read-only")
        v.checks.append(chk)
    return v.wrong_cases() or res


class _Unisolated(Exception):
    """The summary child could not be isolated (and the run does not allow that)."""


class RoundRecord(msgspec.Struct, kw_only=True):
    """One timing round as the agent saw it: its seed, our clock (set-up: handing over its
    inputs; wall: its calls) and the profiler's reading of its runs."""

    index: int
    seed: int
    setup_s: float
    wall_s: float
    summaries: list[ProfileSummary | None] = []
    device_s: float = 0.0


class TimingLog(msgspec.Struct, kw_only=True):
    rounds: list[RoundRecord] = []

    def counters(self) -> dict[str, float]:
        """Sums over the rounds: our wall time of their calls, the device times read from
        their profiler files, our time handing over their inputs."""
        return {
            "timing_rounds": float(len(self.rounds)),
            "timing_wall_s": sum(r.wall_s for r in self.rounds),
            "timing_device_s": sum(r.device_s for r in self.rounds),
            "timing_setup_s": sum(r.setup_s for r in self.rounds),
        }


def _spread(summaries: Sequence[ProfileSummary | None]) -> float:
    return range_spread([x.total_time_s for x in summaries if x is not None])


class TimingRounds:
    """The timing child's rounds (the handshake of protocol.py), as hooks of the pipeline's
    `drive_rounds`: `hand_over(k)` draws round k's inputs on a fresh seed and hands them over,
    `after_round(k)` judges round k (a failed Profile, `STOP`, or None: another round).
    `log` holds what the rounds measured."""

    def __init__(
        self,
        v: Verdict,
        problem: Problem,
        data: ProblemData,
        clock: RoundClock,
        tbox: Sandbox,
        sbox: Sandbox,
        inputs: Path,
        *,
        runs: int,
        round_pause_s: float,
        spread_threshold: float,
        neuron_profile: str | None,
        verify_summaries: bool,
    ) -> None:
        self.v, self.problem, self.clock, self.tbox, self.sbox, self.inputs = (
            v,
            problem,
            clock,
            tbox,
            sbox,
            inputs,
        )
        self.runs, self.round_pause_s, self.spread_threshold = runs, round_pause_s, spread_threshold
        self.neuron_profile, self.verify_summaries = neuron_profile, verify_summaries
        self.ref_mod = ReferenceModule(problem)
        self.cap = output_cap(data)
        self.used = set(data.seeds)
        self.log = TimingLog()
        self.round: TimingRound | None = None

    def hand_over(self, k: int) -> None:
        if k and self.round_pause_s > 0:
            time.sleep(self.round_pause_s)  # the paper sleeps before re-measuring
        seed = fresh_seed(self.used)
        self.used.add(seed)
        self.round = rnd = TimingRound(self.problem, self.ref_mod, k, seed)
        specs = rnd.stage(self.inputs / round_dir(k))
        tmp = self.inputs / f"{round_file(k)}.tmp"
        tmp.write_bytes(msgspec.msgpack.encode(specs))
        os.chmod(tmp, 0o644)
        tmp.rename(self.inputs / round_file(k))

    def after_round(self, k: int) -> Profile | str | None:
        v, rnd = self.v, self.round
        assert rnd is not None
        rec = RoundRecord(
            index=k, seed=rnd.case.seed, setup_s=self.clock.setups[k], wall_s=self.clock.walls[k]
        )
        self.log.rounds.append(rec)
        try:
            report = msgspec.msgpack.decode(self.tbox.read_file(report_file(k), 1 << 20), type=ChildRound)
        except (OSError, msgspec.DecodeError) as e:
            return v.profile("runtime_error", f"timing round {k}: no readable report from the harness ({e})")
        if len(report.runs) != self.runs:
            return v.profile(
                "runtime_error",
                f"timing round {k}: the harness reported {len(report.runs)} profiled "
                f"runs; {self.runs} were asked for",
            )
        for i, run in enumerate(report.runs):
            rels = [timed_output(k, i, j) for j in range(min(run.outputs, 64))]
            chk = check_outputs(
                self.problem,
                self.ref_mod,
                rnd.refs,
                self.tbox,
                f"timed:{rnd.case.name}/run{i}",
                rels,
                run.returned_tuple,
                self.cap,
            )
            if not chk.passed:
                return v.profile(
                    "incorrect",
                    f"the output of a timed run is wrong ({chk.case}: {chk.note}): results "
                    "must not depend on being timed",
                    correctness=[*v.checks, chk],
                )
        changed = rnd.changed_files()
        if report.mutated or changed:
            what = ", ".join([*(f"argument {j}" for j in report.mutated), *changed])
            return v.profile(
                "incorrect",
                f"timing round {k}: modified its inputs ({what}) in timed calls; inputs are read-only",
            )
        try:
            rec.summaries = self._summaries(k, report)
        except _Unisolated as e:
            return v.profile("sandbox_error", str(e))
        if any(x is None for x in rec.summaries):
            return STOP  # no complete reading of this round: judged with the rounds before it
        rec.device_s = sum(x.total_time_s for x in rec.summaries if x is not None)
        why = clock_mismatch(
            NEURON_BOUND, [rec.device_s], [rec.wall_s], calls=len(rec.summaries), first_round=k
        )
        if why:
            return v.profile("timing_mismatch", why)
        return STOP if _spread(rec.summaries) <= self.spread_threshold else None

    def _summaries(self, k: int, report: ChildRound) -> list[ProfileSummary | None]:
        """The profiler's reading of round k's runs: copies of the NEFF/NTFF files summarized by
        neuron-profile in `sbox` (a child that loads neither the kernel nor the SDK); without
        `verify_summaries`, the timing child's own reading."""
        if not self.verify_summaries:
            return [
                ProfileSummary(total_time_s=r.total_time_s) if r.total_time_s else None for r in report.runs
            ]
        # copies in a directory of ours (the summary child may read it, not write it)
        rdir = self.sbox.workdir / f"r{k}"
        try:
            rdir.mkdir(mode=0o755)
        except OSError:
            return [None] * len(report.runs)
        pairs: list[tuple[str, str]] = []
        for i in range(len(report.runs)):
            pair = profiled_pair(k, i)
            for rel in pair:
                dst = rdir / rel
                dst.parent.mkdir(mode=0o755, exist_ok=True)
                with (
                    contextlib.suppress(OSError),
                    self.tbox.open_file(rel, max_bytes=_MAX_PROFILE_FILE) as src,
                    open(dst, "xb") as f,
                ):
                    shutil.copyfileobj(src, f)
            pairs.append((f"r{k}/{pair[0]}", f"r{k}/{pair[1]}"))
        try:
            sout = self.sbox.run(
                "hardware_agents.neuron.profile_view:summarize",
                SummaryRequest(neuron_profile=self.neuron_profile or "", pairs=pairs),
            )
        finally:
            shutil.rmtree(rdir, ignore_errors=True)
        if sout.status == "unisolated":
            raise _Unisolated(sout.error)
        texts = sout.decode(SummaryResult).texts if sout.status == "ok" else []
        parsed: list[ProfileSummary | None] = []
        for text in texts[: len(pairs)] + [""] * (len(pairs) - len(texts)):
            try:
                parsed.append(parse_summary(text) if text else None)
            except SummaryError:
                parsed.append(None)
        return parsed


def timed_verdict(
    v: Verdict,
    problem: Problem,
    spec: DeviceSpec,
    out: SandboxOutcome,
    log: TimingLog,
    *,
    max_pct_peak: float,
) -> Profile:
    """The verdict on rounds that all passed their checks: the child's end, then the round
    with the smallest spread, its statistics, the roofline and the plausibility gate."""
    ended = v.ended(
        out, timeout=f"timing: {out.error}", crashed=f"timing: {out.error}", error=f"timing: {out.error}"
    )
    if ended is not None:
        return ended
    res = decoded(v, out, HarnessResult, "runtime_error", "timing: unreadable harness result")
    if isinstance(res, Profile):
        return res
    if res.error is not None or res.timing_error:
        msg = res.timing_error or f"{res.error.type}: {res.error.message}"  # type: ignore[union-attr]
        return v.profile("runtime_error", f"the kernel failed during timing: {msg}{v.tail}")
    strays = v.left_processes(out)
    if strays is not None:
        return strays
    usable = [r for r in log.rounds if r.summaries and all(x is not None for x in r.summaries)]
    if not usable:
        return v.profile(
            "unmeasured",
            f"correct, but no neuron-profile summary could be read from "
            f"{sum(len(r.summaries) for r in log.rounds)} profiled runs{v.tail}",
        )
    best_rec = min(usable, key=lambda r: _spread(r.summaries))
    best = [x for x in best_rec.summaries if x is not None]
    samples = [x.total_time_s * 1e3 for x in best]
    stats = latency_stats(samples, reruns=len(log.rounds) - 1, spread_of=range_spread)
    first, counters = best[0], v.counters
    counters.update(first.counters)
    counters["summary_total_time_ms"] = first.total_time_s * 1e3
    counters["latency_mean_ms"] = statistics.fmean(samples)
    counters["timing_round_kept"] = float(best_rec.index)
    missing = [f for f in COUNTER_FIELDS if f not in first.counters]
    t_meas = stats.median_ms / 1e3
    if not math.isfinite(t_meas) or t_meas <= 0:
        return v.profile("runtime_error", f"non-finite or zero latency ({t_meas} s)")
    achieved(problem, t_meas, counters)
    rounds = ", ".join(f"seed {r.seed}" for r in log.rounds)
    note = f"timed in {len(log.rounds)} round(s) on fresh inputs ({rounds})"
    log_text = f"{note}; profiler summary lacks {', '.join(missing)}" if missing else note
    return speed_verdict(v, problem, spec, stats, max_pct_peak=max_pct_peak, log=log_text)


__all__ = [
    "NEURON_BOUND",
    "CaseJudge",
    "FloorGate",
    "RoundRecord",
    "TimingLog",
    "TimingRounds",
    "check_outputs",
    "judge_correctness",
    "load_output",
    "output_cap",
    "stage_sources",
    "timed_verdict",
]
