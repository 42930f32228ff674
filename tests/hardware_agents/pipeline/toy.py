"""A toy kernel language on the shared judging pipeline (hardware_agents/pipeline/): the test
double of a device agent. The device is fake (a made-up roofline), everything else is real:
the kernel is untrusted Python run by `toy_harness` in the real sandbox, timed in rounds the
agent drives and clocks, judged by the pipeline's verdict, clock bound and plausibility gate.

The agent keeps only its language's steps (staging, launching its harness, reading its
outputs back, its spec); everything else is the pipeline's.
"""

from __future__ import annotations

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
from hardware_agents import validity
from hardware_agents.base import DeviceSpec, HardwareAgent
from hardware_agents.pipeline.cases import fresh_seed, plan_cases
from hardware_agents.pipeline.clock import ClockBound, clock_mismatch, confirmed
from hardware_agents.pipeline.roofline import achieved, speed_verdict
from hardware_agents.pipeline.rounds import RoundClock, drive_rounds
from hardware_agents.pipeline.stats import latency_stats
from hardware_agents.pipeline.verdict import Verdict, fail_case
from hardware_agents.sandbox import Sandbox, SandboxPolicy, default_base_dir, private_dir

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
        prof = self._profile_once(problem, solution, seeds, timeout, measure)
        if prof.status != "timing_mismatch":
            return prof
        return confirmed(prof, self._profile_once(problem, solution, seeds, timeout, measure))

    def _profile_once(
        self, problem: Problem, solution: Solution, seeds: tuple[int, ...], timeout: float, measure: bool
    ) -> Profile:
        v = Verdict(self._fail)
        if solution.spec.language != "toy":
            return v.profile(
                "compile_error", f"the toy agent runs toy kernels, not {solution.spec.language!r}"
            )
        plan = plan_cases(problem, seeds)
        inputs = {pc.name: validity.make_inputs(problem, pc.case) for pc in plan}
        refs = {pc.name: validity.reference_outputs(problem, inputs[pc.name]) for pc in plan}  # ours alone
        rounds_dir = private_dir(default_base_dir(), "accelopt-toy-rounds-")
        os.chmod(rounds_dir, 0o755)  # the child reads the rounds' inputs; only we write them
        policy = SandboxPolicy(
            wall_timeout_s=timeout,
            python_path=(str(HERE),),
            read_paths=(str(rounds_dir),),
            **self.sandbox_options,
        )
        try:
            with Sandbox(policy) as box:
                box.workdir.joinpath("kernel.py").write_text(solution.sources[0].content)
                box.give("kernel.py")
                for name, arrays in inputs.items():
                    np.save(box.workdir / f"case-{name}.npy", arrays["x"])
                    box.give(f"case-{name}.npy")
                timing = (
                    ToyTiming(
                        rounds=self.rounds,
                        calls=self.calls,
                        calibration=self.calibration,
                        inputs_dir=str(rounds_dir),
                    )
                    if measure
                    else None
                )
                req = ToyRequest(
                    kernel_file=str(box.workdir / "kernel.py"), cases=list(inputs), timing=timing
                )
                clock = RoundClock()
                failed: Profile | None = None
                round_refs: dict[int, dict[str, np.ndarray]] = {}
                if timing is None:
                    out = box.run(TARGET, req)
                else:
                    used = {pc.case.seed for pc in plan}

                    def hand_over(k: int) -> None:  # fresh inputs, drawn now
                        seed = fresh_seed(used)
                        used.add(seed)
                        x = validity.make_inputs(problem, validity.InputCase(name=f"timing-r{k}", seed=seed))
                        round_refs[k] = validity.reference_outputs(problem, x)
                        np.save(rounds_dir / f"round-{k}.npy", x["x"])
                        os.chmod(rounds_dir / f"round-{k}.npy", 0o644)
                        if self.meddle is not None:
                            self.meddle(k, child.pid)

                    def after_round(k: int) -> Profile | None:  # its last call's output, checked now
                        got = {"out": _load(box, f"round-{k}.npy")}
                        chk = validity.compare_outputs(
                            f"timed:r{k}", got, round_refs[k], validity.tolerance_of(problem.definition)
                        )
                        if chk.passed:
                            return None
                        v.checks.append(chk)
                        return v.profile("incorrect", f"the output of a timed call is wrong ({chk.note})")

                    child = box.spawn(TARGET, req)
                    try:
                        failed = drive_rounds(
                            child,
                            clock,
                            rounds=self.rounds,
                            hand_over=hand_over,
                            after_round=after_round,
                            calibration=self.calibration,
                            untimed_step=True,
                        )
                    finally:
                        out = child.finish()
                v.record_outcome(out)
                if (
                    failed is not None and out.freeze_breach is None
                ):  # a round's verdict (the child was killed)
                    return failed
                ended = v.ended(out, compile_error=out.error_type == "ToyCompileError") or v.left_processes(
                    out
                )
                if ended is not None:
                    return ended
                for name in inputs:  # judged here, against references the child never saw
                    chk = validity.compare_outputs(
                        name,
                        {"out": _load(box, f"out-{name}.npy")},
                        refs[name],
                        validity.tolerance_of(problem.definition),
                    )
                    if not np.array_equal(inputs[name]["x"], _load(box, f"in-{name}.npy")):
                        fail_case(chk, "modified its input x; inputs are read-only")
                    v.checks.append(chk)
        finally:
            shutil.rmtree(rounds_dir, ignore_errors=True)
        wrong = v.wrong_cases()
        if wrong is not None:
            return wrong
        if timing is None:
            return v.profile("unmeasured", "correct; timing not requested")
        res = out.decode(ToyResult)
        why = clock_mismatch(
            TOY_BOUND,
            res.rounds_s,
            clock.walls,
            calls=self.calls,
            untimed_per_call=clock.untimed_per_call(self.calls),
            setups=clock.setups,
            per_setup_s=0.25,
            counters=v.counters,
        )
        if why:
            return v.profile("timing_mismatch", why)
        stats = latency_stats([t / self.calls * 1e3 for t in res.rounds_s])
        achieved(problem, stats.median_ms / 1e3, v.counters)
        return speed_verdict(v, problem, self._spec, stats, max_pct_peak=self.max_pct_peak)
