"""The CPU agent's hooks for the stages of a profile (`hardware_agents/pipeline/stages.py`).

static_checks  language `c`, no lower-precision types or intrinsics, the entry symbol
build          gcc in the sandbox, cached by source hash (`compiler.py`)
stage_inputs   the cases and their float64 references (`data.py`), the kernel's sandbox
correctness    the kernel server starts (holding the device lock) and runs every case;
               judged here (`judge.Judge.correctness`)
timing_rounds  the timed batches on the parent's clock, every batch checked
clock_bound    skipped: the kernel reports no time; the clock is ours alone
roofline_gate  the cache-aware roofline and the plausibility gate (`judge.Judge.gate`)
verdict        the server stopped, the device lock released, then the deferred full checks
"""

from __future__ import annotations

import contextlib
import re
import shutil
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from accelopt.profile import Profile
from hardware_agents.cpu.compiler import BuildResult, Compiler
from hardware_agents.cpu.data import ProblemData
from hardware_agents.cpu.judge import Judge, TimingRules
from hardware_agents.cpu.oracle import baseline_oracle
from hardware_agents.datacache import DataCache
from hardware_agents.pipeline.device_spec import DeviceSpec
from hardware_agents.pipeline.phases import Phases
from hardware_agents.pipeline.stages import SKIPPED, Outcome, Stages
from hardware_agents.pipeline.verdict import Verdict
from hardware_agents.sandbox import Sandbox, SandboxPolicy

LOW_PRECISION = re.compile(
    r"\b(_Float16|__fp16|__bf16|__m(?:128|256|512)bh|__m(?:128|256|512)h)\b|float16|_mm\d*_\w*(?:bf16|pbh)\w*"
)


def _strip_comments(src: str) -> str:
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    return re.sub(r"//[^\n]*", " ", src)


# Room for the buffer sets of a timed batch: the judge sizes a batch from a first measured
# call (the handshake at most 2 % of it), up to this many sets and bytes; pages are only
# allocated for the sets a profile uses.
MAX_TIMED_SETS = 128
MAX_REGION_BYTES = 256 << 20


