"""The CPU hardware agent: C11 + OpenMP kernels, compiled with gcc, run in the sandbox.

profile(problem, solution), through the stages of `pipeline/stages.py` (`stages.py`):
  1. static checks (language, no fp16/bf16 types, the entry symbol);
  2. build: compile in the sandbox, cached by source hash -> `compile_error` with the log;
  3. stage inputs + references (cached per problem), the kernel's sandbox;
  4. correctness: the kernel server in a sandboxed child runs every case, judged against the
     float64 reference here, in the parent: crash -> `runtime_error`, wall/CPU limit ->
     `timeout`, input mutation, writes past a buffer -> `incorrect`;
  5. timing rounds: timed batches on the parent's clock, every batch checked (wrong timed
     outputs -> `incorrect`); there is no kernel clock to bound (clock bound: skipped);
  6. roofline gate at the timed working set (cache-aware bandwidth): faster than
     `max_pct_peak` x roofline -> `incorrect`;
  7. verdict: the deferred full checks of timed calls, after the device lock is released.

Only one sandboxed run times kernels on the machine at a time (a file lock of this user's on
the host, `host_files.py`, whatever the cache dir), so concurrent profiles never disturb each
other's timings; compilation and data staging run concurrently.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import msgspec
import numpy as np

from accelopt.problem import Problem, Solution
from accelopt.profile import Profile
from hardware_agents.base import HardwareAgent
from hardware_agents.cpu.calibrate import CalibrationRecord, calibrate, load_calibration, raise_peaks
from hardware_agents.cpu.compiler import CFLAGS, LDLIBS, Compiler
from hardware_agents.cpu.data import ProblemData
from hardware_agents.cpu.judge import TimingRules
from hardware_agents.cpu.machine import DEFAULT_CC, machine_info, usable_cores
from hardware_agents.cpu.machine import cache_dir as default_cache_dir
from hardware_agents.cpu.stages import MAX_REGION_BYTES, MAX_TIMED_SETS, CpuStages, timing_sets
from hardware_agents.datacache import DataCache
from hardware_agents.host_files import host_folder, lock_exclusive, open_private
from hardware_agents.pipeline.device_spec import DeviceSpec
from hardware_agents.pipeline.stages import Stages
from hardware_agents.quiet import single_threaded_blas
from hardware_agents.sandbox import SandboxPolicy, sweep_orphans

# how long a profile waits for another to finish timing on this host (a campaign's profiles
# queue for minutes; a holder stopped with Ctrl-Z holds forever): then an error naming it
LOCK_WAIT_S = 1800.0
WORKDIR_BYTES = 128 << 20  # the kernel server's work dir (its own tmpfs): the .so and nothing else


class CpuAgent(HardwareAgent):
    kind: ClassVar[str] = "cpu"
    languages: ClassVar[tuple[str, ...]] = ("c",)

    def __init__(
        self,
        *,
        cache_dir: str | Path | None = None,
        spec: DeviceSpec | None = None,
        calibrate_if_missing: bool = True,
        quick_calibration: bool = False,
        timeout_s: float = 60.0,
        timing_budget_s: float = 0.15,
        max_reruns: int = 2,
        spread_threshold: float = 0.10,
        max_pct_peak: float = 1.5,
        threads: int | None = None,
        exclusive_timing: bool = True,
        sandbox_dir: str | Path | None = None,
        cc: str = DEFAULT_CC,
        data_cache_problems: int = 3,
        sandbox_options: dict[str, Any] | None = None,
    ) -> None:
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
        # the cores a kernel runs on: `threads` of this process's CPU mask (its server is pinned to
        # them and may not widen that; its CPU time per batch is bounded by wall x their number)
        self.cpus: tuple[int, ...] = tuple(sorted(os.sched_getaffinity(0))[: self.threads])
        sweep_orphans()  # kernel servers of an agent that died (SIGKILL) are killed at start-up
        self.exclusive_timing = exclusive_timing
        self.sandbox_dir = Path(sandbox_dir) if sandbox_dir else None
        self.cc = cc
        self.sandbox_options = dict(sandbox_options or {})  # SandboxPolicy fields (tests take walls down)
        self.compiler = Compiler(self.cache_dir, cc=cc)
        self.data: DataCache[ProblemData] = DataCache(
            lambda p, seeds, _root: ProblemData(p, seeds), capacity=data_cache_problems
        )
        self._spec_lock = threading.Lock()
        # one lock for the host, whatever the cache dir: two campaigns (or a campaign and
        # `accelopt profile`) with their own caches must not time kernels on the same cores at once
        self._lock_path = host_folder() / "cpu-timing.lock"
        self.lock_wait_s = LOCK_WAIT_S
        self._peaks_raised_at: float | None = None

    # --- device --------------------------------------------------------------------------

    @property
    def spec(self) -> DeviceSpec:
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
        out = {
            "compiler": self.compiler.version,
            "cflags": " ".join(CFLAGS + LDLIBS),
            "numpy": np.__version__,
            "cpu": m.cpu_model,
            "cores": str(m.cores),
            "kernel": m.kernel,
            "omp_threads": str(self.threads),
        }
        if self._calibration is not None:
            out["calibration"] = (
                f"{'quick' if self._calibration.quick else 'full'} {self._calibration.created}"
            )
        return out

    def close(self) -> None:
        self.data.close()

    # --- profile -------------------------------------------------------------------------

    def _profile(
        self, problem: Problem, solution: Solution, seeds: tuple[int, ...], timeout: float, measure: bool
    ) -> Profile:
        with single_threaded_blas():  # the parent's numpy must not spin on a core the kernel needs
            return super()._profile(problem, solution, seeds, timeout, measure)

    def stages(
        self, problem: Problem, solution: Solution, seeds: tuple[int, ...], timeout_s: float, measure: bool
    ) -> Stages:
        return CpuStages(self, problem, solution, seeds, timeout_s, measure)

    # --- the device context the stages use (`stages.CpuDevice`) ---------------------------

    def timing_rules(self) -> TimingRules:
        """How the judge times a kernel here: its cores and threads, the batch budget, reruns,
        the spread allowed and the plausibility gate."""
        return TimingRules(
            threads=self.threads,
            cpus=self.cpus,
            timing_budget_s=self.timing_budget_s,
            max_reruns=self.max_reruns,
            spread_threshold=self.spread_threshold,
            max_pct_peak=self.max_pct_peak,
        )

    def sandbox_policy(self, data: ProblemData, sets: int) -> SandboxPolicy:
        """The kernel server's sandbox, with room for `sets` buffer sets of `data`."""
        region = sets * (data.set_bytes + 4096 * (1 + 2 * len(data.problem.definition.outputs)))
        policy = SandboxPolicy(
            address_space_bytes=(1 << 30) + 2 * region,
            max_processes=64,
            max_file_bytes=16 << 20,
            no_fork=True,
            cpus=self.cpus,
            workdir_bytes=WORKDIR_BYTES,
            env={
                "OMP_NUM_THREADS": str(self.threads),
                "OPENBLAS_NUM_THREADS": "1",
                "MKL_NUM_THREADS": "1",
                "OMP_DYNAMIC": "false",
                "OMP_WAIT_POLICY": "passive",
            },
        )
        return msgspec.structs.replace(policy, **self.sandbox_options) if self.sandbox_options else policy

    @contextmanager
    def device_lock(self) -> Iterator[None]:
        """The machine for one timing run at a time (a file lock of this user's on the host,
        `host_files.py`; none without `exclusive_timing`)."""
        if not self.exclusive_timing:
            yield
            return
        fd = open_private(self._lock_path, "CPU timing lock")
        try:
            lock_exclusive(
                fd, self._lock_path, "CPU timing lock", wait_s=self.lock_wait_s, record_holder=True
            )
            yield
        finally:
            os.close(fd)  # releases the lock

    # re-measure the peaks at most this often per agent: a kernel that fakes its speed on
    # every call must not turn every profile into a calibration
    RAISE_PEAKS_EVERY_S: ClassVar[float] = 600.0

    def remeasured_peaks(self) -> DeviceSpec | None:
        """Re-measure this machine's peaks (with the device to itself: the judge asks while it
        holds the device lock) and keep the higher values; the spec they make, or None when
        not done. Only for a measured calibration, rate-limited."""
        if self._calibration is None or not self._calibration.spec.measured:
            return None
        now = time.monotonic()
        if self._peaks_raised_at is not None and now - self._peaks_raised_at < self.RAISE_PEAKS_EVERY_S:
            return None
        self._peaks_raised_at = now
        # asked by the judge, which holds the device lock (the kernel server is stopped)
        rec = raise_peaks(self.cache_dir, self._calibration, cc=self.cc)
        with self._spec_lock:
            self._calibration, self._spec = rec, rec.spec
        return rec.spec


__all__ = ["MAX_REGION_BYTES", "MAX_TIMED_SETS", "CpuAgent", "timing_sets"]
