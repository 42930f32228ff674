"""The Triton agent's hooks for the stages of a profile (`hardware_agents/pipeline/stages.py`).

static_checks  Python/Triton, the entry point, `static.check_sources`, the cases planned
               (too big for the interpreter: `unchecked`)
build          skipped: Triton compiles in the harness child at the kernel's first launch
               (its compile errors are the correctness stage's `compile_error`)
stage_inputs   the cases' inputs and references, each timing round's inputs (`data.py`); where
               the judge compares in place, its region (`device_judge.py`)
correctness    the harness child (a spare where one is ready): timed, the agent drives it
               through its calibration rounds and the correctness cases to its stop before
               timing round 0, and judges the cases there, while it is held stopped (its
               report, `records.CORRECTNESS_REPORT`); a wrong kernel is killed there and
               never timed. Untimed, the child runs to its end and is judged then
timing_rounds  the rounds driven to the child's end (`pipeline/rounds.py`), its end, the
               correctness report unchanged in its final result, the rounds' protocol and
               every timed call's outputs (`judge.TritonJudge.timing`)
clock_bound    the kernel's clock bounded by ours (`judge.timing_clock_mismatch`)
roofline_gate  the latency, the roofline of the problem's dtypes and the gate
verdict        passed, or unmeasured (not timed: why)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import msgspec
import torch

from accelopt.problem import Problem, ProblemFileError
from accelopt.profile import Profile
from hardware_agents.pipeline import cases, inputgen
from hardware_agents.pipeline.cases import PlannedCase
from hardware_agents.pipeline.clock import ClockBound
from hardware_agents.pipeline.phases import Phases
from hardware_agents.pipeline.rounds import STOP, RoundClock, drive_timing, drive_to_rounds
from hardware_agents.pipeline.stages import SKIPPED, Outcome, Stages
from hardware_agents.pipeline.verdict import Verdict
from hardware_agents.sandbox import Sandbox, SandboxChild, SandboxOutcome, SandboxPolicy
from hardware_agents.triton.boundaries import boundary_workloads
from hardware_agents.triton.children import HARNESS_TARGET, Children, Stage
from hardware_agents.triton.data import DataCache, ProblemData, save_readable
from hardware_agents.triton.device_judge import InPlace, judge_data
from hardware_agents.triton.harness import PACKAGE
from hardware_agents.triton.judge import TritonJudge, too_big_to_interpret
from hardware_agents.triton.records import (
    CORRECTNESS_REPORT,
    END_FILE,
    MAX_READINGS_BYTES,
    MAX_REPORT_BYTES,
    CorrectnessReport,
    HarnessRequest,
    HarnessResult,
    TimingRun,
    calibration_file,
    checks_file,
    readings_file,
    round_file,
)
from hardware_agents.triton.reference import RefRequest
from hardware_agents.triton.request import RequestSettings, harness_request, timing_plan
from hardware_agents.triton.rounds_judge import JudgeSettings
from hardware_agents.triton.solution_cache import SolutionCache
from hardware_agents.triton.static import check_sources


def plan_triton_cases(
    problem: Problem, seeds: Sequence[int], on_gpu: bool
) -> tuple[list[PlannedCase], list[str]]:
    """The cases of one profile (`pipeline.cases.plan_cases`) and the names of the timing
    contents (the seed cases of the first workload). GPU: the problem's workload with every
    seed and adversarial case, one seed at each check workload. Interpreter: the same with the
    check workloads in place of the problem's (which may be far too large to interpret); their
    boundary workloads are checked apart (`plan_boundary_cases`)."""
    workloads = (
        [problem.workload, *problem.check_workloads]
        if on_gpu
        else list(problem.check_workloads) or [problem.workload]
    )
    plan = cases.plan_cases(problem, seeds, workloads)
    return plan, [p.name for p in plan if p.workload is workloads[0] and not p.case.adversarial]


def plan_boundary_cases(problem: Problem, seeds: Sequence[int]) -> list[PlannedCase]:
    """The interpreter's cases at the boundary workloads of the problem's check workloads
    (`boundaries.boundary_workloads`: rows across 64 and 128, a partial tile after whole
    ones), the first seed at each. The agent runs them in a child of their own once the
    profile's own cases pass, so that the profile's child makes the calls it makes on a GPU
    (the same checks, then the timed calls)."""
    workloads = boundary_workloads(problem)
    first = inputgen.input_cases(problem.definition, seeds[:1])[0]
    return [
        PlannedCase(
            name=cases.case_name(w.x_label or "", first), workload=w, case=first, label=w.x_label or ""
        )
        for w in workloads
    ]


def hand_over_file(src: str | Path, path: Path) -> None:
    """A round's inputs file, copied where the child reads it, read-only to it (whatever the
    umask: the child runs as another uid)."""
    shutil.copyfile(src, path)
    os.chmod(path, 0o644)


class TritonDevice(RequestSettings, Protocol):
    """The Triton agent as its stages see it (`agent.TritonAgent`): its public device context
    (and the options its requests are made from, `request.RequestSettings`)."""

    interpreter_timing: bool
    device_judge: bool
    data: DataCache
    data_roots: list[str]
    children: Children
    max_pct_peak: float
    clock_bound: ClockBound | None
    mode_note: str
    solution_cache: SolutionCache

    @property
    def languages(self) -> tuple[str, ...]: ...
    def fail(
        self, status: str, log: str, extra_tools: dict[str, str] | None = None, **kw: Any
    ) -> Profile: ...
    def run_reference(
        self, request: RefRequest, read_paths: Sequence[str]
    ) -> dict[str, dict[str, torch.Tensor]]: ...
    def sandbox_policy(self, timeout: float, read_paths: Sequence[str], file_bytes: int) -> SandboxPolicy: ...


class TritonStages(Stages[TritonDevice]):
    upcast_bf16 = False  # the bf16 re-run: a case's bf16 tiles upcast to fp32 in the interpreter
    boundaries = False  # the interpreter's boundary cases (`plan_boundary_cases`), untimed

    def setup(self) -> None:
        self.v = Verdict(self.agent.fail)
        self.phases = Phases({})  # our clock of the data and the judging: into the profile at the end
        self.clock = RoundClock()
        self.held = contextlib.ExitStack()  # the rounds' folder, the box, the child (in that order out)
        self.slot = contextlib.ExitStack()  # the GPU (or the interpreter's turn) the child holds
        self.entry_path = self.symbol = ""
        self.plan: list[PlannedCase] = []
        self.contents: list[str] = []
        self.data: ProblemData | None = None
        self.request: HarnessRequest | None = None
        self.policy: SandboxPolicy | None = None
        self.stage: Stage = {}
        self.box: Sandbox | None = None
        self.child: SandboxChild | None = None
        self.gpu: int | None = None  # the GPU the child holds (None: the interpreter's)
        self.judge: TritonJudge | None = None
        self.inplace: InPlace | None = None  # the judge's region (`device_judge.py`), where on
        self.out: SandboxOutcome | None = None  # the child's end, once it ended
        self.report: CorrectnessReport | None = None  # judged while the child was stopped
        self.recheck = False  # its cases judged again once it ended (one needs the float32 floor)
        self.res: HarnessResult | None = None
        self.gated: Profile | None = None

    @property
    def needs_launch(self) -> bool:
        return self.solution.spec.language == "triton"

    # --- static checks, inputs ------------------------------------------------------------------

    def static_checks(self) -> Profile | None:
        agent, solution, fail = self.agent, self.solution, self.agent.fail
        if solution.spec.language not in agent.languages:
            return fail(
                "compile_error",
                f"the Triton agent runs Python/Triton solutions; this one is {solution.spec.language!r}",
            )
        try:
            entry = solution.entry_file()
            self.symbol = solution.entry_symbol
        except (ProblemFileError, IndexError) as e:
            return fail("compile_error", f"entry point {solution.spec.entry_point!r}: {e}")
        if not entry.path.endswith(".py"):
            return fail("compile_error", f"entry file {entry.path!r} is not a Python module")
        self.entry_path = entry.path
        hits = check_sources({s.path: s.content for s in solution.sources})
        if hits:
            return fail("incorrect", "rejected by the static checks:\n" + "\n".join(hits))
        if self.boundaries:
            self.plan, self.contents = plan_boundary_cases(self.problem, self.seeds), []
        else:
            self.plan, self.contents = plan_triton_cases(self.problem, self.seeds, agent.mode == "cuda")
        too_big = too_big_to_interpret(self.problem, self.plan, agent.mode, agent.spec.name)
        return fail("unchecked", too_big) if too_big else None

    def stage_inputs(self) -> Profile | None:
        agent, problem = self.agent, self.problem
        timed = self.measure and (agent.mode == "cuda" or agent.interpreter_timing)
        tplan = timing_plan(agent, problem, self.plan, self.contents[0]) if timed else None
        with self.phases("data"):
            data = self.data = agent.data.get(
                problem,
                self.plan,
                agent.run_reference,
                device=agent.mode,
                data_roots=agent.data_roots,
                timing=tplan,
            )
        request = harness_request(
            agent,
            problem,
            self.solution,
            data,
            self.contents,
            self.seeds[0],
            tplan,
            self.entry_path,
            self.symbol,
        )
        if agent.device_judge:  # the judge owns the buffers: its region, inputs written, rest poisoned
            with self.phases("judge"):
                self.inplace = InPlace(judge_data(data, torch.device("cpu")), data, request)
            self.held.callback(self.inplace.close)
            request = msgspec.structs.replace(request, buffers=self.inplace.handle)
        self.request = msgspec.structs.replace(request, upcast_bf16=self.upcast_bf16)
        if self.request.timing is not None:
            self.held.callback(shutil.rmtree, self.request.timing.inputs_dir, ignore_errors=True)
        self.stage = {f"{PACKAGE}/{s.path}": s.content for s in self.solution.sources}
        self.stage.setdefault(f"{PACKAGE}/__init__.py", "")
        cached = agent.solution_cache.staged(self.solution)  # its compiles of earlier profiles
        self.stage.update(cached)
        self.v.counters["solution_cache_files"] = float(len(cached))
        out_bytes = max(sum(r.nbytes for c in data.by_name.values() for r in c.ref64.values()), 1)
        rounds_dir = [self.request.timing.inputs_dir] if self.request.timing is not None else []
        self.policy = agent.sandbox_policy(
            self.timeout_s, [str(data.dir), *rounds_dir], 4 * out_bytes + (64 << 20)
        )
        return None

    # --- correctness ----------------------------------------------------------------------------

    def correctness(self) -> Profile | None:
        agent, request, policy = self.agent, self.request, self.policy
        assert request is not None and policy is not None
        if request.timing is None:  # nothing to drive: the child runs to its end
            fds = self.inplace.pass_fds if self.inplace is not None else ()
            out, box = agent.children.run(HARNESS_TARGET, request, policy, self.stage, pass_fds=fds)
            self.held.callback(box.close)
            self.box, self.out, judge = box, out, self._judge(box)
            return self._guarded(lambda: judge.ended(out) or self._cases(out))
        box, child = self._spawn()
        judge = self._judge(box)
        assert self.data is not None
        inputs, cal_file = Path(request.timing.inputs_dir), self.data.calibration_file
        if not drive_to_rounds(
            child,
            self.clock,
            calibration=request.timing.calibration_rounds,
            untimed_step=True,
            hand_over_calibration=lambda k: hand_over_file(cal_file, inputs / calibration_file(k)),
        ):  # it ended before its first timing round (a failed case, a crash, ran while stopped)
            out = self._finish_child()
            return self._guarded(lambda: judge.ended(out) or self._cases(out))
        return self._guarded(self._judge_stopped)

    def _cases(self, out: SandboxOutcome) -> Profile | None:
        assert self.judge is not None
        with self.phases("judge"):
            return self.judge.cases(out.decode(HarnessResult), out, self.needs_launch)

    def _judge_stopped(self) -> Profile | None:
        """The correctness cases judged while the child is held stopped before timing round 0
        (its report, bounded; the outputs it names): a wrong kernel is killed here, and its
        end (a freeze breach, processes it left, its output) is part of the verdict."""
        assert self.box is not None and self.judge is not None
        judge = self.judge
        with self.phases("judge"):
            report = msgspec.msgpack.decode(
                self.box.read_file(CORRECTNESS_REPORT, MAX_REPORT_BYTES), type=CorrectnessReport
            )
            judge.floor_now = False  # the floor's reference child needs the device this child holds
            judge.kept = {}  # the outputs as read now, while it cannot change them
            try:
                failed = judge.cases(report, None, self.needs_launch)
            finally:
                judge.floor_now = True
            if failed is None or judge.floor_deferred:
                # correct, or wrong only where the float32 floor may forgive it: timed, and
                # that case judged again with the floor once the child has ended, on the
                # outputs read now (the child may rewrite its files once it runs again)
                self.report, self.recheck = report, judge.floor_deferred
                if self.recheck:
                    self.v.counters["correctness_after_rounds"] = 1.0
                    judge.freeze_reads()  # copied out of the region while it still cannot run
                    judge.sealed = True
                else:
                    judge.kept = None
                return None
            judge.sealed = True
        out = self._finish_child()
        self.v.record_outcome(out)
        self.v.counters["sandbox_wall_s"] = out.wall_s
        if out.freeze_breach is not None:
            return self.v.ran_while_stopped(out.freeze_breach)
        with self.phases("judge"):
            return self.judge.cases(report, out, self.needs_launch)  # again, with its end and output

    # --- timing ---------------------------------------------------------------------------------

    def timing_rounds(self) -> Outcome:
        request, data = self.request, self.data
        assert request is not None and data is not None and self.judge is not None
        if request.timing is None:
            return SKIPPED
        if self.out is None:
            assert self.child is not None
            inputs, rounds = Path(request.timing.inputs_dir), data.rounds
            # round k's file goes to `inputs` (ours, read-only to the child) only once the child
            # waits for it, and what to send back of round k's outputs only once round k is over
            spec = request.timing
            early = drive_timing(
                self.child,
                self.clock,
                rounds=spec.trials + spec.extra_rounds,
                hand_over=lambda k: hand_over_file(rounds[k].file, inputs / round_file(k)),
                after_round=self._after_round,
                at_end=lambda: save_readable({}, inputs / END_FILE),
            )
            out = self._finish_child()
            if early is not None:  # the readings could not be read: the verdict, unless it ran while stopped
                self.v.record_outcome(out)
                return self.v.ran_while_stopped(out.freeze_breach) if out.freeze_breach is not None else early
        return self._guarded(self._judge_rounds)

    def _after_round(self, k: int) -> Profile | str | None:
        """Round k is over and the child stopped: its readings read now (kept, to compare with its
        final result), the round judged (`RoundsJudge.round_rejected`), what to send back of its
        outputs named. A rejected round is not counted and is followed by another (an extra
        round, drawn with the others, which the child cannot tell apart), at most
        `extra_rounds` in all; a rejection stands (`timing_mismatch`, once the rounds' outputs
        are judged: a wrong kernel is `incorrect` first) where the rounds left cannot make up
        the count (a clock that lies in every round: after `extra_rounds` + 1 rounds): STOP
        then, and once `trials` rounds count."""
        assert self.box is not None and self.judge is not None and self.data is not None
        spec, rounds, v = self.request.timing if self.request else None, self.judge.rounds, self.v
        assert spec is not None
        try:  # the kernel's process wrote them: anything it left is judged, nothing raises here
            run = msgspec.msgpack.decode(
                self.box.read_file(readings_file(k), MAX_READINGS_BYTES), type=TimingRun
            )
            why = rounds.round_rejected(k, run, spec)
        except (OSError, ValueError, ArithmeticError, msgspec.DecodeError) as e:
            return v.profile(
                "runtime_error", f"the harness left no readable readings of timing round {k} ({e})"
            )
        rounds.readings[k] = run
        if self.inplace is not None and spec.keep_outputs:  # read now, while it cannot run
            try:
                with self.phases("judge"):
                    rounds.read_round(k, run, spec)
            except (ValueError, IndexError, RuntimeError) as e:
                return v.profile("runtime_error", f"the outputs of timing round {k} could not be read ({e})")
        if why is not None:
            rounds.rejected[k] = why
            left = spec.trials + spec.extra_rounds - (k + 1)
            counted = k + 1 - len(rounds.rejected)
            if counted + left < spec.trials:  # it stands: no more rounds
                earlier = "".join(
                    f"\n(round {j} too: {w.splitlines()[0]})" for j, w in rounds.rejected.items() if j != k
                )
                rounds.stands = f"{why}{earlier}"  # the verdict once its outputs are judged (`timing`)
        if self.inplace is None or not spec.keep_outputs:  # else the child never learns the positions
            save_readable(self.data.rounds[k].checks_payload(), Path(spec.inputs_dir) / checks_file(k))
        return STOP if rounds.stands or k + 1 - len(rounds.rejected) >= spec.trials else None

    def _judge_rounds(self) -> Profile | None:
        assert self.out is not None and self.judge is not None and self.request is not None
        out, judge, v = self.out, self.judge, self.v
        with self.phases("judge"):
            failed = judge.ended(out)
            if failed is not None:
                return failed
            res = self.res = out.decode(HarnessResult)
            if self.report is not None and (
                res.cases != self.report.cases
                or res.config_runs != self.report.config_runs
                or res.autotune != self.report.autotune
            ):
                return v.profile(
                    "runtime_error",
                    "the harness's final result does not repeat the correctness cases it reported "
                    f"before it was timed{v.tail}",
                )
            if self.recheck:  # a case that needs the float32 floor: judged now, its child gone
                assert self.report is not None
                failed = judge.cases(self.report, out, self.needs_launch)
                if failed is not None:
                    return failed
            elif self.report is not None:  # judged while it was stopped; what it left is known only now
                strays = v.left_processes(out)
                if strays is not None:
                    return strays
            assert self.request.timing is not None
            return judge.rounds.timing(res, self.request.timing)

    def clock_bound(self) -> Outcome:
        if self.res is None or self.request is None or self.request.timing is None:
            return SKIPPED
        assert self.judge is not None
        res, spec, judge = self.res, self.request.timing, self.judge
        return self._guarded(lambda: judge.rounds.clock_bound(res, spec))

    def roofline_gate(self) -> Outcome:
        if self.res is None or self.request is None or self.request.timing is None:
            return SKIPPED
        assert self.judge is not None
        res, spec, judge = self.res, self.request.timing, self.judge
        prof = self._guarded(lambda: judge.rounds.gate(res, spec))
        if prof is not None and not prof.passed:
            return prof
        self.gated = prof
        return None

    def verdict(self) -> Profile:
        assert self.judge is not None
        return self.gated or self.judge.untimed()

    # --- the child, the end -----------------------------------------------------------------------

    def _judge(self, box: Sandbox) -> TritonJudge:
        agent = self.agent
        assert self.data is not None and self.request is not None
        settings = JudgeSettings(
            mode=agent.mode,
            spec=agent.spec,
            max_pct_peak=agent.max_pct_peak,
            sample_positions=agent.sample_positions,
            clock_bound=agent.clock_bound,
            mode_note=agent.mode_note,
        )
        self.judge = TritonJudge(
            self.v, settings, self.problem, self.data, self.request, box, self.clock, self.inplace
        )
        return self.judge

    def _spawn(self) -> tuple[Sandbox, SandboxChild]:
        """The harness child (a spare where one is ready), holding its GPU until it ends."""
        agent, request, policy = self.agent, self.request, self.policy
        assert request is not None and policy is not None
        idx = self.slot.enter_context(agent.children.gpu())
        t0 = time.perf_counter()
        fds = self.inplace.pass_fds if self.inplace is not None else ()
        # a spare started before the region existed cannot inherit its fd: a fresh child then
        claimed = None if fds else agent.children.claim_spare(idx, "harness", request, policy, self.stage)
        if claimed is not None:
            box, child = claimed
            self.held.callback(box.close)
        else:
            box = agent.children.box(policy, self.stage)
            self.held.callback(box.close)
            env = {"CUDA_VISIBLE_DEVICES": str(idx)} if idx is not None else None
            child = box.spawn(HARNESS_TARGET, request, extra_env=env, pass_fds=fds)
        self.held.callback(child.finish)
        self.clock.start_s = time.perf_counter() - t0
        # the next spare starts once this child has ended (`_finish_child`): its start (an
        # interpreter, CUDA's context) would run beside this child's calibration and rounds
        self.gpu, self.box, self.child = idx, box, child
        return box, child

    def _finish_child(self) -> SandboxOutcome:
        """The child's end (killed if it still runs); its GPU is free from here on."""
        assert self.child is not None
        self.out = self.child.finish()
        self.agent.children.start_spare(self.gpu)  # warms up while this profile is judged
        self.slot.close()
        return self.out

    def _guarded(self, step: Callable[[], Profile | None]) -> Profile | None:
        """`step`, or `runtime_error` when what the harness left cannot be read: a result the
        kernel tampered with must not crash the agent."""
        try:
            return step()
        except Exception as e:
            log = self.out.log if self.out is not None else ""
            return self.agent.fail(
                "runtime_error", f"invalid harness result ({type(e).__name__}: {e})\n{log}"
            )

    def finish(self, prof: Profile) -> Profile:
        if self.box is not None and self.out is not None:  # the child has ended: its compiles kept
            self.agent.solution_cache.keep(self.solution, self.box.workdir)
        self.release()
        if self.request is None:  # ended by a static check: nothing ran
            return prof
        prof.counters.update(
            {
                "phase_data_s": self.phases.counters.get("phase_data_s", 0.0),
                **self.clock.phases(),
                "phase_judge_s": self.phases.counters.get("phase_judge_s", 0.0),
            }
        )
        return prof

    def release(self) -> None:
        try:
            self.held.close()
        finally:
            self.slot.close()


__all__ = [
    "TritonDevice",
    "TritonStages",
    "hand_over_file",
    "plan_boundary_cases",
    "plan_triton_cases",
]
