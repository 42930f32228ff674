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
     round -> `timing_mismatch` (there is no lower bound: see `_rounds`). The round with the
     smallest spread is kept; its first summary fills the counters (the paper's 16 profiler
     fields; `timing_wall_s`, `timing_device_s`, `timing_setup_s` sum our clock and the
     readings over the rounds); roofline with the cited peaks; a result faster than
     `max_pct_peak` x the roofline is rejected as `incorrect`;
  6. without a device (or without neuron-profile, or with measure=False): `unmeasured`.

Every Profile records the isolation its sandbox applied; a sandbox that cannot isolate the
kernel (and is not allowed to run it unisolated) gives `sandbox_error`.
Without the SDK the constructor raises `NeuronSDKMissing`, naming what to install.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import os
import re
import shutil
import stat
import statistics
import time
import tokenize
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import msgspec
import numpy as np

from accelopt.problem import Problem, Solution
from accelopt.profile import LatencyStats, Profile, SeedCheck
from hardware_agents import validity
from hardware_agents.base import DeviceSpec, HardwareAgent, pct_peak, roofline_terms, t_peak
from hardware_agents.datacache import DataCache
from hardware_agents.neuron import sdk
from hardware_agents.neuron.data import ProblemData, TimingRound, build_problem_data, fresh_seed
from hardware_agents.neuron.protocol import (
    CaseSpec,
    HarnessRequest,
    HarnessResult,
    Mode,
    SummaryRequest,
    SummaryResult,
    TimingSpec,
    profiled_pair,
    report_file,
    round_dir,
    round_file,
    timed_output,
)
from hardware_agents.neuron.protocol import TimingRound as ChildRound
from hardware_agents.neuron.reference import ReferenceModule
from hardware_agents.neuron.specs import SPECS
from hardware_agents.neuron.summary import COUNTER_FIELDS, ProfileSummary, SummaryError, parse_summary
from hardware_agents.sandbox import (
    Sandbox,
    SandboxChild,
    SandboxOutcome,
    SandboxPolicy,
    default_base_dir,
    private_dir,
)

