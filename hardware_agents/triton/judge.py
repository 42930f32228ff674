"""The Triton agent's steps of the judging pipeline: reading its harness's result.

`TritonJudge.judge(out)` turns one harness child's outcome into the verdict: how the child
ended (`Verdict.ended`), every case's outputs (dtype, shape, values; mutated inputs and
writes outside the outputs; an adversarial case's overflow said as such, its finite misses
judged again with float32's own error as the floor of the bar), a Triton solution that
launched no Triton kernel, and when it timed, its `rounds` (`rounds_judge.RoundsJudge`): the
rounds' protocol, every timed call's outputs at secret positions and the secret calls in
full, the kernel's clock bounded by ours (`timing_clock_mismatch`, the pipeline's
calibrated bound with Triton's parameters), the latency (mean of the rounds' medians) and
the roofline with the peaks of the problem's dtypes. One case's outputs are checked by
`case_check.py`'s rule.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import torch

from accelopt.problem import AxisConst, Problem
from accelopt.profile import Profile, SeedCheck
from hardware_agents.pipeline import fp32, inputgen
from hardware_agents.pipeline.cases import PlannedCase, describe_axes
from hardware_agents.pipeline.rounds import RoundClock
from hardware_agents.pipeline.verdict import Verdict, fail_case
from hardware_agents.sandbox import Sandbox, SandboxOutcome
from hardware_agents.triton.case_check import check_case, load_outputs, overflow_reason, overflowed
from hardware_agents.triton.convention_hint import convention_hint
from hardware_agents.triton.data import CaseData, ProblemData
from hardware_agents.triton.device_judge import CaseRead, InPlace, snapshot
from hardware_agents.triton.harness import COMPILE_ERRORS
from hardware_agents.triton.inputs import INTERPRETER_LIMIT, input_elements
from hardware_agents.triton.records import (
    NO_TRITON_LAUNCH,
    RAN_AHEAD,
    CaseRun,
    CorrectnessReport,
    HarnessRequest,
    HarnessResult,
)
from hardware_agents.triton.rounds_judge import JudgeSettings, RoundsJudge


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
    child that has ended, or step by step (`ended`, `cases`, `untimed`, then its `rounds`'
    `timing`, `clock_bound`, `gate`) as the agent's stages run them."""

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
        # the verdict on the timing rounds (`rounds_judge.py`), with this judge's floor notes
        self.rounds = RoundsJudge(
            verdict, settings, problem, data, box, clock, inplace, self.max_bytes, self.floor_notes
        )

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
        spec, rounds = self.req.timing, self.rounds
        return rounds.timing(res, spec) or rounds.clock_bound(res, spec) or rounds.gate(res, spec)

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


__all__ = ["TritonJudge", "ran_ahead", "too_big_to_interpret"]
