"""The Neuron hardware agent: NKI kernels on Trainium (trn1, trn2), in a sandbox.

profile(problem, solution):
  1. static checks: language `nki`, no lower precision (float16/bfloat16/fp8/tf32) in the
     source (comments stripped), as NKIBench rejects it;
  2. inputs for seeds 0, 21, 42, 63, 84 (at least `min_seeds`) plus adversarial cases,
     transformed with the problem's `transform_to_nki_inputs`; float64 references;
  3. a sandboxed child compiles and runs the kernel on every case (`nki.baremetal` with
     NEURON_CC_FLAGS=--auto-cast=none on one pinned NeuronCore, or `nki.simulate_kernel`
     without a device). Load/trace/compile failures -> `compile_error`; failures after a
     NEFF exists (or naming the Neuron runtime), crashes -> `runtime_error`;
  4. outputs mapped with `transform_nki_outputs` and judged here against the reference
     (relative L2 per problem, plus the validity layer's elementwise bound) -> `incorrect`;
  5. device only: a second child runs the paper's timing loop (2 warm-ups, 10 profiled runs,
     re-run while (max - min) / min > 1 %, up to 10 rounds); a third child, which loads no
     kernel code, runs `neuron-profile view --output-format summary-json` on every NEFF/NTFF
     pair; the round with the smallest spread is kept; its first summary fills the counters
     (the paper's 16 profiler fields); roofline with the cited peaks; a result faster than
     `max_pct_peak` x the roofline is rejected as `incorrect`;
  6. without a device (or without neuron-profile, or with measure=False): `unmeasured`.

Without the SDK the constructor raises `NeuronSDKMissing`, naming what to install.
"""

from __future__ import annotations

import io
import math
import os
import re
import stat
import statistics
import time
import tokenize
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import msgspec
import numpy as np

