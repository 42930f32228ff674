"""The CPU hardware agent: C11 + OpenMP kernels, compiled with gcc, run in the sandbox.

profile(problem, solution):
  1. static checks (language, no fp16/bf16 types);
  2. compile in the sandbox, cached by source hash -> `compile_error` with the compiler log;
  3. stage inputs + references (cached per problem), run the harness in a sandboxed child:
     crash -> `runtime_error`, wall/CPU limit -> `timeout`;
  4. judge every case's outputs against the float64 reference here, in the parent; input
     mutation, writes past a buffer, wrong timed outputs -> `incorrect`;
  5. latency statistics, roofline at the timed working set (cache-aware bandwidth),
     plausibility gate (faster than `max_pct_peak` x roofline -> `incorrect`) -> `passed`.

Only one sandboxed run times kernels on the machine at a time (a file lock under the cache
dir), so concurrent profiles never disturb each other's timings; compilation and data
staging run concurrently.
"""

from __future__ import annotations

import fcntl
import math
import re
import shutil
import threading
import time
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from accelopt.problem import Problem, Solution
from accelopt.profile import Profile, SeedCheck
from hardware_agents import validity
from hardware_agents.base import DEFAULT_SEEDS, DeviceSpec, HardwareAgent, pct_peak, roofline_terms, t_peak
from hardware_agents.cpu import harness as H
from hardware_agents.cpu.calibrate import CalibrationRecord, calibrate, load_calibration, raise_peaks
from hardware_agents.cpu.compiler import CFLAGS, LDLIBS, Compiler
from hardware_agents.cpu.data import DataCache, ProblemData
from hardware_agents.cpu.machine import DEFAULT_CC, machine_info, usable_cores
from hardware_agents.cpu.machine import cache_dir as default_cache_dir
from hardware_agents.sandbox import Sandbox, SandboxOutcome, SandboxPolicy

_LOW_PRECISION = re.compile(
    r"\b(_Float16|__fp16|__bf16|__m(?:128|256|512)bh|__m(?:128|256|512)h)\b|float16|_mm\d*_\w*(?:bf16|pbh)\w*")
_MAX_ROTATION_BYTES = 768 << 20


def _strip_comments(src: str) -> str:
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    return re.sub(r"//[^\n]*", " ", src)