def timing_sets(set_bytes: int, cases: int) -> int:
    """Buffer sets the kernel server has room for when timing: every correctness case, at
    least 2 (the first measured batch), at most `MAX_TIMED_SETS` and `MAX_REGION_BYTES`."""
    return max(cases, 2, min(MAX_TIMED_SETS, MAX_REGION_BYTES // max(set_bytes, 1)))


class CpuDevice(Protocol):
    """The CPU agent as its stages see it (`agent.CpuAgent`): its public device context."""

    compiler: Compiler
    data: DataCache[ProblemData]
    sandbox_dir: Path | None

    @property
    def spec(self) -> DeviceSpec: ...
    def fail(
        self, status: str, log: str, extra_tools: dict[str, str] | None = None, **kw: Any
    ) -> Profile: ...
    def sandbox_policy(self, data: ProblemData, sets: int) -> SandboxPolicy: ...
    def timing_rules(self) -> TimingRules: ...
    def remeasured_peaks(self) -> DeviceSpec | None: ...
    def device_lock(self) -> AbstractContextManager[None]: ...


class CpuStages(Stages[CpuDevice]):
    def setup(self) -> None:
        self.v = Verdict(self.agent.fail, held="between timed batches")
        self.phases = Phases(self.v.counters)
        self.held = contextlib.ExitStack()  # the kernel's sandbox, then the device lock
        self.entry = ""
        self.build_result: BuildResult | None = None
        self.data: ProblemData | None = None
        self.policy: SandboxPolicy | None = None
        self.box: Sandbox | None = None
        self.sets = 0
        self.judge: Judge | None = None
        self.gated: Profile | None = None
        self.ended: Profile | None = None

    def static_checks(self) -> Profile | None:
        solution, fail = self.solution, self.agent.fail
        if solution.spec.language != "c":
            return fail(
                "compile_error", f"the CPU agent compiles C; this solution is {solution.spec.language!r}"
            )
        for src in solution.sources:
            m = LOW_PRECISION.search(_strip_comments(src.content))
            if m:
                return fail(
                    "incorrect",
                    f"{src.path}: uses a lower-precision type or intrinsic ({m.group(0)}); "
                    "kernels must compute in fp32 or wider",
                )
        try:
            self.entry = solution.entry_symbol
        except IndexError:
            return fail("compile_error", f"entry point {solution.spec.entry_point!r} is not FILE::SYMBOL")
        return None

    def build(self) -> Profile | None:
        with self.phases("compile"):
            build = self.build_result = self.agent.compiler.build(self.solution, self.problem.axis_values())
        self.v.counters["compile_s"] = build.seconds
        self.v.counters["compile_cached"] = float(build.cached)
        if not build.ok or build.so_path is None:
            return self.v.profile("compile_error", build.log, correctness=[], isolation=build.isolation)
        return None

    def stage_inputs(self) -> Profile | None:
        agent = self.agent
        with self.phases("data"):
            data = self.data = agent.data.get(self.problem, self.seeds)
        self.sets = timing_sets(data.set_bytes, len(data.cases)) if self.measure else len(data.cases)
        self.policy = agent.sandbox_policy(data, self.sets)
        box = self.box = self.held.enter_context(Sandbox(self.policy, base_dir=agent.sandbox_dir))
        assert self.build_result is not None and self.build_result.so_path is not None
        shutil.copyfile(self.build_result.so_path, box.workdir / "kernel.so")
        box.give("kernel.so")
        return None

    def correctness(self) -> Profile | None:
        agent, box, data, policy = self.agent, self.box, self.data, self.policy
        assert box is not None and data is not None and policy is not None
        self.judge = Judge(
            self.v,
            agent.timing_rules(),
            self.problem,
            data,
            agent.spec if self.measure else None,
            box,
            str(box.workdir / "kernel.so"),
            self.entry,
            self.sets,
            self.timeout_s,
            oracle=baseline_oracle(
                self.problem,
                data,
                policy,
                self.timeout_s,
                compiler=agent.compiler,
                sandbox_dir=agent.sandbox_dir,
            )
            if self.measure
            else None,
            remeasured=agent.remeasured_peaks,
        )
        self.held.enter_context(agent.device_lock())  # one timing run on the machine at a time
        return self.judge.correctness()

    def timing_rounds(self) -> Outcome:
        if not self.measure:
            return SKIPPED
        assert self.judge is not None
        return self.judge.timing()

    def roofline_gate(self) -> Outcome:
        if not self.measure:
            return SKIPPED
        assert self.judge is not None
        prof = self.judge.gate()
        if not prof.passed:
            return prof
        self.gated = prof
        return None

    def verdict(self) -> Profile:
        prof = self.gated or self.v.profile("unmeasured", "correct; timing not requested")
        return self._end(prof)

    def finish(self, prof: Profile) -> Profile:
        return self._end(prof)

    def release(self) -> None:
        if self.judge is not None:
            self.judge.shutdown()
        self.held.close()

    def _end(self, prof: Profile) -> Profile:
        """The server stopped (its end may void the verdict), the device lock and the sandbox
        released, then the deferred full checks of timed calls (their float64 references can
        take a second: never while the device is held). Runs once (the verdict, or `finish`)."""
        if self.ended is not None:
            return self.ended
        if self.judge is not None:
            prof = self.judge.close(prof)
        self.held.close()
        if self.judge is not None:
            with self.phases("deferred_checks"):
                prof = self.judge.verify_deferred(prof)
        self.ended = prof
        return prof


__all__ = ["MAX_REGION_BYTES", "MAX_TIMED_SETS", "CpuDevice", "CpuStages", "timing_sets"]
