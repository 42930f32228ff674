"""A toy kernel language on the shared judging pipeline (hardware_agents/pipeline/): the test
double of a device agent. The device is fake (a made-up roofline), everything else is real:
the kernel is untrusted Python run by `toy_harness` in the real sandbox, timed in rounds the
agent drives and clocks, judged by the pipeline's verdict, clock bound and plausibility gate.

The agent keeps only its language's steps (staging, launching its harness, reading its
outputs back, its spec); everything else is the pipeline's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from toy_harness import ToyRequest, ToyResult, ToyTiming

from accelopt.problem import (
    AxisVar,
    Definition,
    Problem,
    Roofline,
    Solution,
    TensorSpec,
    Workload,
    one_file_solution,
)
from accelopt.profile import Profile
from hardware_agents.base import HardwareAgent
from hardware_agents.pipeline import compare, inputgen, numpy_ref
from hardware_agents.pipeline.cases import fresh_seed, plan_cases
from hardware_agents.pipeline.clock import ClockBound, clock_mismatch, confirmed
from hardware_agents.pipeline.device_spec import DeviceSpec
from hardware_agents.pipeline.roofline import achieved, speed_verdict
from hardware_agents.pipeline.rounds import RoundClock, drive_timing, drive_to_rounds
from hardware_agents.pipeline.stages import SKIPPED, Outcome, Stages
from hardware_agents.pipeline.stats import latency_stats
from hardware_agents.pipeline.verdict import Verdict, fail_case
from hardware_agents.sandbox import (
    Sandbox,
    SandboxChild,
    SandboxOutcome,
    SandboxPolicy,
    default_base_dir,
    private_dir,
)

HERE = Path(__file__).resolve().parent
TARGET = "toy_harness:run"
# A made-up device on whose roofline an honest numpy kernel sits at a few per cent.
TOY_SPEC = DeviceSpec(
    kind="toy",
    name="toy device",
    peak_bw_bytes_s=100e9,
    peak_matmul_flops=1e12,
    peak_vector_flops=1e11,
    source="made up for the pipeline tests",
)
# Host-clock calls of a Python kernel on a shared 2-core machine: a generous share of noise (a
# preemption inside a round); a clock slowed 2x still misses the bound by far.
TOY_BOUND = ClockBound(over=0.02, share=0.25)


def toy_problem(n: int = 1 << 20) -> Problem:
    """out = 2x + 1 on n floats."""
    d = Definition(
        name="toy_scale_shift",
        op_type="elementwise",
        axes={"N": AxisVar()},
        inputs={"x": TensorSpec(shape=["N"], dtype="float32")},
        outputs={"out": TensorSpec(shape=["N"], dtype="float32")},
        reference="def run(x):\n    return 2 * x + 1\n",
        x_numpy_reference="def run(x):\n    return 2 * x + 1\n",
        x_roofline=Roofline(flops_vector="2*N", bytes_min="8*N"),
    )
    base = toy_solution("toy_scale_shift", HONEST)
    return Problem(definition=d, workload=Workload(uuid="toy", axes={"N": n}), baseline=base)


HONEST = "import numpy as np\n\ndef kernel(x):\n    return (2 * x + 1).astype(np.float32)\n"


def toy_solution(problem: str, source: str, name: str = "candidate") -> Solution:
    return one_file_solution(
        problem,
        source,
        entry_point="kernel.py::kernel",
        language="toy",
        device="toy",
        name=name,
        author="test",
    )


def _load(box: Sandbox, rel: str) -> np.ndarray:
    with box.open_file(rel, max_bytes=1 << 26) as f:
        return np.load(f, allow_pickle=False)


class ToyAgent(HardwareAgent):
    kind: ClassVar[str] = "toy"
    languages: ClassVar[tuple[str, ...]] = ("toy",)

    def __init__(
        self,
        *,
        spec: DeviceSpec = TOY_SPEC,
        timeout_s: float = 60.0,
        max_pct_peak: float = 1.25,
        rounds: int = 3,
        calls: int = 20,
        calibration: int = 2,
        sandbox_options: dict[str, Any] | None = None,
        meddle: Callable[[int, int], None] | None = None,
    ) -> None:
        self._spec, self.timeout_s, self.max_pct_peak = spec, timeout_s, max_pct_peak
        self.rounds, self.calls, self.calibration = rounds, calls, calibration
        self.sandbox_options = dict(sandbox_options or {})
        self.meddle = meddle  # tests: meddle(k, pid) while the child waits for round k (a foreign signal)

    @property
    def spec(self) -> DeviceSpec:
        return self._spec

    def toolchain(self) -> dict[str, str]:
        return {"numpy": np.__version__}

    def _profile(
        self, problem: Problem, solution: Solution, seeds: tuple[int, ...], timeout: float, measure: bool
    ) -> Profile:
        """As the real agents do: a `timing_mismatch` stands only when a second profile finds
        one too (`clock.confirmed`: a loaded host can stretch one round past its allowance)."""
        prof = super()._profile(problem, solution, seeds, timeout, measure)
        if prof.status != "timing_mismatch":
            return prof
        return confirmed(prof, super()._profile(problem, solution, seeds, timeout, measure))

    def stages(
        self, problem: Problem, solution: Solution, seeds: tuple[int, ...], timeout_s: float, measure: bool
    ) -> Stages:
        return ToyStages(self, problem, solution, seeds, timeout_s, measure)


class ToyStages(Stages[ToyAgent]):
    """The toy language's hooks (`hardware_agents/pipeline/stages.py`): the cases judged while
    the child is held stopped before timing round 0 (untimed: once it has ended), then the
    rounds, the clock bound and the gate. It compiles in the child (no build stage)."""

    def setup(self) -> None:
        self.v = Verdict(self.agent.fail)
        self.held = contextlib.ExitStack()
        self.clock = RoundClock()
        self.child: SandboxChild | None = None
        self.out: SandboxOutcome | None = None
        self.round_refs: dict[int, dict[str, np.ndarray]] = {}
        self.gated: Profile | None = None

    def static_checks(self) -> Outcome:
        if self.solution.spec.language != "toy":
            return self.v.profile(
                "compile_error", f"the toy agent runs toy kernels, not {self.solution.spec.language!r}"
            )
        return None

    def stage_inputs(self) -> Outcome:
        problem, agent = self.problem, self.agent
        plan = self.plan = plan_cases(problem, self.seeds)
        self.inputs = {pc.name: inputgen.make_inputs(problem, pc.case) for pc in plan}
        self.refs = {
            pc.name: numpy_ref.reference_outputs(problem, self.inputs[pc.name]) for pc in plan
        }  # ours
        rounds_dir = self.rounds_dir = private_dir(default_base_dir(), "accelopt-toy-rounds-")
        self.held.callback(shutil.rmtree, rounds_dir, ignore_errors=True)
        os.chmod(rounds_dir, 0o755)  # the child reads the rounds' inputs; only we write them
        policy = SandboxPolicy(
            wall_timeout_s=self.timeout_s,
            python_path=(str(HERE),),
            read_paths=(str(rounds_dir),),
            **agent.sandbox_options,
        )
        box = self.box = self.held.enter_context(Sandbox(policy))
        box.workdir.joinpath("kernel.py").write_text(self.solution.sources[0].content)
        box.give("kernel.py")
        for name, arrays in self.inputs.items():
            np.save(box.workdir / f"case-{name}.npy", arrays["x"])
            box.give(f"case-{name}.npy")
        self.timing = (
            ToyTiming(
                rounds=agent.rounds,
                calls=agent.calls,
                calibration=agent.calibration,
                inputs_dir=str(rounds_dir),
            )
            if self.measure
            else None
        )
        return None

    def correctness(self) -> Outcome:
        req = ToyRequest(
            kernel_file=str(self.box.workdir / "kernel.py"), cases=list(self.inputs), timing=self.timing
        )
        if self.timing is None:
            self.out = self.box.run(TARGET, req)
            return self._ended() or self._cases()
        self.child = self.box.spawn(TARGET, req)
        self.held.callback(self.child.finish)
        if not drive_to_rounds(
            self.child, self.clock, calibration=self.timing.calibration, untimed_step=True
        ):
            self.out = self.child.finish()
            return self._ended() or self._cases()
        if self._cases() is None:  # judged while it is held stopped before round 0
            return None
        self.out = self.child.finish()  # a wrong kernel is not timed; its end is part of the verdict
        self.v.record_outcome(self.out)
        if self.out.freeze_breach is not None:
            return self.v.ran_while_stopped(self.out.freeze_breach)
        return self.v.left_processes(self.out) or self._cases()

    def _ended(self) -> Profile | None:
        assert self.out is not None
        self.v.record_outcome(self.out)
        return self.v.ended(
            self.out, compile_error=self.out.error_type == "ToyCompileError"
        ) or self.v.left_processes(self.out)

    def _cases(self) -> Profile | None:
        """Every case judged here, against references the child never saw."""
        v = self.v
        v.checks.clear()
        for name in self.inputs:
            chk = compare.compare_outputs(
                name,
                {"out": _load(self.box, f"out-{name}.npy")},
                self.refs[name],
                compare.tolerance_of(self.problem.definition),
            )
            if not np.array_equal(self.inputs[name]["x"], _load(self.box, f"in-{name}.npy")):
                fail_case(chk, "modified its input x; inputs are read-only")
            v.checks.append(chk)
        return v.wrong_cases()

    def timing_rounds(self) -> Outcome:
        if self.timing is None:
            return SKIPPED
        if self.out is None:
            assert self.child is not None
            child, problem, v, used = self.child, self.problem, self.v, {pc.case.seed for pc in self.plan}

            def hand_over(k: int) -> None:  # fresh inputs, drawn now
                seed = fresh_seed(used)
                used.add(seed)
                x = inputgen.make_inputs(problem, inputgen.InputCase(name=f"timing-r{k}", seed=seed))
                self.round_refs[k] = numpy_ref.reference_outputs(problem, x)
                np.save(self.rounds_dir / f"round-{k}.npy", x["x"])
                os.chmod(self.rounds_dir / f"round-{k}.npy", 0o644)
                if self.agent.meddle is not None:
                    self.agent.meddle(k, child.pid)

            def after_round(k: int) -> Profile | None:  # its last call's output, checked now
                got = {"out": _load(self.box, f"round-{k}.npy")}
                chk = compare.compare_outputs(
                    f"timed:r{k}", got, self.round_refs[k], compare.tolerance_of(problem.definition)
                )
                if chk.passed:
                    return None
                v.checks.append(chk)
                return v.profile("incorrect", f"the output of a timed call is wrong ({chk.note})")

            failed = drive_timing(
                child, self.clock, rounds=self.timing.rounds, hand_over=hand_over, after_round=after_round
            )
            self.out = child.finish()
            if (
                failed is not None and self.out.freeze_breach is None
            ):  # a round's verdict (the child was killed)
                self.v.record_outcome(self.out)
                return failed
        return self._ended()

    def clock_bound(self) -> Outcome:
        if self.timing is None:
            return SKIPPED
        assert self.out is not None
        self.res = self.out.decode(ToyResult)
        why = clock_mismatch(
            TOY_BOUND,
            self.res.rounds_s,
            self.clock.walls,
            calls=self.agent.calls,
            untimed_per_call=self.clock.untimed_per_call(self.agent.calls),
            setups=self.clock.setups,
            per_setup_s=0.25,
            counters=self.v.counters,
        )
        return self.v.profile("timing_mismatch", why) if why else None

    def roofline_gate(self) -> Outcome:
        if self.timing is None:
            return SKIPPED
        stats = latency_stats([t / self.agent.calls * 1e3 for t in self.res.rounds_s])
        achieved(self.problem, stats.median_ms / 1e3, self.v.counters)
        prof = speed_verdict(
            self.v, self.problem, self.agent.spec, stats, max_pct_peak=self.agent.max_pct_peak
        )
        if not prof.passed:
            return prof
        self.gated = prof
        return None

    def verdict(self) -> Profile:
        return self.gated or self.v.profile("unmeasured", "correct; timing not requested")

    def release(self) -> None:
        self.held.close()