NKIBENCH_SEEDS: tuple[int, ...] = (0, 21, 42, 63, 84)
DEFAULT_CC_FLAGS = "--auto-cast=none"
# The reference implementation's nki.baremetal options (one logical core = one physical core).
DEFAULT_COMPILE_OPTIONS = "--disable-dge --logical-nc-config=1"
_MAX_PROFILE_FILE = 4 << 30  # a NEFF or NTFF copied for the summary child
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

    def __init__(self, *, mode: Literal["auto", "device", "simulate", "emulate"] = "auto",
                 sdk_path: str | Sequence[str] | None = None, neuron_profile: str | None = None,
                 core: str | int | None = None, timeout_s: float = 900.0, timing_timeout_s: float = 3600.0,
                 warmup: int = 2, runs: int = 10, max_rounds: int = 10, spread_threshold: float = 0.01,
                 round_pause_s: float = 1.0, min_seeds: int = 5, max_pct_peak: float = 1.1,
                 cc_flags: str = DEFAULT_CC_FLAGS, compile_options: str = DEFAULT_COMPILE_OPTIONS,
                 device_glob: str = sdk.DEVICE_GLOB, verify_summaries: bool = True, check_instance: bool = True,
                 sandbox_dir: str | Path | None = None, sandbox_options: dict[str, Any] | None = None,
                 cache_dir: str | Path | None = None, spec: DeviceSpec | None = None,
                 extra_env: dict[str, str] | None = None, data_cache_problems: int = 2) -> None:
        del cache_dir  # accepted for CLI symmetry with the CPU agent; nothing is cached on disk
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
        if (check_instance and self.mode == "device" and self.instance.startswith("trn")
                and not self.instance.startswith(self.kind)):
            raise ValueError(f"the {self.kind} agent cannot time kernels on a {self.instance} host; "
                             f"use the device kind {self.instance.split('.', 1)[0]}")
        self.core = str(core) if core is not None else sdk.visible_core()
        self.timeout_s = timeout_s
        self.timing_timeout_s = timing_timeout_s
        self.warmup, self.runs, self.max_rounds = warmup, runs, max_rounds
        self.spread_threshold = spread_threshold
        self.round_pause_s = round_pause_s
        self.min_seeds = min_seeds
        self.max_pct_peak = max_pct_peak
        self.cc_flags = cc_flags if "--auto-cast=none" in cc_flags.split() else f"{DEFAULT_CC_FLAGS} {cc_flags}".strip()
        self.compile_options = compile_options
        self.verify_summaries = verify_summaries
        self.sandbox_dir = Path(sandbox_dir) if sandbox_dir else None
        self.sandbox_options = dict(sandbox_options or {})
        self.extra_env = dict(extra_env or {})
        # staged under a 0755 root (the sandbox's uid reads the inputs); references stay private
        self.data: DataCache[ProblemData] = DataCache(build_problem_data, capacity=data_cache_problems,
                                                     base_dir=self.sandbox_dir, prefix="accelopt-nki-", mode=0o755)

    # --- device ----------------------------------------------------------------------------

    @property
    def device(self) -> DeviceSpec:
        return self._spec

    def toolchain(self) -> dict[str, str]:
        if self.mode == "emulate":
            from hardware_agents.neuron.emulator import EMULATOR_VERSION
            from hardware_agents.neuron.emulator.cost import COST_SPECS, MODEL

            return {"mode": "emulate", "emulator": EMULATOR_VERSION,
                    "cost_model": MODEL if self.kind in COST_SPECS else f"none for {self.kind}",
                    "spec": f"{self._spec.name} (cited)"}
        out = {"neuronx-cc": self.sdk.version, "neuronxcc_path": self.sdk.origin, "mode": self.mode,
               "neuron_profile": self.neuron_profile or "not found", "neuron_cc_flags": self.cc_flags,
               "compile_options": self.compile_options, "core": self.core or "runtime default",
               "spec": f"{self._spec.name} (cited)"}
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
            wall_timeout_s=timeout, max_processes=512, max_file_bytes=16 << 30,
            address_space_bytes=(1 << 40) if device else max(8 << 30, 16 * footprint),
            read_paths=self._read_paths(data),
            python_path=self.sdk.python_path,
            write_paths=tuple(self.devices) if device else (), env=self.child_env(),
        )
        if device and os.geteuid() == 0 and any(
                (os.stat(d).st_mode & (stat.S_IROTH | stat.S_IWOTH)) != (stat.S_IROTH | stat.S_IWOTH)
                for d in self.devices):
            opts["drop_privileges"] = False  # the runtime must open device nodes that only root may use
        opts.update(self.sandbox_options)
        return SandboxPolicy(**opts)

    def _read_paths(self, data: ProblemData | None) -> tuple[str, ...]:
        """The SDK, neuron-profile and (for the correctness child) the data dir; the timing
        child gets the agent's staging dir instead, where its inputs arrive round by round."""
        return (*([str(data.dir)] if data is not None else []), *self.sdk.python_path,
                *([os.path.dirname(self.neuron_profile)] if self.neuron_profile else []))

    # --- profile ---------------------------------------------------------------------------

    def _seeds(self, seeds: tuple[int, ...]) -> tuple[int, ...]:
        return extend_seeds(seeds, self.min_seeds)

    def _profile(self, problem: Problem, solution: Solution, seeds: tuple[int, ...], timeout: float,
                 measure: bool) -> Profile:
        if solution.spec.language != "nki":
            return self._fail("compile_error", f"the {self.kind} agent runs NKI kernels; this solution is "
                              f"{solution.spec.language!r}")
        for src in solution.sources:
            low = lower_precision(src.content)
            if low:
                return self._fail("incorrect", f"{src.path}: uses a lower-precision type ({low}); NKIBench kernels "
                                  "must compute in float32 (the compiler runs with --auto-cast=none)")
        try:
            entry_file = solution.entry_file().path
            entry = solution.entry_symbol
        except Exception as e:
            return self._fail("compile_error", f"entry point {solution.spec.entry_point!r}: {e}")
        data = self.data.get(problem, seeds)
        policy = self._policy(data, timeout)
        if self.mode == "emulate":
            from hardware_agents.neuron.emulate import profile_emulated

            return profile_emulated(self, problem, solution, data, policy, entry_file, entry, timeout)
        with Sandbox(policy, base_dir=self.sandbox_dir) as box:
            kernel_file = self._stage_sources(box, solution, entry_file)
            req = HarnessRequest(mode=self.mode, kernel_file=kernel_file, entry=entry,
                                 cases=[CaseSpec(name=c.case.name, args=c.args) for c in data.cases],
                                 compile_options=self.compile_options if self.mode == "device" else "")
            out = box.run("hardware_agents.neuron.harness:run", req, timeout_s=timeout)
            failed, checks, res = self._judge(problem, data, out, box)
        if failed is not None:
            failed.isolation = out.isolation
            return failed
        assert res is not None
        tools = {**res.versions}
        counters: dict[str, float] = {"compile_s": res.compile_s}
        if not measure:
            why = "correct; timing not requested"
        elif self.mode == "simulate":
            why = "correct in nki.simulate_kernel (no Neuron device on this host: not timed)"
        elif not self.neuron_profile:
            why = "correct on the device, but neuron-profile was not found (install aws-neuronx-tools): not timed"
        else:
            why = ""
        if why:
            return self._fail("unmeasured", why, tools, correctness=checks, counters=counters,
                              isolation=out.isolation)
        # A fresh work dir: nothing the correctness run left behind (a rewritten kernel module,
        # planted profiler files) reaches the timing run; its inputs come round by round.
        # The rounds' inputs go to a directory of ours that the timing child may read, not write.
        inputs = private_dir(self.sandbox_dir or default_base_dir(), "accelopt-nki-timing-")
        try:
            os.chmod(inputs, 0o755)
            return self._time(problem, solution, data, policy, inputs, entry_file, entry, checks, counters, tools)
        finally:
            shutil.rmtree(inputs, ignore_errors=True)

    def _time(self, problem: Problem, solution: Solution, data: ProblemData, policy: SandboxPolicy, inputs: Path,
              entry_file: str, entry: str, checks: list[SeedCheck], counters: dict[str, float],
              tools: dict[str, str]) -> Profile:
        tpolicy = msgspec.structs.replace(policy, wall_timeout_s=self.timing_timeout_s,
                                          read_paths=(*self._read_paths(None), str(inputs)))
        spolicy = msgspec.structs.replace(policy, wall_timeout_s=max(60.0, 30.0 * self.runs), write_paths=(),
                                          read_paths=self._read_paths(None), drop_privileges=True)
        with Sandbox(tpolicy, base_dir=self.sandbox_dir) as tbox, Sandbox(spolicy, base_dir=self.sandbox_dir) as sbox:
            kernel_file = self._stage_sources(tbox, solution, entry_file)
            treq = HarnessRequest(
                mode="device", kernel_file=kernel_file, entry=entry, cases=[], compile_options=self.compile_options,
                neuron_profile="" if self.verify_summaries else (self.neuron_profile or ""),
                timing=TimingSpec(inputs_dir=str(inputs), warmup=self.warmup, runs=self.runs))
            child = tbox.spawn("hardware_agents.neuron.harness:run", treq, timeout_s=self.timing_timeout_s)
            timing = TimingLog()
            fail = functools.partial(self._fail, extra_tools=tools, counters=counters)
            try:
                verdict = self._rounds(problem, data, child, tbox, sbox, inputs, timing, checks, fail)
            finally:
                tout = child.finish()
            counters.update(timing.counters())  # `fail` shares this dict: a failed round's profile has them too
            prof = verdict or self._timed(problem, tout, timing, checks, counters, tools)
            prof.isolation = tout.isolation
            return prof

    @staticmethod
    def _stage_sources(box: Sandbox, solution: Solution, entry_file: str) -> str:
        for src in solution.sources:
            p = box.workdir / src.path
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(src.content)
            box.give(src.path)
        return str(box.workdir / entry_file)

    # --- judging ---------------------------------------------------------------------------

    def _stage(self, box: Sandbox) -> str:
        try:
            return box.read_file(".stage", 4096).decode(errors="replace")
        except OSError:
            return ""

    def _judge(self, problem: Problem, data: ProblemData, out: SandboxOutcome, box: Sandbox,
               ) -> tuple[Profile | None, list[SeedCheck], HarnessResult | None]:
        tail = f"\n--- kernel output ---\n{out.log}" if out.log.strip() else ""
        stage = self._stage(box)
        compiling = stage.startswith(("load", "compile"))
        if out.status in ("timeout", "cpu_limit"):
            what = "while compiling" if compiling else f"while running ({stage or 'unknown stage'})"
            return self._fail("timeout", f"{out.error} {what}{tail}"), [], None
        if out.status == "crashed":
            status = "compile_error" if compiling else "runtime_error"
            return self._fail(status, f"the harness crashed {'while compiling' if compiling else 'running the kernel'}"
                              f" ({stage}): {out.error}{tail}"), [], None
        if out.status == "unisolated":
            return self._fail("sandbox_error", out.error), [], None
        if out.status != "ok":
            return self._fail("runtime_error", f"{out.error}{tail}"), [], None
        try:
            res = out.decode(HarnessResult)
        except Exception as e:
            return self._fail("runtime_error", f"unreadable harness result: {e}{tail}"), [], None
        tools = res.versions
        if res.error is not None:
            err = res.error
            status = "runtime_error" if err.phase == "run" else "compile_error"
            where = f" (case {err.case})" if err.case else ""
            what = {"load": "loading the kernel module failed", "compile": "compilation failed",
                    "run": "the kernel failed at run time"}[err.phase]
            return self._fail(status, f"{what}{where}: {err.type}: {err.message}\n{err.traceback}{tail}",
                              tools), [], None
        if len(res.cases) != len(data.cases):
            return self._fail("runtime_error", f"the harness ran {len(res.cases)} of {len(data.cases)} cases{tail}",
                              tools), [], None
        ref_mod = ReferenceModule(problem)
        checks: list[SeedCheck] = []
        for case, run in zip(data.cases, res.cases, strict=True):
            if run.name != case.case.name:
                return self._fail("runtime_error", f"harness result out of order ({run.name} != {case.case.name})",
                                  tools), checks, None
            chk = self._check_outputs(problem, ref_mod, case.refs(), box, run.name, run.outputs, run.returned_tuple,
                                      self._output_cap(data))
            if run.mutated:
                chk.passed = False
                note = f"modified its input argument(s) {run.mutated}; inputs are read-only"
                chk.note = f"{chk.note}; {note}" if chk.note else note
            checks.append(chk)
        bad = [c for c in checks if not c.passed]
        if bad:
            return self._fail("incorrect", "\n".join(f"{c.case}: {c.note}" for c in bad) + tail, tools,
                              correctness=checks), checks, None
        return None, checks, res

    @staticmethod
    def _output_cap(data: ProblemData) -> int:
        return 2 * max(data.output_bytes.values(), default=0) + (1 << 20)

    def _check_outputs(self, problem: Problem, ref_mod: ReferenceModule, refs: dict[str, np.ndarray], box: Sandbox,
                       name: str, rels: list[str], returned_tuple: bool, cap: int) -> SeedCheck:
        """Judge one set of kernel outputs (files the child wrote) against the reference."""
        try:
            outs = []
            for rel in rels:
                with box.open_file(rel, max_bytes=cap) as f:
                    outs.append(np.load(f, allow_pickle=False))
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
        return validity.compare_outputs(name, got, refs, validity.tolerance_of(problem.definition),
                                        expected_dtypes=dtypes)

    # --- timing ----------------------------------------------------------------------------

    def _rounds(self, problem: Problem, data: ProblemData, child: SandboxChild, tbox: Sandbox, sbox: Sandbox,
                inputs: Path, log: TimingLog, checks: list[SeedCheck], fail: Callable[..., Profile]) -> Profile | None:
        """Drive the timing child's rounds (the handshake of protocol.py), filling `log`. Per
        round: fresh inputs drawn now, handed over while the child waits; our clock around its
        calls; every profiled run's output checked against our reference; the inputs checked;
        the profiler files read in `sbox`; their device times bounded by our clock. Returns a
        failed Profile, or None (the rounds ended, or the child left the protocol: the
        caller judges its outcome)."""
        ref_mod = ReferenceModule(problem)
        cap = self._output_cap(data)
        if not child.wait_stopped():  # exited (a load error) or died before its first round
            return None
        used = set(data.seeds)
        for k in range(self.max_rounds):
            if k and self.round_pause_s > 0:
                time.sleep(self.round_pause_s)  # the paper sleeps before re-measuring
            seed = fresh_seed(used)
            used.add(seed)
            rnd = TimingRound(problem, ref_mod, k, seed)
            specs = rnd.stage(inputs / round_dir(k))
            tmp = inputs / f"{round_file(k)}.tmp"
            tmp.write_bytes(msgspec.msgpack.encode(specs))
            os.chmod(tmp, 0o644)
            tmp.rename(inputs / round_file(k))
            t0 = time.perf_counter()
            child.resume()
            if not child.wait_stopped():  # loaded them and stopped, ready to be timed
                return None
            t1 = time.perf_counter()
            child.resume()
            if not child.wait_stopped():  # stopped after its calls
                return None
            rec = RoundRecord(index=k, seed=seed, setup_s=t1 - t0, wall_s=time.perf_counter() - t1)
            log.rounds.append(rec)
            try:
                report = msgspec.msgpack.decode(tbox.read_file(report_file(k), 1 << 20), type=ChildRound)
            except (OSError, msgspec.DecodeError) as e:
                return fail("runtime_error", f"timing round {k}: no readable report from the harness ({e})",
                            correctness=checks)
            if len(report.runs) != self.runs:
                return fail("runtime_error", f"timing round {k}: the harness reported {len(report.runs)} profiled "
                            f"runs; {self.runs} were asked for", correctness=checks)
            for i, run in enumerate(report.runs):
                rels = [timed_output(k, i, j) for j in range(min(run.outputs, 64))]
                chk = self._check_outputs(problem, ref_mod, rnd.refs, tbox, f"timed:{rnd.case.name}/run{i}", rels,
                                          run.returned_tuple, cap)
                if not chk.passed:
                    return fail("incorrect", f"the output of a timed run is wrong ({chk.case}: {chk.note}): results must not "
                                "depend on being timed", correctness=[*checks, chk])
            changed = rnd.changed_files()
            if report.mutated or changed:
                what = ", ".join([*(f"argument {j}" for j in report.mutated), *changed])
                return fail("incorrect", f"timing round {k}: modified its inputs ({what}) in timed calls; inputs are "
                            "read-only", correctness=checks)
            try:
                rec.summaries = self._summaries(tbox, sbox, k, report)
            except _Unisolated as e:
                return fail("sandbox_error", str(e), correctness=checks)
            if any(x is None for x in rec.summaries):
                break  # no complete reading of this round: judged with the rounds before it
            rec.device_s = sum(x.total_time_s for x in rec.summaries if x is not None)
            # The profiled runs execute one after another inside the interval our clock measured
            # (between two stops of the child), so their device times cannot add up to more.
            # There is no lower bound here: what nki.baremetal spends around each device run
            # (tracing, compiling, loading the NEFF, copying tensors, writing the trace) is not
            # known without a device, so the device time may be any fraction of our wall time;
            # the roofline gate (`max_pct_peak`) is the floor.
            if rec.device_s > rec.wall_s * 1.01 + 1e-3:
                return fail("timing_mismatch", f"timing round {k}: the profiler files report {rec.device_s * 1e3:.4g} "
                            f"ms of device time over {len(rec.summaries)} profiled runs, but the whole round took "
                            f"{rec.wall_s * 1e3:.4g} ms by our clock: the trace files were not written by these runs",
                            correctness=checks)
            if _spread(rec.summaries) <= self.spread_threshold:
                break
        child.resume()  # no inputs for another round: the child reports and exits
        if child.wait_stopped():  # one stop more than the protocol has: not our harness talking
            child.kill()
        return None

    def _summaries(self, tbox: Sandbox, sbox: Sandbox, k: int, report: ChildRound) -> list[ProfileSummary | None]:
        """The profiler's reading of round k's runs: copies of the NEFF/NTFF files summarized by
        neuron-profile in `sbox` (a child that loads neither the kernel nor the SDK); without
        `verify_summaries`, the timing child's own reading."""
        if not self.verify_summaries:
            return [ProfileSummary(total_time_s=r.total_time_s) if r.total_time_s else None for r in report.runs]
        # copies in a directory of ours (the summary child may read it, not write it)
        rdir = sbox.workdir / f"r{k}"
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
                with contextlib.suppress(OSError), tbox.open_file(rel, max_bytes=_MAX_PROFILE_FILE) as src, \
                        open(dst, "xb") as f:
                    shutil.copyfileobj(src, f)
            pairs.append((f"r{k}/{pair[0]}", f"r{k}/{pair[1]}"))
        try:
            sout = sbox.run("hardware_agents.neuron.summarizer:summarize",
                            SummaryRequest(neuron_profile=self.neuron_profile or "", pairs=pairs))
        finally:
            shutil.rmtree(rdir, ignore_errors=True)
        if sout.status == "unisolated":
            raise _Unisolated(sout.error)
        texts = sout.decode(SummaryResult).texts if sout.status == "ok" else []
        parsed: list[ProfileSummary | None] = []
        for text in texts[:len(pairs)] + [""] * (len(pairs) - len(texts)):
            try:
                parsed.append(parse_summary(text) if text else None)
            except SummaryError:
                parsed.append(None)
        return parsed

    def _timed(self, problem: Problem, out: SandboxOutcome, log: TimingLog, checks: list[SeedCheck],
               counters: dict[str, float], tools: dict[str, str]) -> Profile:
        """The verdict on rounds that all passed their checks: the child's outcome, then the
        round with the smallest spread, its statistics, the roofline and the plausibility gate."""
        tail = f"\n--- kernel output ---\n{out.log}" if out.log.strip() else ""
        if out.status == "unisolated":
            return self._fail("sandbox_error", out.error, tools, correctness=checks, counters=counters)
        if out.status in ("timeout", "cpu_limit"):
            return self._fail("timeout", f"timing: {out.error}{tail}", tools, correctness=checks, counters=counters)
        if out.status != "ok":
            return self._fail("runtime_error", f"timing: {out.error}{tail}", tools, correctness=checks,
                              counters=counters)
        try:
            res = out.decode(HarnessResult)
        except Exception as e:
            return self._fail("runtime_error", f"timing: unreadable harness result: {e}{tail}", tools,
                              correctness=checks, counters=counters)
        if res.error is not None or res.timing_error:
            msg = res.timing_error or f"{res.error.type}: {res.error.message}"  # type: ignore[union-attr]
            return self._fail("runtime_error", f"the kernel failed during timing: {msg}{tail}", tools,
                              correctness=checks, counters=counters)
        if out.stray_processes:
            return self._fail("runtime_error", f"the kernel left {out.stray_processes} process(es) running "
                              f"(killed){tail}", tools, correctness=checks, counters=counters)
        usable = [r for r in log.rounds if r.summaries and all(x is not None for x in r.summaries)]
        if not usable:
            return self._fail("unmeasured", f"correct, but no neuron-profile summary could be read from "
                              f"{sum(len(r.summaries) for r in log.rounds)} profiled runs{tail}", tools,
                              correctness=checks, counters=counters)
        best_rec = min(usable, key=lambda r: _spread(r.summaries))
        best = [x for x in best_rec.summaries if x is not None]
        samples = [x.total_time_s * 1e3 for x in best]
        stats = LatencyStats(samples_ms=samples, median_ms=statistics.median(samples), min_ms=min(samples),
                             max_ms=max(samples), spread=_spread(best_rec.summaries), reruns=len(log.rounds) - 1)
        first = best[0]
        counters.update(first.counters)
        counters["summary_total_time_ms"] = first.total_time_s * 1e3
        counters["latency_mean_ms"] = statistics.fmean(samples)
        counters["timing_round_kept"] = float(best_rec.index)
        missing = [f for f in COUNTER_FIELDS if f not in first.counters]
        tp, bound = t_peak(problem, self._spec)
        t_meas = stats.median_ms / 1e3
        if not math.isfinite(t_meas) or t_meas <= 0:
            return self._fail("runtime_error", f"non-finite or zero latency ({t_meas} s)", tools, correctness=checks,
                              counters=counters)
        terms = roofline_terms(problem)
        counters["achieved_gbs"] = terms.bytes_min / t_meas / 1e9
        counters["achieved_gflops"] = (terms.flops_matmul + terms.flops_vector) / t_meas / 1e9
        rounds = ", ".join(f"seed {r.seed}" for r in log.rounds)
        note = f"timed in {len(log.rounds)} round(s) on fresh inputs ({rounds})"
        log_text = f"{note}; profiler summary lacks {', '.join(missing)}" if missing else note
        why = validity.implausible(t_meas, tp, self.max_pct_peak)
        if why:
            return self._fail("incorrect", why, tools, correctness=checks, latency=stats, t_peak_ms=tp * 1e3,
                              pct_peak=pct_peak(tp, t_meas), bound=bound, counters=counters)
        return Profile(status="passed", device=self.kind, log=log_text, correctness=checks, latency=stats,
                       t_peak_ms=tp * 1e3, pct_peak=pct_peak(tp, t_meas), bound=bound, counters=counters,
                       toolchain={**self.toolchain(), **tools})


class _Unisolated(Exception):
    """The summary child could not be isolated (and the run does not allow that)."""


def _spread(summaries: Sequence[ProfileSummary | None]) -> float:
    ts = [x.total_time_s for x in summaries if x is not None]
    if not ts or min(ts) <= 0:
        return math.inf
    return (max(ts) - min(ts)) / min(ts)


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
        return {"timing_rounds": float(len(self.rounds)), "timing_wall_s": sum(r.wall_s for r in self.rounds),
                "timing_device_s": sum(r.device_s for r in self.rounds),
                "timing_setup_s": sum(r.setup_s for r in self.rounds)}


class Trn1Agent(NeuronAgent):
    kind: ClassVar[str] = "trn1"


class Trn2Agent(NeuronAgent):
    kind: ClassVar[str] = "trn2"


__all__ = ["DEFAULT_CC_FLAGS", "DEFAULT_COMPILE_OPTIONS", "NKIBENCH_SEEDS", "NeuronAgent", "Trn1Agent", "Trn2Agent",
           "extend_seeds", "lower_precision", "strip_comments"]
