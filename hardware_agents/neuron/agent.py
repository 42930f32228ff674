"""The Neuron hardware agent: NKI kernels on Trainium (trn1, trn2), in a sandbox.

profile(problem, solution):
  1. static checks: language `nki`, no lower precision (float16/bfloat16/fp8/tf32) in the
     source (comments stripped), as NKIBench rejects it;
  2. inputs for seeds 0, 21, 42, 63, 84 (at least `min_seeds`) plus adversarial cases,
     transformed with the problem's `transform_to_nki_inputs`; float64 references in a private
     0700 dir outside every sandbox read path (`data.py`, cached per problem);
  3. a sandboxed child compiles and runs the kernel on every case (`nki.baremetal` with
     NEURON_CC_FLAGS=--auto-cast=none on one pinned NeuronCore, or `nki.simulate_kernel`
     without a device). Load/trace/compile failures -> `compile_error`; failures after a
     NEFF exists (or naming the Neuron runtime), crashes -> `runtime_error`;
  4. outputs mapped with `transform_nki_outputs` and judged here against the reference
     (relative L2 per problem, plus the validity layer's elementwise bound) -> `incorrect`;
  5. device only, timing in rounds this process drives (see protocol.py for the handshake):
     a second child loads the kernel and stops; per round (the paper's loop: 2 warm-ups, 10
     profiled runs, re-run while (max - min) / min > 1 %, up to 10 rounds) the agent draws
     inputs on a fresh seed (`secrets`, never a correctness seed) with float64 references it
     keeps in memory, hands the arguments over only then, and times the round's calls on its
     own clock (from continuing the child to its next stop); every profiled run's output is
     checked in full against that round's reference and the inputs must be unchanged (else
     `incorrect`: results must not depend on being timed); a third child, which loads neither
     the kernel nor the SDK, runs `neuron-profile view --output-format summary-json` on copies
     of the round's NEFF/NTFF pairs; device times adding up to more than our wall time of the
     round -> `timing_mismatch` (there is no lower bound: see `judge.NEURON_BOUND`); a child
     that ran while the agent held it stopped -> `incorrect`. The round with the
     smallest spread is kept; its first summary fills the counters (the paper's 16 profiler
     fields; `timing_wall_s`, `timing_device_s`, `timing_setup_s` sum our clock and the
     readings over the rounds); roofline with the cited peaks; a result faster than
     `max_pct_peak` x the roofline is rejected as `incorrect`;
  6. without a device (or without neuron-profile, or with measure=False): `unmeasured`.

Every Profile records the isolation its sandbox applied; a sandbox that cannot isolate the
kernel (and is not allowed to run it unisolated) gives `sandbox_error`.
The steps every agent shares are the pipeline's (hardware_agents/pipeline/: the rounds
driver, the clock bound, the verdict, the roofline gate); reading this agent's children is
`judge.py`, the emulate mode `emulate_mode.py`.
Without the SDK the constructor raises `NeuronSDKMissing`, naming what to install.
"""

from __future__ import annotations

import functools
import io
import os
import re
import shutil
import stat
import tokenize
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import msgspec

from accelopt.problem import Problem, Solution
from accelopt.profile import Profile
from hardware_agents.base import DeviceSpec, HardwareAgent
from hardware_agents.datacache import DataCache
from hardware_agents.neuron import sdk
from hardware_agents.neuron.data import ProblemData, build_problem_data
from hardware_agents.neuron.judge import TimingRounds, judge_correctness, stage_sources, timed_verdict
from hardware_agents.neuron.protocol import CaseSpec, HarnessRequest, Mode, TimingSpec
from hardware_agents.neuron.refstore import ReferenceStore
from hardware_agents.neuron.specs import SPECS
from hardware_agents.pipeline.phases import Phases
from hardware_agents.pipeline.rounds import RoundClock, drive_rounds
from hardware_agents.pipeline.verdict import Verdict
from hardware_agents.sandbox import Sandbox, SandboxPolicy, default_base_dir, private_dir

NKIBENCH_SEEDS: tuple[int, ...] = (0, 21, 42, 63, 84)
DEFAULT_CC_FLAGS = "--auto-cast=none"
# The reference implementation's nki.baremetal options (one logical core = one physical core).
DEFAULT_COMPILE_OPTIONS = "--disable-dge --logical-nc-config=1"
_LOW_PRECISION = re.compile(r"\b(float16|bfloat16|fp16|bf16|float8\w*|fp8\w*|tfloat32|tf32)\b", re.IGNORECASE)


def strip_comments(src: str) -> str:
    """Python source without comments (strings are kept, so a dtype named in a string counts)."""
    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(src).readline) if t.type != tokenize.COMMENT]
        return tokenize.untokenize(toks)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return re.sub(r"#[^\n]*", " ", src)