from accelopt.problem import Problem, Solution
from accelopt.profile import LatencyStats, Profile, SeedCheck
from hardware_agents import validity
from hardware_agents.base import DEFAULT_SEEDS, DeviceSpec, HardwareAgent, pct_peak, roofline_terms, t_peak
from hardware_agents.neuron import sdk
from hardware_agents.neuron.data import CaseData, DataCache, ProblemData
from hardware_agents.neuron.protocol import (
    CaseSpec,
    HarnessRequest,
    HarnessResult,
    Mode,
    SummaryRequest,
    SummaryResult,
    TimingSpec,
)
from hardware_agents.neuron.reference import ReferenceModule
from hardware_agents.neuron.specs import SPECS
from hardware_agents.neuron.summary import COUNTER_FIELDS, ProfileSummary, SummaryError, parse_summary
from hardware_agents.sandbox import Sandbox, SandboxOutcome, SandboxPolicy

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

    def __init__(self, *, mode: Literal["auto", "device", "simulate"] = "auto",
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
        info = sdk.find_sdk(list(sdk_path))
        if info is None:
            raise sdk.NeuronSDKMissing(sdk.install_hint(self.kind))
        self.sdk = info
        self._spec = spec or SPECS[self.kind]
        self.neuron_profile = sdk.find_neuron_profile(neuron_profile)
        self.devices = sdk.neuron_devices(device_glob)
        if mode == "auto":
            mode = "device" if self.devices else "simulate"
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
        self.data = DataCache(data_cache_problems, self.sandbox_dir)

    # --- device ----------------------------------------------------------------------------

    @property
    def device(self) -> DeviceSpec:
        return self._spec

    def toolchain(self) -> dict[str, str]:
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
            read_paths=(str(data.dir), *self.sdk.python_path,
                        *([os.path.dirname(self.neuron_profile)] if self.neuron_profile else [])),
            python_path=self.sdk.python_path,
            write_paths=tuple(self.devices) if device else (), env=self.child_env(),
        )
        if device and os.geteuid() == 0 and any(
                (os.stat(d).st_mode & (stat.S_IROTH | stat.S_IWOTH)) != (stat.S_IROTH | stat.S_IWOTH)
                for d in self.devices):
            opts["drop_privileges"] = False  # the runtime must open device nodes that only root may use
        opts.update(self.sandbox_options)
        return SandboxPolicy(**opts)

    # --- profile ---------------------------------------------------------------------------

    def profile(self, problem: Problem, solution: Solution, *, seeds: Sequence[int] = DEFAULT_SEEDS,
                timeout_s: float | None = None, measure: bool = True) -> Profile:
        t0 = time.perf_counter()
        prof = self._profile(problem, solution, extend_seeds(seeds, self.min_seeds), timeout_s or self.timeout_s,
                             measure)
        prof.wall_s = time.perf_counter() - t0
        return prof

    def _fail(self, status: str, log: str, extra_tools: dict[str, str] | None = None, **kw: Any) -> Profile:
        return Profile(status=status, device=self.kind, log=log,  # type: ignore[arg-type]
                       toolchain={**self.toolchain(), **(extra_tools or {})}, **kw)

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
        with Sandbox(policy, base_dir=self.sandbox_dir) as box:
            kernel_file = self._stage_sources(box, solution, entry_file)
            req = HarnessRequest(mode=self.mode, kernel_file=kernel_file, entry=entry,
                                 cases=[CaseSpec(name=c.case.name, args=c.args) for c in data.cases],
                                 compile_options=self.compile_options if self.mode == "device" else "")
            out = box.run("hardware_agents.neuron.harness:run", req, timeout_s=timeout)
            failed, checks, res = self._judge(problem, data, out, box)
        if failed is not None:
            return failed
        assert res is not None
        tools = {**res.versions}
        counters: dict[str, float] = {"compile_s": res.compile_s}
        if not measure:
            return self._fail("unmeasured", "correct; timing not requested", tools, correctness=checks,
                              counters=counters)
        if self.mode == "simulate":
            return self._fail("unmeasured", "correct in nki.simulate_kernel (no Neuron device on this host: "
                              "not timed)", tools, correctness=checks, counters=counters)
        if not self.neuron_profile:
            return self._fail("unmeasured", "correct on the device, but neuron-profile was not found (install "
                              "aws-neuronx-tools): not timed", tools, correctness=checks, counters=counters)
        timed = [c for c in data.cases if not c.case.adversarial][-1]
        # A fresh work dir: nothing the correctness run left behind (a rewritten kernel module,
        # planted profiler files) reaches the timing run.
        with Sandbox(msgspec.structs.replace(policy, wall_timeout_s=self.timing_timeout_s),
                     base_dir=self.sandbox_dir) as tbox:
            kernel_file = self._stage_sources(tbox, solution, entry_file)
            treq = HarnessRequest(
                mode="device", kernel_file=kernel_file, entry=entry, cases=[],
                compile_options=self.compile_options, neuron_profile=self.neuron_profile,
                timing=TimingSpec(args=timed.args, warmup=self.warmup, runs=self.runs, max_rounds=self.max_rounds,
                                  spread_threshold=self.spread_threshold, pause_s=self.round_pause_s))
            tout = tbox.run("hardware_agents.neuron.harness:run", treq, timeout_s=self.timing_timeout_s)
            return self._timed(problem, data, timed, tbox, tout, checks, counters, tools)

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
            chk = self._check_outputs(problem, ref_mod, data, case, box, run.name, run.outputs, run.returned_tuple)
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

    def _check_outputs(self, problem: Problem, ref_mod: ReferenceModule, data: ProblemData, case: CaseData,
                       box: Sandbox, name: str, rels: list[str], returned_tuple: bool) -> SeedCheck:
        """Judge one set of kernel outputs (files the child wrote) against the case's reference."""
        cap = 2 * max(data.output_bytes.values(), default=0) + (1 << 20)
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
        refs = case.refs()
        try:
            got = ref_mod.kernel_outputs(kernel_out, refs)
        except ValueError as e:
            return SeedCheck(case=name, passed=False, note=str(e))
        dtypes = {n: s.dtype for n, s in problem.definition.outputs.items()}
        return validity.compare_outputs(name, got, refs, validity.tolerance_of(problem.definition),
                                        expected_dtypes=dtypes)

    def _summaries(self, box: Sandbox, res: HarnessResult) -> list[list[ProfileSummary | None]]:
        pairs = [(r.neff, r.ntff) for rnd in res.rounds for r in rnd.runs]
        parsed: list[ProfileSummary | None] = []
        if self.verify_summaries and pairs:
            sreq = SummaryRequest(neuron_profile=self.neuron_profile or "", pairs=pairs)
            sout = box.run("hardware_agents.neuron.harness:summarize", sreq,
                           timeout_s=max(60.0, 30.0 * len(pairs)))
            texts = sout.decode(SummaryResult).texts if sout.status == "ok" else []
            for text in texts + [""] * (len(pairs) - len(texts)):
                try:
                    parsed.append(parse_summary(text) if text else None)
                except SummaryError:
                    parsed.append(None)
        else:
            parsed = [ProfileSummary(total_time_s=r.total_time_s) if r.total_time_s else None
                      for rnd in res.rounds for r in rnd.runs]
        out, i = [], 0
        for rnd in res.rounds:
            out.append(parsed[i:i + len(rnd.runs)])
            i += len(rnd.runs)
        return out

    def _timed(self, problem: Problem, data: ProblemData, timed: CaseData, box: Sandbox, out: SandboxOutcome,
               checks: list[SeedCheck], counters: dict[str, float], tools: dict[str, str]) -> Profile:
        tail = f"\n--- kernel output ---\n{out.log}" if out.log.strip() else ""
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
        rounds = self._summaries(box, res)
        usable = [(i, [s for s in rnd if s is not None]) for i, rnd in enumerate(rounds)]
        usable = [(i, rnd) for i, rnd in usable if rnd and len(rnd) == len(rounds[i])]
        if not usable:
            return self._fail("unmeasured", f"correct, but no neuron-profile summary could be read from "
                              f"{sum(len(r) for r in rounds)} profiled runs{tail}", tools, correctness=checks,
                              counters=counters)

        def rel_spread(rnd: list[ProfileSummary]) -> float:
            ts = [s.total_time_s for s in rnd]
            return (max(ts) - min(ts)) / min(ts)

        best_i, best = min(usable, key=lambda item: rel_spread(item[1]))
        kept = res.rounds[best_i]
        chk = self._check_outputs(problem, ReferenceModule(problem), data, timed, box, f"timed:{timed.case.name}",
                                  kept.outputs, kept.returned_tuple)
        if not chk.passed:
            return self._fail("incorrect", f"the output of a timed run is wrong ({chk.note}): results must not "
                              "depend on being timed", tools, correctness=[*checks, chk], counters=counters)
        samples = [s.total_time_s * 1e3 for s in best]
        stats = LatencyStats(samples_ms=samples, median_ms=statistics.median(samples), min_ms=min(samples),
                             max_ms=max(samples), spread=rel_spread(best), reruns=len(rounds) - 1)
        first = best[0]
        counters.update(first.counters)
        counters["summary_total_time_ms"] = first.total_time_s * 1e3
        counters["latency_mean_ms"] = statistics.fmean(samples)
        counters["timing_rounds"] = float(len(rounds))
        counters["timing_round_kept"] = float(best_i)
        missing = [f for f in COUNTER_FIELDS if f not in first.counters]
        tp, bound = t_peak(problem, self._spec)
        t_meas = stats.median_ms / 1e3
        terms = roofline_terms(problem)
        counters["achieved_gbs"] = terms.bytes_min / t_meas / 1e9
        counters["achieved_gflops"] = (terms.flops_matmul + terms.flops_vector) / t_meas / 1e9
        log = f"profiler summary lacks {', '.join(missing)}" if missing else ""
        why = validity.implausible(t_meas, tp, self.max_pct_peak)
        if why:
            return self._fail("incorrect", why, tools, correctness=checks, latency=stats, t_peak_ms=tp * 1e3,
                              pct_peak=pct_peak(tp, t_meas), bound=bound, counters=counters)
        if not math.isfinite(t_meas):
            return self._fail("runtime_error", "non-finite latency", tools, correctness=checks, counters=counters)
        return Profile(status="passed", device=self.kind, log=log, correctness=checks, latency=stats,
                       t_peak_ms=tp * 1e3, pct_peak=pct_peak(tp, t_meas), bound=bound, counters=counters,
                       toolchain={**self.toolchain(), **tools})


class Trn1Agent(NeuronAgent):
    kind: ClassVar[str] = "trn1"


class Trn2Agent(NeuronAgent):
    kind: ClassVar[str] = "trn2"


__all__ = ["DEFAULT_CC_FLAGS", "DEFAULT_COMPILE_OPTIONS", "NKIBENCH_SEEDS", "NeuronAgent", "Trn1Agent", "Trn2Agent",
           "extend_seeds", "lower_precision", "strip_comments"]