def rotation_sets(set_bytes: int, contents: int, l3_bytes: int) -> int:
    """Buffer sets for the timed loop: footprint >= 2x L3 when memory allows, more sets
    than contents, and not a multiple of the content count (so contents move between
    buffers)."""
    r = math.ceil(2 * l3_bytes / max(set_bytes, 1))
    r = min(r, 64, max(1, _MAX_ROTATION_BYTES // max(set_bytes, 1)))
    r = max(r, contents + 1)
    while contents > 1 and r % contents == 0:  # one content cannot move: nothing to avoid
        r += 1
    return r


class CpuAgent(HardwareAgent):
    kind: ClassVar[str] = "cpu"
    languages: ClassVar[tuple[str, ...]] = ("c",)

    def __init__(self, *, cache_dir: str | Path | None = None, spec: DeviceSpec | None = None,
                 calibrate_if_missing: bool = True, quick_calibration: bool = False,
                 timeout_s: float = 60.0, timing_budget_s: float = 0.15, max_reruns: int = 2,
                 spread_threshold: float = 0.10, max_pct_peak: float = 1.5, threads: int | None = None,
                 exclusive_timing: bool = True, sandbox_dir: str | Path | None = None, cc: str = DEFAULT_CC,
                 data_cache_problems: int = 3) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self._spec = spec
        self._calibration: CalibrationRecord | None = None
        self.calibrate_if_missing = calibrate_if_missing
        self.quick_calibration = quick_calibration
        self.timeout_s = timeout_s
        self.timing_budget_s = timing_budget_s
        self.max_reruns = max_reruns
        self.spread_threshold = spread_threshold
        self.max_pct_peak = max_pct_peak
        self.threads = threads or usable_cores()
        self.exclusive_timing = exclusive_timing
        self.sandbox_dir = Path(sandbox_dir) if sandbox_dir else None
        self.cc = cc
        self.compiler = Compiler(self.cache_dir, cc=cc)
        self.data = DataCache(data_cache_problems, self.sandbox_dir)
        self._spec_lock = threading.Lock()
        self._lock_path = self.cache_dir / "cpu" / "device.lock"
        self._peaks_raised_at: float | None = None

    # --- device --------------------------------------------------------------------------

    @property
    def device(self) -> DeviceSpec:
        with self._spec_lock:
            if self._spec is None:
                rec = load_calibration(self.cache_dir)
                if rec is None:
                    if not self.calibrate_if_missing:
                        raise RuntimeError("no CPU calibration for this machine: run `accelopt calibrate`")
                    rec = calibrate(self.cache_dir, quick=self.quick_calibration, cc=self.cc)
                self._calibration = rec
                self._spec = rec.spec
            return self._spec

    def toolchain(self) -> dict[str, str]:
        m = machine_info(self.cc)
        out = {"compiler": self.compiler.version, "cflags": " ".join(CFLAGS + LDLIBS), "numpy": np.__version__,
               "cpu": m.cpu_model, "cores": str(m.cores), "kernel": m.kernel, "omp_threads": str(self.threads)}
        if self._calibration is not None:
            out["calibration"] = f"{'quick' if self._calibration.quick else 'full'} {self._calibration.created}"
        return out

    def close(self) -> None:
        self.data.close()

    # --- profile -------------------------------------------------------------------------

    def profile(self, problem: Problem, solution: Solution, *, seeds: Sequence[int] = DEFAULT_SEEDS,
                timeout_s: float | None = None, measure: bool = True) -> Profile:
        t0 = time.perf_counter()
        prof = self._profile(problem, solution, tuple(int(s) for s in seeds), timeout_s or self.timeout_s, measure)
        prof.wall_s = time.perf_counter() - t0
        return prof

    def _fail(self, status: str, log: str, **kw: Any) -> Profile:
        return Profile(status=status, device=self.kind, log=log, toolchain=self.toolchain(), **kw)  # type: ignore[arg-type]

    def _profile(self, problem: Problem, solution: Solution, seeds: tuple[int, ...], timeout: float,
                 measure: bool) -> Profile:
        if solution.spec.language != "c":
            return self._fail("compile_error", f"the CPU agent compiles C; this solution is {solution.spec.language!r}")
        if not seeds:
            raise ValueError("at least one correctness seed is required")
        for src in solution.sources:
            m = _LOW_PRECISION.search(_strip_comments(src.content))
            if m:
                return self._fail("incorrect", f"{src.path}: uses a lower-precision type or intrinsic ({m.group(0)}); "
                                  "kernels must compute in fp32 or wider")
        try:
            entry = solution.entry_symbol
        except IndexError:
            return self._fail("compile_error", f"entry point {solution.spec.entry_point!r} is not FILE::SYMBOL")
        build = self.compiler.build(solution, problem.axis_values())
        if not build.ok or build.so_path is None:
            return self._fail("compile_error", build.log)
        data = self.data.get(problem, seeds)
        spec = self.device if measure else None
        with Sandbox(self._policy(problem, data, seeds, timeout), base_dir=self.sandbox_dir) as box:
            shutil.copyfile(build.so_path, box.workdir / "kernel.so")
            box.give("kernel.so")
            request = self._request(problem, data, seeds, str(box.workdir / "kernel.so"), entry, measure)
            with self._device_lock():
                out = box.run("hardware_agents.cpu.harness:run_kernel", request, timeout_s=timeout)
            try:
                prof = self._judge(problem, data, seeds, out, box, spec)
            except Exception as e:  # a result the kernel tampered with must not crash the agent
                prof = self._fail("runtime_error", f"invalid harness result ({type(e).__name__}: {e})\n{out.log}")
        prof.counters["compile_s"] = build.seconds
        prof.counters["compile_cached"] = float(build.cached)
        return prof

    def _policy(self, problem: Problem, data: ProblemData, seeds: tuple[int, ...], timeout: float) -> SandboxPolicy:
        rot = rotation_sets(data.set_bytes, len(seeds), machine_info(self.cc).l3_bytes)
        data_bytes = data.set_bytes * (3 * len(data.cases) + rot + len(seeds))
        out_max = max((r.nbytes // max(r.itemsize, 1) * 4 for c in data.cases for r in c.ref64.values()), default=0)
        return SandboxPolicy(
            wall_timeout_s=timeout, address_space_bytes=(1 << 30) + 2 * data_bytes, max_processes=64,
            max_file_bytes=max(64 << 20, 2 * out_max + (1 << 20)), read_paths=(str(data.dir),),
            env={"OMP_NUM_THREADS": str(self.threads), "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                 "OMP_DYNAMIC": "false"},
        )

    def _request(self, problem: Problem, data: ProblemData, seeds: tuple[int, ...], library: str, entry: str,
                 measure: bool) -> H.HarnessRequest:
        d = problem.definition
        axes = problem.axis_values()
        first = data.cases[0]
        args: list[H.ArgSpec] = []
        for name, ts in d.inputs.items():
            shape = d.shape_of(name, axes)
            scalar = first.inputs[name] if shape is None else None
            args.append(H.ArgSpec(name=name, role="in", dtype=ts.dtype, shape=None if shape is None else list(shape),
                                  scalar=scalar))  # type: ignore[arg-type]
        for name, ts in d.outputs.items():
            shape = d.shape_of(name, axes)
            if shape is None:
                raise ValueError(f"{problem.name}: scalar outputs are not supported by the CPU calling convention")
            args.append(H.ArgSpec(name=name, role="out", dtype=ts.dtype, shape=list(shape)))
        cases = [H.CaseSpec(name=c.case.name, inputs=c.input_files, refs=c.ref_files) for c in data.cases]
        timing = None
        if measure:
            contents = [c.case.name for c in data.cases if not c.case.adversarial]
            timing = H.TimingSpec(contents=contents,
                                  rotation=rotation_sets(data.set_bytes, len(contents), machine_info(self.cc).l3_bytes),
                                  budget_s=self.timing_budget_s, max_reruns=self.max_reruns,
                                  spread_threshold=self.spread_threshold)
        return H.HarnessRequest(library=library, symbol=entry, args=args, cases=cases,
                                tolerance=validity.tolerance_of(d), timing=timing, seed=seeds[0])

    @contextmanager
    def _device_lock(self):  # type: ignore[no-untyped-def]
        if not self.exclusive_timing:
            yield
            return
        self._lock_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self._lock_path, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    # re-measure the peaks at most this often per agent: a kernel that fakes its speed on
    # every call must not turn every profile into a calibration
    RAISE_PEAKS_EVERY_S: ClassVar[float] = 600.0

    def _raise_peaks(self) -> bool:
        """Re-measure this machine's peaks (with the device to itself) and keep the higher
        values; True if that was done. Only for a measured calibration, rate-limited."""
        if self._calibration is None or not self._calibration.spec.measured:
            return False
        now = time.monotonic()
        if self._peaks_raised_at is not None and now - self._peaks_raised_at < self.RAISE_PEAKS_EVERY_S:
            return False
        self._peaks_raised_at = now
        with self._device_lock():
            rec = raise_peaks(self.cache_dir, self._calibration, cc=self.cc)
        with self._spec_lock:
            self._calibration, self._spec = rec, rec.spec
        return True

    # --- judging -------------------------------------------------------------------------

    def _read_outputs(self, box: Sandbox, problem: Problem, paths: dict[str, str]) -> dict[str, np.ndarray]:
        shapes = problem.output_shapes()
        out = {}
        for name, rel in paths.items():
            expected = np.dtype(validity.numpy_dtype(problem.definition.outputs[name].dtype))
            with box.open_file(rel, max_bytes=expected.itemsize * math.prod(shapes[name] or ()) + (1 << 16)) as f:
                arr = np.load(f, allow_pickle=False)
            if arr.dtype != expected or tuple(arr.shape) != shapes[name]:
                raise ValueError(f"output file {rel} has {arr.dtype}{arr.shape}, expected {expected}{shapes[name]}")
            out[name] = arr
        return out

    def _judge(self, problem: Problem, data: ProblemData, seeds: tuple[int, ...], out: SandboxOutcome,
               box: Sandbox, spec: DeviceSpec | None) -> Profile:
        log_tail = f"\n--- kernel output ---\n{out.log}" if out.log.strip() else ""
        counters: dict[str, float] = {"sandbox_wall_s": out.wall_s}
        if out.status in ("timeout", "cpu_limit"):
            return self._fail("timeout", f"{out.error}{log_tail}", counters=counters)
        if out.status == "crashed":
            return self._fail("runtime_error", f"the kernel crashed the harness: {out.error}{log_tail}",
                              counters=counters)
        if out.status == "error":
            status = "compile_error" if out.error_type == "EntrySymbolMissing" else "runtime_error"
            return self._fail(status, f"{out.error}{log_tail}", counters=counters)
        try:
            res = out.decode(H.HarnessResult)
        except Exception as e:
            return self._fail("runtime_error", f"unreadable harness result: {e}{log_tail}", counters=counters)
        tol = validity.tolerance_of(problem.definition)
        by_name = {c.case.name: c for c in data.cases}
        checks: list[SeedCheck] = []
        try:
            for run in res.cases:
                case = by_name[run.name]
                outputs = self._read_outputs(box, problem, {n: H.case_output_path(run.name, n) for n in case.ref64})
                chk = validity.compare_outputs(run.name, outputs, case.ref64, tol, stats=case.stats)
                extra = []
                if run.mutated:
                    extra.append(f"modified its input(s) {', '.join(run.mutated)}; inputs are read-only")
                if run.overflow:
                    extra.append(f"wrote outside the bounds of {', '.join(run.overflow)}")
                if extra:
                    chk.passed = False
                    chk.note = "; ".join([chk.note, *extra]) if chk.note else "; ".join(extra)
                checks.append(chk)
        except (OSError, ValueError, KeyError) as e:
            return self._fail("runtime_error", f"cannot read the kernel's outputs: {e}{log_tail}", correctness=checks)
        if len(checks) != len(data.cases):
            return self._fail("runtime_error", f"harness ran {len(checks)} of {len(data.cases)} cases{log_tail}",
                              correctness=checks)
        counters["kernel_s_total"] = res.kernel_s
        counters.update({f"harness_{k}_s": v for k, v in res.phase_s.items()})
        if out.stray_processes:
            return self._fail("runtime_error", f"the kernel left {out.stray_processes} process(es) running "
                              f"(killed){log_tail}", correctness=checks, counters=counters)
        failed = [c for c in checks if not c.passed]
        if failed:
            log = "\n".join(f"{c.case}: {c.note}" for c in failed)
            return self._fail("incorrect", log + log_tail, correctness=checks, counters=counters)
        if spec is None:
            return self._fail("unmeasured", "correct; timing not requested", correctness=checks, counters=counters)
        if res.skipped_timing or res.chosen < 0:
            return self._fail("unmeasured", res.skipped_timing or "no timing result", correctness=checks,
                              counters=counters)
        # timed calls: spot checks on every call, full check of the last output per content
        spot = sum(r.spot_failures for r in res.timing)
        n_timed = sum(len(r.samples_ms) for r in res.timing)
        if spot:
            return self._fail("incorrect", f"{spot} of {n_timed} timed calls returned wrong values at spot-checked "
                              "elements: results must not depend on earlier calls", correctness=checks,
                              counters=counters)
        for content in res.timed_contents:
            case = by_name[content]
            try:
                outputs = self._read_outputs(box, problem, {n: H.timed_output_path(content, n) for n in case.ref64})
            except (OSError, ValueError) as e:
                return self._fail("runtime_error", f"cannot read timed outputs: {e}", correctness=checks)
            chk = validity.compare_outputs(f"timed:{content}", outputs, case.ref64, tol, stats=case.stats)
            if not chk.passed:
                return self._fail("incorrect", f"output of a timed call is wrong ({chk.note})",
                                  correctness=[*checks, chk], counters=counters)
        chosen = res.timing[res.chosen]
        stats = validity.latency_stats(chosen.samples_ms, reruns=len(res.timing) - 1)
        if sum(chosen.samples_ms) / 1e3 > out.wall_s:
            return self._fail("runtime_error", "reported kernel time exceeds the child's wall time",
                              correctness=checks, counters=counters)
        tp, bound = t_peak(problem, spec, working_set_bytes=res.footprint_bytes)
        t_meas = stats.median_ms / 1e3
        terms = roofline_terms(problem)
        counters.update({
            "footprint_bytes": float(res.footprint_bytes), "bw_at_footprint_gbs": spec.bandwidth_at(res.footprint_bytes) / 1e9,
            "reps": float(len(chosen.samples_ms)), "achieved_gbs": terms.bytes_min / t_meas / 1e9,
            "achieved_gflops": (terms.flops_matmul + terms.flops_vector) / t_meas / 1e9,
            "threads": float(self.threads),
        })
        why = validity.implausible(t_meas, tp, self.max_pct_peak)
        if why and self._raise_peaks():  # the peaks may have been measured on a busy machine
            spec = self.device
            tp, bound = t_peak(problem, spec, working_set_bytes=res.footprint_bytes)
            counters["bw_at_footprint_gbs"] = spec.bandwidth_at(res.footprint_bytes) / 1e9
            counters["peaks_raised"] = 1.0
            why = validity.implausible(t_meas, tp, self.max_pct_peak)
        if why:
            return self._fail("incorrect", why, correctness=checks, latency=stats, t_peak_ms=tp * 1e3,
                              pct_peak=pct_peak(tp, t_meas), bound=bound, counters=counters)
        return Profile(status="passed", device=self.kind, log=out.log, correctness=checks, latency=stats,
                       t_peak_ms=tp * 1e3, pct_peak=pct_peak(tp, t_meas), bound=bound, counters=counters,
                       toolchain=self.toolchain())