def lower_precision(src: str) -> str | None:
    m = _LOW_PRECISION.search(strip_comments(src))
    return m.group(0) if m else None


def extend_seeds(seeds: Sequence[int], minimum: int) -> tuple[int, ...]:
    """At least `minimum` seeds, continuing in steps of 21 (the defaults become 0, 21, ..., 84)."""
    out = [int(s) for s in seeds] or [0]
    while len(out) < minimum:
        out.append(out[-1] + 21)
    return tuple(out)


class NeuronAgent(HardwareAgent):
    """Profiles NKI kernels on one NeuronCore of a trn1/trn2 host (see the module doc)."""

    kind: ClassVar[str] = "trn1"
    languages: ClassVar[tuple[str, ...]] = ("nki",)

    def __init__(
        self,
        *,
        mode: Literal["auto", "device", "simulate", "emulate"] = "auto",
        sdk_path: str | Sequence[str] | None = None,
        neuron_profile: str | None = None,
        core: str | int | None = None,
        timeout_s: float = 900.0,
        timing_timeout_s: float = 3600.0,
        warmup: int = 2,
        runs: int = 10,
        max_rounds: int = 10,
        spread_threshold: float = 0.01,
        round_pause_s: float = 1.0,
        min_seeds: int = 5,
        max_pct_peak: float = 1.1,
        cc_flags: str = DEFAULT_CC_FLAGS,
        compile_options: str = DEFAULT_COMPILE_OPTIONS,
        device_glob: str = sdk.DEVICE_GLOB,
        verify_summaries: bool = True,
        check_instance: bool = True,
        sandbox_dir: str | Path | None = None,
        sandbox_options: dict[str, Any] | None = None,
        cache_dir: str | Path | None = None,
        spec: DeviceSpec | None = None,
        extra_env: dict[str, str] | None = None,
        data_cache_problems: int = 2,
    ) -> None:
        # the float64 references that are slow to compute, kept across processes (`refstore.py`)
        self.references = ReferenceStore.default(cache_dir)
        if isinstance(sdk_path, str):
            sdk_path = [p for p in sdk_path.split(os.pathsep) if p]
        elif sdk_path is None:
            sdk_path = [p for p in os.environ.get("ACCELOPT_NEURON_SDK_PATH", "").split(os.pathsep) if p]
        info = sdk.find_sdk(list(sdk_path)) if mode != "emulate" else None
        if info is None and mode in ("device", "simulate"):
            raise sdk.NeuronSDKMissing(sdk.install_hint(self.kind))
        self.sdk = info or sdk.SdkInfo(origin="")
        self._spec = spec or SPECS[self.kind]
        self.neuron_profile = sdk.find_neuron_profile(neuron_profile) if info is not None else None
        self.devices = sdk.neuron_devices(device_glob) if info is not None else []
        if mode == "auto":
            mode = ("device" if self.devices else "simulate") if info is not None else "emulate"
        self.mode: Mode = mode
        self.instance = sdk.instance_type()
        if (
            check_instance
            and self.mode == "device"
            and self.instance.startswith("trn")
            and not self.instance.startswith(self.kind)
        ):
            raise ValueError(
                f"the {self.kind} agent cannot time kernels on a {self.instance} host; "
                f"use the device kind {self.instance.split('.', 1)[0]}"
            )
        self.core = str(core) if core is not None else sdk.visible_core()
        self.timeout_s = timeout_s
        self.timing_timeout_s = timing_timeout_s
        self.warmup, self.runs, self.max_rounds = warmup, runs, max_rounds
        self.spread_threshold = spread_threshold
        self.round_pause_s = round_pause_s
        self.min_seeds = min_seeds
        self.max_pct_peak = max_pct_peak
        self.cc_flags = (
            cc_flags if "--auto-cast=none" in cc_flags.split() else f"{DEFAULT_CC_FLAGS} {cc_flags}".strip()
        )
        self.compile_options = compile_options
        self.verify_summaries = verify_summaries
        self.sandbox_dir = Path(sandbox_dir) if sandbox_dir else None
        self.sandbox_options = dict(sandbox_options or {})
        self.extra_env = dict(extra_env or {})
        # staged under a 0755 root (the sandbox's uid reads the inputs); references stay private
        self.data: DataCache[ProblemData] = DataCache(
            functools.partial(build_problem_data, store=self.references),
            capacity=data_cache_problems,
            base_dir=self.sandbox_dir,
            prefix="accelopt-nki-",
            mode=0o755,
        )

    # --- device ----------------------------------------------------------------------------

    @property
    def spec(self) -> DeviceSpec:
        return self._spec

    def toolchain(self) -> dict[str, str]:
        if self.mode == "emulate":
            from hardware_agents.neuron.emulator import EMULATOR_VERSION
            from hardware_agents.neuron.emulator.cost import COST_SPECS, MODEL

            return {
                "mode": "emulate",
                "emulator": EMULATOR_VERSION,
                "cost_model": MODEL if self.kind in COST_SPECS else f"none for {self.kind}",
                "spec": f"{self._spec.name} (cited)",
            }
        out = {
            "neuronx-cc": self.sdk.version,
            "neuronxcc_path": self.sdk.origin,
            "mode": self.mode,
            "neuron_profile": self.neuron_profile or "not found",
            "neuron_cc_flags": self.cc_flags,
            "compile_options": self.compile_options,
            "core": self.core or "runtime default",
            "spec": f"{self._spec.name} (cited)",
        }
        if self.instance:
            out["instance"] = self.instance
        return out

    def close(self) -> None:
        self.data.close()

    # --- sandbox ---------------------------------------------------------------------------

    def child_env(self) -> dict[str, str]:
        env = {"NEURON_CC_FLAGS": self.cc_flags, "NEURON_RT_LOG_LEVEL": "ERROR"}
        if self.core:
            env["NEURON_RT_VISIBLE_CORES"] = self.core
        else:
            env["NEURON_RT_NUM_CORES"] = "1"
        if self.mode == "simulate":
            env["NEURON_PLATFORM_TARGET_OVERRIDE"] = self.kind
        env.update(self.extra_env)
        return env

    def _policy(self, data: ProblemData, timeout: float) -> SandboxPolicy:
        device = self.mode == "device"
        footprint = sum(os.path.getsize(a.path) for c in data.cases for a in c.args if a.path)
        opts: dict[str, Any] = dict(
            wall_timeout_s=timeout,
            max_processes=512,
            max_file_bytes=16 << 30,
            address_space_bytes=(1 << 40) if device else max(8 << 30, 16 * footprint),
            read_paths=self._read_paths(data),
            python_path=self.sdk.python_path,
            write_paths=tuple(self.devices) if device else (),
            env=self.child_env(),
        )
        if (
            device
            and os.geteuid() == 0
            and any(
                (os.stat(d).st_mode & (stat.S_IROTH | stat.S_IWOTH)) != (stat.S_IROTH | stat.S_IWOTH)
                for d in self.devices
            )
        ):
            opts["drop_privileges"] = False  # the runtime must open device nodes that only root may use
        opts.update(self.sandbox_options)
        return SandboxPolicy(**opts)

    def _read_paths(self, data: ProblemData | None) -> tuple[str, ...]:
        """The SDK, neuron-profile and (for the correctness child) the data dir; the timing
        child gets the agent's staging dir instead, where its inputs arrive round by round."""
        return (
            *([str(data.dir)] if data is not None else []),
            *self.sdk.python_path,
            *([os.path.dirname(self.neuron_profile)] if self.neuron_profile else []),
        )

    # --- profile ---------------------------------------------------------------------------

    def _seeds(self, seeds: tuple[int, ...]) -> tuple[int, ...]:
        return extend_seeds(seeds, self.min_seeds)

    def _profile(
        self, problem: Problem, solution: Solution, seeds: tuple[int, ...], timeout: float, measure: bool
    ) -> Profile:
        if solution.spec.language != "nki":
            return self._fail(
                "compile_error",
                f"the {self.kind} agent runs NKI kernels; this solution is {solution.spec.language!r}",
            )
        for src in solution.sources:
            low = lower_precision(src.content)
            if low:
                return self._fail(
                    "incorrect",
                    f"{src.path}: uses a lower-precision type ({low}); NKIBench kernels "
                    "must compute in float32 (the compiler runs with --auto-cast=none)",
                )
        try:
            entry_file = solution.entry_file().path
            entry = solution.entry_symbol
        except Exception as e:
            return self._fail("compile_error", f"entry point {solution.spec.entry_point!r}: {e}")
        v = Verdict(self._fail)
        phases = Phases(v.counters)
        with phases("stage"):  # inputs drawn and staged (a cache hit: nothing); references follow in a thread
            data = self.data.get(problem, seeds)
        policy = self._policy(data, timeout)
        if self.mode == "emulate":
            from hardware_agents.neuron.emulate_mode import profile_emulated

            return profile_emulated(
                v,
                problem,
                solution,
                data,
                policy,
                entry_file,
                entry,
                timeout,
                kind=self.kind,
                spec=self._spec,
                sandbox_dir=self.sandbox_dir,
                phases=phases,
            )
        cpolicy = msgspec.structs.replace(  # its work dir holds every case's outputs
            policy, workdir_bytes=data.workdir_bytes(len(data.cases), policy.workdir_bytes)
        )
        with Sandbox(cpolicy, base_dir=self.sandbox_dir) as box:
            kernel_file = stage_sources(box, solution, entry_file)
            req = HarnessRequest(
                mode=self.mode,
                kernel_file=kernel_file,
                entry=entry,
                cases=[CaseSpec(name=c.case.name, args=c.args) for c in data.cases],
                compile_options=self.compile_options if self.mode == "device" else "",
            )
            with phases("correctness"):  # the child compiles and runs every case (our clock)
                out = box.run("hardware_agents.neuron.harness:run", req, timeout_s=timeout)
            with phases("judge"):
                res = judge_correctness(v, problem, data, out, box)
        if isinstance(res, Profile):
            return res
        if not measure:
            why = "correct; timing not requested"
        elif self.mode == "simulate":
            why = "correct in nki.simulate_kernel (no Neuron device on this host: not timed)"
        elif not self.neuron_profile:
            why = "correct on the device, but neuron-profile was not found (install aws-neuronx-tools): not timed"
        else:
            why = ""
        if why:
            return v.profile("unmeasured", why)
        # A fresh work dir: nothing the correctness run left behind (a rewritten kernel module,
        # planted profiler files) reaches the timing run; its inputs come round by round.
        # The rounds' inputs go to a directory of ours that the timing child may read, not write.
        inputs = private_dir(self.sandbox_dir or default_base_dir(), "accelopt-nki-timing-")
        try:
            os.chmod(inputs, 0o755)
            return self._time(v, problem, solution, data, policy, inputs, entry_file, entry)
        finally:
            shutil.rmtree(inputs, ignore_errors=True)

    def _time(
        self,
        v: Verdict,
        problem: Problem,
        solution: Solution,
        data: ProblemData,
        policy: SandboxPolicy,
        inputs: Path,
        entry_file: str,
        entry: str,
    ) -> Profile:
        """The timing child, in rounds the pipeline's driver runs with this agent's hooks
        (`judge.TimingRounds`), then the verdict on them (`judge.timed_verdict`)."""
        tpolicy = msgspec.structs.replace(
            policy,
            wall_timeout_s=self.timing_timeout_s,
            read_paths=(*self._read_paths(None), str(inputs)),
            # a round's profiled runs' outputs (and their NEFF/NTFF pairs) until the agent has read them
            workdir_bytes=data.workdir_bytes(self.runs, policy.workdir_bytes),
        )
        spolicy = msgspec.structs.replace(
            policy,
            wall_timeout_s=max(60.0, 30.0 * self.runs),
            write_paths=(),
            read_paths=self._read_paths(None),
            drop_privileges=True,
        )
        with (
            Sandbox(tpolicy, base_dir=self.sandbox_dir) as tbox,
            Sandbox(spolicy, base_dir=self.sandbox_dir) as sbox,
        ):
            kernel_file = stage_sources(tbox, solution, entry_file)
            treq = HarnessRequest(
                mode="device",
                kernel_file=kernel_file,
                entry=entry,
                cases=[],
                compile_options=self.compile_options,
                neuron_profile="" if self.verify_summaries else (self.neuron_profile or ""),
                timing=TimingSpec(inputs_dir=str(inputs), warmup=self.warmup, runs=self.runs),
            )
            child = tbox.spawn("hardware_agents.neuron.harness:run", treq, timeout_s=self.timing_timeout_s)
            clock = RoundClock()
            rounds = TimingRounds(
                v,
                problem,
                data,
                clock,
                tbox,
                sbox,
                inputs,
                runs=self.runs,
                round_pause_s=self.round_pause_s,
                spread_threshold=self.spread_threshold,
                neuron_profile=self.neuron_profile,
                verify_summaries=self.verify_summaries,
            )
            try:
                verdict = drive_rounds(
                    child,
                    clock,
                    rounds=self.max_rounds,
                    hand_over=rounds.hand_over,
                    after_round=rounds.after_round,
                )
            finally:
                tout = child.finish()
            v.counters.update(
                rounds.log.counters()
            )  # a failed round's profile shares this dict: it has them too
            v.record_outcome(tout)
            if verdict is not None and tout.freeze_breach is None:
                return verdict
            # the child's end first: a freeze breach voids everything it reported, a round's verdict too
            return timed_verdict(v, problem, self._spec, tout, rounds.log, max_pct_peak=self.max_pct_peak)


class Trn1Agent(NeuronAgent):
    kind: ClassVar[str] = "trn1"


class Trn2Agent(NeuronAgent):
    kind: ClassVar[str] = "trn2"


__all__ = [
    "DEFAULT_CC_FLAGS",
    "DEFAULT_COMPILE_OPTIONS",
    "NKIBENCH_SEEDS",
    "NeuronAgent",
    "Trn1Agent",
    "Trn2Agent",
    "extend_seeds",
    "lower_precision",
    "strip_comments",
]
