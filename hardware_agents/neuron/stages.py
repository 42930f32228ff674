"""The Neuron agent's hooks for the stages of a profile (`hardware_agents/pipeline/stages.py`).

static_checks  language `nki`, no lower precision in the source, the entry point
build          emulate: the kernel traced in its sandbox, the programs validated and
               analysed here (`emulate_mode.EmulateRun.build`; tracing needs the staged
               arguments' shapes, so the inputs are staged first: `phase_stage_s`);
               device / simulate: skipped (the harness compiles in the correctness child)
stage_inputs   the cases (seeds 0, 21, 42, 63, 84 + adversarial; emulate: seeds 0, 21,
               `agent.EMULATE_SEEDS`) and their references; emulate: also the cases drawn
               after tracing (fresh, fresh-<adversarial>) and the programs
correctness    emulate: execute children, judged here; device / simulate: the child
               compiles and runs every case, judged here (`judge.judge_correctness`)
timing_rounds  device: the rounds this process drives (`judge.TimingRounds`); each round's
               device times are bounded by our wall time of it as the round ends (its
               `timing_mismatch` ends the rounds). Skipped in emulate (nothing is timed),
               simulate, without neuron-profile and when the profile is not timed
clock_bound    skipped: checked per round inside timing_rounds (above)
roofline_gate  device: the kept round's statistics, the roofline and the gate
               (`judge.timed_verdict`); emulate: the cost model's estimate and its gate
verdict        passed / unmeasured (why), with the estimate in emulate
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from accelopt.profile import Profile
from hardware_agents.datacache import DataCache
from hardware_agents.neuron.data import ProblemData
from hardware_agents.neuron.judge import (
    TimingLog,
    TimingRounds,
    judge_correctness,
    stage_sources,
    timed_verdict,
)
from hardware_agents.neuron.protocol import CaseSpec, HarnessRequest, Mode, TimingSpec
from hardware_agents.neuron.static import lower_precision
from hardware_agents.pipeline.device_spec import DeviceSpec
from hardware_agents.pipeline.phases import Phases
from hardware_agents.pipeline.rounds import RoundClock, drive_rounds
from hardware_agents.pipeline.stages import SKIPPED, Outcome, Stages
from hardware_agents.pipeline.verdict import Verdict
from hardware_agents.sandbox import Sandbox, SandboxOutcome, SandboxPolicy, default_base_dir, private_dir

if TYPE_CHECKING:
    from hardware_agents.neuron.emulate_mode import EmulateRun


class NeuronDevice(Protocol):
    """The Neuron agent as its stages see it (`agent.NeuronAgent`): its public device context."""

    mode: Mode
    data: DataCache[ProblemData]
    sandbox_dir: Path | None
    compile_options: str
    neuron_profile: str | None
    timing_timeout_s: float
    warmup: int
    runs: int
    max_rounds: int
    round_pause_s: float
    spread_threshold: float
    verify_summaries: bool
    max_pct_peak: float

    @property
    def kind(self) -> str: ...
    @property
    def spec(self) -> DeviceSpec: ...
    def fail(
        self, status: str, log: str, extra_tools: dict[str, str] | None = None, **kw: Any
    ) -> Profile: ...
    def sandbox_policy(self, data: ProblemData, timeout: float) -> SandboxPolicy: ...
    def read_paths(self, data: ProblemData | None) -> tuple[str, ...]: ...


class NeuronStages(Stages[NeuronDevice]):
    def setup(self) -> None:
        self.v = Verdict(self.agent.fail)
        self.phases = Phases(self.v.counters)
        self.entry_file = self.entry = ""
        self.data: ProblemData | None = None
        self.policy: SandboxPolicy | None = None
        self.emulated: EmulateRun | None = None
        self.held = contextlib.ExitStack()  # the timing child's sandboxes and inputs dir
        self.untimed = ""  # why a correct kernel is not timed
        self.timing: tuple[SandboxOutcome, TimingLog] | None = None
        self.gated: Profile | None = None

    @property
    def emulate(self) -> bool:
        return self.agent.mode == "emulate"

    def static_checks(self) -> Profile | None:
        agent, solution = self.agent, self.solution
        if solution.spec.language != "nki":
            return agent.fail(
                "compile_error",
                f"the {agent.kind} agent runs NKI kernels; this solution is {solution.spec.language!r}",
            )
        for src in solution.sources:
            low = lower_precision(src.content)
            if low:
                return agent.fail(
                    "incorrect",
                    f"{src.path}: uses a lower-precision type ({low}); NKIBench kernels "
                    "must compute in float32 (the compiler runs with --auto-cast=none)",
                )
        try:
            self.entry_file = solution.entry_file().path
            self.entry = solution.entry_symbol
        except Exception as e:
            return agent.fail("compile_error", f"entry point {solution.spec.entry_point!r}: {e}")
        return None

    def _staged(self) -> tuple[ProblemData, SandboxPolicy]:
        """The cases' inputs, drawn and staged once (a cache hit: nothing); references follow in a thread."""
        if self.data is None or self.policy is None:
            with self.phases("stage"):
                self.data = self.agent.data.get(self.problem, self.seeds)
            self.policy = self.agent.sandbox_policy(self.data, self.timeout_s)
        return self.data, self.policy

    def build(self) -> Outcome:
        if not self.emulate:
            return SKIPPED
        from hardware_agents.neuron.emulate_mode import EmulateRun

        data, policy = self._staged()
        agent = self.agent
        self.emulated = EmulateRun(
            self.v,
            self.problem,
            self.solution,
            data,
            policy,
            self.entry_file,
            self.entry,
            self.timeout_s,
            kind=agent.kind,
            spec=agent.spec,
            sandbox_dir=agent.sandbox_dir,
            phases=self.phases,
        )
        return self.emulated.build()

    def stage_inputs(self) -> Profile | None:
        self._staged()
        return self.emulated.stage_inputs() if self.emulated is not None else None

    def correctness(self) -> Profile | None:
        if self.emulated is not None:
            return self.emulated.correctness()
        agent, (data, policy) = self.agent, self._staged()
        cpolicy = msgspec.structs.replace(  # its work dir holds every case's outputs
            policy, workdir_bytes=data.workdir_bytes(len(data.cases), policy.workdir_bytes)
        )
        with Sandbox(cpolicy, base_dir=agent.sandbox_dir) as box:
            kernel_file = stage_sources(box, self.solution, self.entry_file)
            req = HarnessRequest(
                mode=agent.mode,
                kernel_file=kernel_file,
                entry=self.entry,
                cases=[CaseSpec(name=c.case.name, args=c.args) for c in data.cases],
                compile_options=agent.compile_options if agent.mode == "device" else "",
            )
            with self.phases("correctness"):  # the child compiles and runs every case (our clock)
                out = box.run("hardware_agents.neuron.harness:run", req, timeout_s=self.timeout_s)
            with self.phases("judge"):
                res = judge_correctness(self.v, self.problem, data, out, box)
        return res if isinstance(res, Profile) else None

    def timing_rounds(self) -> Outcome:
        agent = self.agent
        if self.emulated is not None:
            return SKIPPED
        if not self.measure:
            self.untimed = "correct; timing not requested"
        elif agent.mode == "simulate":
            self.untimed = "correct in nki.simulate_kernel (no Neuron device on this host: not timed)"
        elif not agent.neuron_profile:
            self.untimed = (
                "correct on the device, but neuron-profile was not found (install aws-neuronx-tools): "
                "not timed"
            )
        if self.untimed:
            return SKIPPED
        return self._time()

    def _time(self) -> Profile | None:
        """The timing child, in rounds the pipeline's driver runs with this agent's hooks
        (`judge.TimingRounds`): a round's failure ends the profile unless the child's end voids
        it (a freeze breach: the verdict on the end, in `roofline_gate`)."""
        agent, v, (data, policy) = self.agent, self.v, self._staged()
        # A fresh work dir: nothing the correctness run left behind (a rewritten kernel module,
        # planted profiler files) reaches the timing run; its inputs come round by round.
        # The rounds' inputs go to a directory of ours that the timing child may read, not write.
        inputs = private_dir(agent.sandbox_dir or default_base_dir(), "accelopt-nki-timing-")
        self.held.callback(shutil.rmtree, inputs, ignore_errors=True)
        os.chmod(inputs, 0o755)
        tbox, sbox = self._timing_boxes(data, policy, inputs)
        kernel_file = stage_sources(tbox, self.solution, self.entry_file)
        treq = HarnessRequest(
            mode="device",
            kernel_file=kernel_file,
            entry=self.entry,
            cases=[],
            compile_options=agent.compile_options,
            neuron_profile="" if agent.verify_summaries else (agent.neuron_profile or ""),
            timing=TimingSpec(inputs_dir=str(inputs), warmup=agent.warmup, runs=agent.runs),
        )
        child = tbox.spawn("hardware_agents.neuron.harness:run", treq, timeout_s=agent.timing_timeout_s)
        clock = RoundClock()
        rounds = TimingRounds(
            v,
            self.problem,
            data,
            clock,
            tbox,
            sbox,
            inputs,
            runs=agent.runs,
            round_pause_s=agent.round_pause_s,
            spread_threshold=agent.spread_threshold,
            neuron_profile=agent.neuron_profile,
            verify_summaries=agent.verify_summaries,
        )
        try:
            failed = drive_rounds(
                child,
                clock,
                rounds=agent.max_rounds,
                hand_over=rounds.hand_over,
                after_round=rounds.after_round,
            )
        finally:
            tout = child.finish()
        v.counters.update(rounds.log.counters())  # a failed round's profile shares this dict: it has them too
        v.record_outcome(tout)
        self.timing = (tout, rounds.log)
        # the child's end first: a freeze breach voids everything it reported, a round's verdict too
        return failed if failed is not None and tout.freeze_breach is None else None

    def _timing_boxes(
        self, data: ProblemData, policy: SandboxPolicy, inputs: Path
    ) -> tuple[Sandbox, Sandbox]:
        """The timing child's sandbox and the summaries' (which loads neither kernel nor SDK)."""
        agent = self.agent
        tpolicy = msgspec.structs.replace(
            policy,
            wall_timeout_s=agent.timing_timeout_s,
            read_paths=(*agent.read_paths(None), str(inputs)),
            # a round's profiled runs' outputs (and their NEFF/NTFF pairs) until the agent has read them
            workdir_bytes=data.workdir_bytes(agent.runs, policy.workdir_bytes),
        )
        spolicy = msgspec.structs.replace(
            policy,
            wall_timeout_s=max(60.0, 30.0 * agent.runs),
            write_paths=(),
            read_paths=agent.read_paths(None),
            drop_privileges=True,
        )
        tbox = self.held.enter_context(Sandbox(tpolicy, base_dir=agent.sandbox_dir))
        sbox = self.held.enter_context(Sandbox(spolicy, base_dir=agent.sandbox_dir))
        return tbox, sbox

    def roofline_gate(self) -> Outcome:
        if self.emulated is not None:
            return self.emulated.roofline_gate()
        if self.timing is None:
            return SKIPPED
        out, log = self.timing
        prof = timed_verdict(
            self.v, self.problem, self.agent.spec, out, log, max_pct_peak=self.agent.max_pct_peak
        )
        if prof.status != "passed":
            return prof
        self.gated = prof
        return None

    def verdict(self) -> Profile:
        if self.emulated is not None:
            return self.emulated.verdict()
        return self.gated or self.v.profile("unmeasured", self.untimed)

    def release(self) -> None:
        try:
            if self.emulated is not None:
                self.emulated.release()
        finally:
            self.held.close()


__all__ = ["NeuronDevice", "NeuronStages"]
