"""The Triton hardware agent: FlashInfer-Bench solutions (`main.py::run`) on NVIDIA GPUs,
and their correctness through the Triton interpreter where there is no GPU.

profile(problem, solution):
  1. language (triton or python) and static checks (streams, threads, library patching);
  2. the plan: on a GPU every seed and adversarial case at the problem's workload plus one
     seed of each `check_workloads` entry; in the interpreter the same at the smaller check
     workloads (the problem's own workload when it has none);
  3. inputs generated here (seeded; indices synthesized; safetensors loaded) and references
     computed once per problem by the definition's PyTorch `run` in a sandboxed child on the
     kernels' device (cached);
  4. the harness in a sandboxed child (pinned to one GPU from the pool, or with
     TRITON_INTERPRET=1): import error -> `compile_error`, exception or crash ->
     `runtime_error`, wall/CPU limit -> `timeout` (the child is killed);
  5. judged here: dtype, shape, values (per-definition tolerance), input mutation, writes
     outside output buffers -> `incorrect`;
  6. on a GPU: a calibration of the timed loop's untimed work (a null entry point, before
     the solution is imported), then timing in rounds this side drives (fresh inputs per
     round, handed over only then, and a content of its own for every call; CUDA events,
     cold L2, rotated buffers, median of reps, mean of rounds; every call's outputs checked
     at secret positions and a secret call per round in full; the kernel's clock bounded by
     ours with the calibrated allowance -> `timing_mismatch`, confirmed by a second profile
     before it stands), the roofline with the peaks of the problem's dtypes, and the
     plausibility gate -> `passed`; in the interpreter: `unmeasured` (correct, not timed),
     or `no_triton_launch` for a Triton solution whose checks launched no Triton kernel.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import msgspec
import numpy as np
import torch

from accelopt.problem import Problem, ProblemFileError, Solution, Workload
from accelopt.profile import Profile, SeedCheck
from hardware_agents import validity
from hardware_agents.base import DeviceSpec, HardwareAgent, pct_peak, roofline_terms, t_peak
from hardware_agents.sandbox import (
    RanWhileStopped,
    Sandbox,
    SandboxChild,
    SandboxOutcome,
    SandboxPolicy,
    default_base_dir,
    private_dir,
)
from hardware_agents.triton import gpu as gpus
from hardware_agents.triton import timing
from hardware_agents.triton.convention_hint import convention_hint
from hardware_agents.triton.data import (
    CaseData,
    DataCache,
    PlannedCase,
    ProblemData,
    TimedRound,
    TimingPlan,
    case_name,
    input_metas,
    to_float64,
    tolerance_for,
)
from hardware_agents.triton.harness import COMPILE_ERRORS, PACKAGE
from hardware_agents.triton.inputs import INTERPRETER_LIMIT, input_elements, torch_dtype
from hardware_agents.triton.records import (
    CaseSpec,
    HarnessRequest,
    HarnessResult,
    TimerName,
    TimingSpec,
    checks_file,
    round_file,
)
from hardware_agents.triton.reference import RefRequest, RefResult
from hardware_agents.triton.specs import device_spec, kind_for_gpu_name, l2_bytes, spec_for_dtypes
from hardware_agents.triton.static import check_sources

Mode = Literal["auto", "cuda", "interpreter"]
PER_ROUND = 2  # fresh base contents per timing round (every call derives its own content from one)
# The kernel's clock must cover our wall time of a round less the calibrated untimed work, with
# this much room: a relative margin on the calibrated figure, plus a little per call and per
# round (scheduling jitter of the stop/continue handshake). See `TritonAgent._clock_mismatch`.
CLOCK_MARGIN = 0.10
CLOCK_SLACK_PER_CALL_S = 5e-6
CLOCK_SLACK_PER_ROUND_S = 1e-3
# and a share of the kernel's own time: host noise that grows with the calls (a GPU's calls are
# timed on the device; interpreted calls run Python, whose garbage collector may pause anywhere)
CLOCK_SHARE = {"cuda": 0.05, "interpreter": 0.10}
# imported before the privilege drop; `warmup` opens Triton's cache (and CUDA on a GPU) as root
_PRELOAD = ("torch", "triton", "triton.language", "numpy", "hardware_agents.triton.harness",
            "hardware_agents.triton.reference", "hardware_agents.triton.warmup")


def default_cache_dir() -> Path:
    return Path(os.environ.get("ACCELOPT_CACHE_DIR") or Path.home() / ".cache" / "accelopt")


def workload_label(w: Workload, index: int) -> str:
    return w.x_label or f"w{index}"


def describe_axes(w: Workload) -> str:
    return " ".join(f"{k}={v}" for k, v in w.axes.items()) or "(no variable axes)"


def plan_cases(problem: Problem, seeds: Sequence[int], on_gpu: bool) -> tuple[list[PlannedCase], list[str]]:
    """The cases of one profile and the names of the timing contents (the seed cases of the
    first workload). GPU: the problem's workload with every seed and adversarial case, one
    seed at each check workload. Interpreter: the same with the check workloads in place of
    the problem's (which may be far too large to interpret)."""
    cases = validity.input_cases(problem.definition, seeds)
    first_seed = [c for c in cases if not c.adversarial][:1]
    if on_gpu:
        workloads = [problem.workload, *problem.check_workloads]
    else:
        workloads = list(problem.check_workloads) or [problem.workload]
    plan: list[PlannedCase] = []
    for i, w in enumerate(workloads):
        label = workload_label(w, i)
        prefix = "" if i == 0 else label
        for c in (cases if i == 0 else first_seed):
            plan.append(PlannedCase(name=case_name(prefix, c), workload=w, case=c, label=label))
    contents = [p.name for p in plan if p.workload is workloads[0] and not p.case.adversarial]
    return plan, contents


class RoundClock:
    """Our wall times of a timed child's rounds: `walls[k]` from continuing it to time round k
    to its next stop; `setups[k]` from handing it round k's inputs to its ready stop; the
    same for the calibration rounds (`cal_walls`, `cal_setups`)."""

    def __init__(self) -> None:
        self.walls: list[float] = []
        self.setups: list[float] = []
        self.cal_walls: list[float] = []
        self.cal_setups: list[float] = []

    def untimed_per_call(self, calls: int) -> float | None:
        """The calibrated untimed work per call: the fastest calibration round's wall time per
        call (noise only ever adds time), or None when no calibration round was clocked."""
        return min(self.cal_walls) / calls if self.cal_walls and calls else None


def rotation_for(contents: int, set_bytes: int, l2: int, max_bytes: int = 4 << 30) -> int:
    """Buffer sets for the timed loop: more than the contents and not a multiple of their
    count (contents move between buffers), enough to exceed 2x L2 when memory allows."""
    r = max(contents + 1, math.ceil(2 * l2 / max(set_bytes, 1)))
    r = min(r, 64, max(contents + 1, max_bytes // max(set_bytes, 1)))
    while contents > 1 and r % contents == 0:
        r += 1
    return r


class TritonAgent(HardwareAgent):
    kind: ClassVar[str] = "h100"
    languages: ClassVar[tuple[str, ...]] = ("triton", "python")

    def __init__(self, *, mode: Mode = "auto", cache_dir: str | Path | None = None,
                 sandbox_dir: str | Path | None = None, timeout_s: float = 120.0, max_pct_peak: float = 1.25,
                 timer: TimerName = "cuda_event", warmup: int = 10, reps: int = 50, trials: int = 3,
                 flush_bytes: int | None = None, gpus_to_use: Sequence[int] | None = None, any_gpu: bool = False,
                 data_roots: Sequence[str | Path] = (), data_cache_problems: int | None = None,
                 interpreter_timing: bool = False, spec: DeviceSpec | None = None,
                 sandbox_options: dict[str, Any] | None = None, calibration_rounds: int = 2,
                 clock_margin: float = CLOCK_MARGIN, sample_positions: int = 128, full_checks_per_round: int = 1,
                 keep_outputs_bytes: int | None = None, confirm_mismatch: bool = True,
                 reference_budget_s: float = 20.0) -> None:
        self._spec = spec or device_spec(self.kind)
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.sandbox_dir = Path(sandbox_dir) if sandbox_dir else None
        self.timeout_s = timeout_s
        self.max_pct_peak = max_pct_peak
        if timer == "do_bench":
            raise ValueError("timer 'do_bench' is not an agent timer: triton.testing.do_bench picks its own number "
                             "of calls and runs untimed warm-ups, so its clock cannot be bounded by ours; the agent "
                             "times with 'cuda_event' (scripts/gpu_check.py uses do_bench as an independent witness)")
        if timer != "cuda_event":
            raise ValueError(f"timer must be 'cuda_event' (the GPU timer), not {timer!r}; the host clock is used "
                             "automatically with interpreter_timing")
        self.timer: TimerName = timer
        self.warmup, self.reps, self.trials = warmup, reps, trials
        self.calibration_rounds = max(1, calibration_rounds)
        self.clock_margin = clock_margin
        self.sample_positions, self.full_checks = sample_positions, full_checks_per_round
        self.keep_outputs_bytes = keep_outputs_bytes
        self.confirm_mismatch = confirm_mismatch
        self.reference_budget_s = reference_budget_s
        self.flush_bytes = flush_bytes
        self.data_roots = [str(r) for r in data_roots]
        env_roots = os.environ.get("ACCELOPT_DATA_ROOTS") or os.environ.get("FIB_DATASET_PATH")
        if env_roots:
            self.data_roots += env_roots.split(os.pathsep)
        self.interpreter_timing = interpreter_timing
        self.sandbox_options = dict(sandbox_options or {})  # SandboxPolicy fields, e.g. for an unusual GPU host
        self.gpu_infos = self._select_gpus(mode, gpus_to_use, any_gpu)
        self.mode: Literal["cuda", "interpreter"] = "cuda" if self.gpu_infos else "interpreter"
        # production-size data is large (GBs in /dev/shm); the interpreter's small data is cheap to keep
        self.data = DataCache(data_cache_problems or (3 if self.mode == "cuda" else 16), self.sandbox_dir)
        self.pool = gpus.GpuPool([g.index for g in self.gpu_infos], self.cache_dir / "triton" / "locks") \
            if self.gpu_infos else None
        self.mode_note = self._mode_note(mode)
        self._toolchain: dict[str, str] | None = None
        self._lock = threading.Lock()

    # --- device ------------------------------------------------------------------------------

    def _select_gpus(self, mode: Mode, wanted: Sequence[int] | None, any_gpu: bool) -> list[gpus.GpuInfo]:
        if mode == "interpreter":
            return []
        found = list(gpus.discover())
        if wanted is not None:
            found = [g for g in found if g.index in set(wanted)]
        matching = [g for g in found if any_gpu or kind_for_gpu_name(g.name) == self.kind]
        if mode == "cuda" and not matching:
            names = ", ".join(g.name for g in found) or "none"
            raise RuntimeError(f"the {self.kind} agent was asked for mode 'cuda' but this host has no "
                               f"{self._spec.name} (GPUs found: {names}); pass any_gpu=True to time on another GPU")
        return matching

    def _mode_note(self, mode: Mode) -> str:
        if self.mode == "cuda":
            return f"timed on {', '.join(f'GPU {g.index} ({g.name})' for g in self.gpu_infos)}"
        if mode == "interpreter":
            return "correctness in the Triton interpreter (mode 'interpreter'); not timed"
        others = [g.name for g in gpus.discover()]
        extra = f" (GPUs here: {', '.join(others)})" if others else ""
        return f"no {self._spec.name} on this host{extra}: correctness in the Triton interpreter; not timed"

    @property
    def device(self) -> DeviceSpec:
        return self._spec

    def toolchain(self) -> dict[str, str]:
        with self._lock:
            if self._toolchain is None:
                import triton

                tc = {"triton": str(triton.__version__), "torch": str(torch.__version__), "mode": self.mode}
                if self.mode == "cuda":
                    tc["gpu"] = self.gpu_infos[0].name
                    tc["timer"] = self.timer
                    tc["cuda"] = str(torch.version.cuda)
                self._toolchain = tc
            return dict(self._toolchain)

    def close(self) -> None:
        self.data.close()

    # --- sandboxes -----------------------------------------------------------------------------

    def _policy(self, timeout: float, read_paths: Sequence[str], file_bytes: int) -> SandboxPolicy:
        env = {"TRITON_INTERPRET": "1"} if self.mode == "interpreter" else {}
        env.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})
        kw: dict[str, Any] = {
            "wall_timeout_s": timeout, "address_space_bytes": (1 << 44) if self.mode == "cuda" else 16 << 30,
            "max_processes": 256, "max_file_bytes": max(64 << 20, file_bytes), "read_paths": tuple(read_paths),
            "env": env, "preload": _PRELOAD}
        if self.mode == "cuda":  # CUDA maps a huge address space and opens /dev/nvidia* read/write
            kw["write_paths"] = tuple(gpus.device_nodes())
        kw.update(self.sandbox_options)
        return SandboxPolicy(**kw)

    def _run(self, target: str, request: msgspec.Struct, policy: SandboxPolicy, stage: dict[str, str] | None = None,
             ) -> tuple[SandboxOutcome, Sandbox]:
        box = Sandbox(policy, base_dir=self.sandbox_dir)
        try:
            for rel, content in (stage or {}).items():
                p = box.workdir / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(content)
                box.give(rel)
            if self.pool is not None:
                with self.pool.acquire() as idx:
                    out = box.run(target, request, extra_env={"CUDA_VISIBLE_DEVICES": str(idx)})
            else:
                out = box.run(target, request)
        except BaseException:
            box.close()
            raise
        return out, box

    def _drive(self, request: HarnessRequest, policy: SandboxPolicy, stage: dict[str, str], data: ProblemData,
               ) -> tuple[SandboxOutcome, Sandbox, RoundClock]:
        """Run the harness; when it times, drive its rounds (see TimingSpec): at each of its
        stops hand it the next round's inputs, then measure our own wall time from continuing
        it to its next stop. Returns the outcome, the box (for its files) and those times."""
        box = Sandbox(policy, base_dir=self.sandbox_dir)
        clock = RoundClock()
        try:
            for rel, content in stage.items():
                p = box.workdir / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(content)
                box.give(rel)
            if request.timing is None:
                if self.pool is not None:
                    with self.pool.acquire() as idx:
                        return box.run("hardware_agents.triton.harness:run", request,
                                       extra_env={"CUDA_VISIBLE_DEVICES": str(idx)}), box, clock
                return box.run("hardware_agents.triton.harness:run", request), box, clock
            with self.pool.acquire() if self.pool is not None else contextlib.nullcontext(None) as idx:
                env = {"CUDA_VISIBLE_DEVICES": str(idx)} if idx is not None else None
                child = box.spawn("hardware_agents.triton.harness:run", request, extra_env=env)
                try:
                    self._rounds(child, Path(request.timing.inputs_dir), data, request.timing, clock)
                finally:
                    out = child.finish()
            return out, box, clock
        except BaseException:
            box.close()
            raise

    def _rounds(self, child: SandboxChild, inputs: Path, data: ProblemData, spec: TimingSpec,
                clock: RoundClock) -> None:
        """Drive the calibration and timing rounds, filling `clock` (every moment the child runs
        in those phases is measured, see `_clock_mismatch`). Calibration rounds come first,
        before the child imports the solution; then round k's file goes to `inputs` (ours,
        read-only to the child) only once the child has stopped to wait for it, and what to
        send back of round k's outputs only once round k is over."""

        def step(times: list[float]) -> bool:
            """Continue the child and clock it to its next stop (the freeze check on both
            sides stays outside the interval: `resume` returns the moment of the continue)."""
            t0 = child.resume()
            if not child.wait_stopped():
                return False
            times.append(child.stopped_at - t0)
            return True

        def phase(setups: list[float], walls: list[float]) -> bool:
            return step(setups) and step(walls)  # set up (ready to be timed), then the timed calls

        try:
            if not child.wait_stopped():  # exited or died before calibrating
                return
            for _ in range(spec.calibration_rounds):
                if not phase(clock.cal_setups, clock.cal_walls):
                    return
            child.resume()  # imports the solution, runs the correctness cases
            if not child.wait_stopped():  # exited (no timing: a failed check) or died
                return
            for k in range(spec.trials):  # the child is stopped, waiting for round k's inputs
                if k:
                    self._hand_over(data.rounds[k - 1].checks_payload(), inputs / checks_file(k - 1))
                shutil.copyfile(data.rounds[k].file, inputs / round_file(k))
                if not phase(clock.setups, clock.walls):
                    return
            self._hand_over(data.rounds[-1].checks_payload(), inputs / checks_file(spec.trials - 1))
            child.resume()
            if child.wait_stopped():  # one stop more than the protocol has: not our harness talking
                child.kill()
        except RanWhileStopped:  # killed already; `finish()` carries the breach to the verdict
            return

    @staticmethod
    def _hand_over(payload: dict[str, object], path: Path) -> None:
        torch.save(payload, path)
        os.chmod(path, 0o644)

    def _run_reference(self, request: RefRequest, read_paths: Sequence[str]) -> dict[str, dict[str, torch.Tensor]]:
        request = msgspec.structs.replace(request, device="cuda" if self.mode == "cuda" else "cpu")
        policy = self._policy(max(self.timeout_s, 600.0), read_paths, 16 << 30)
        out, box = self._run("hardware_agents.triton.reference:run_reference", request, policy)
        try:
            if out.status != "ok":
                raise ProblemFileError(f"{request.definition}: the reference failed ({out.status}): "
                                       f"{out.error}\n{out.log[-4000:]}")
            res = out.decode(RefResult)
            refs = {}
            for case, rel in res.files.items():
                with box.open_file(rel, max_bytes=16 << 30) as f:
                    refs[case] = torch.load(f, weights_only=True)
            return refs
        finally:
            box.close()

    # --- profile -------------------------------------------------------------------------------

    def _profile(self, problem: Problem, solution: Solution, seeds: tuple[int, ...], timeout: float,
                 measure: bool) -> Profile:
        """One profile; a `timing_mismatch` is confirmed by a second one in a fresh child before
        it stands (a busy host can stretch one profile's untimed work past its allowance; a
        forged clock is caught every time)."""
        prof = self._profile_once(problem, solution, seeds, timeout, measure)
        if prof.status != "timing_mismatch" or not self.confirm_mismatch:
            return prof
        again = self._profile_once(problem, solution, seeds, timeout, measure)
        if again.status == "timing_mismatch":
            again.counters["timing_mismatch_confirmed"] = 1.0
            again.log = f"{again.log}\n(confirmed by a second profile; the first said: {prof.log.splitlines()[0]})"
            return again
        again.counters["timing_mismatch_retried"] = 1.0
        again.log = f"{again.log}\nnote: a first profile was rejected ({prof.log.splitlines()[0]}); this one stands"
        return again

    def _keep_budget(self) -> int:
        """How many bytes of outputs a round may keep (every call's, for the secret checks)."""
        if self.keep_outputs_bytes is not None:
            return self.keep_outputs_bytes
        if self.mode == "cuda":
            mem = min((g.memory_bytes for g in self.gpu_infos if g.memory_bytes), default=16 << 30)
            return mem // 4
        return 1 << 30

    def _timing_plan(self, problem: Problem, plan: list[PlannedCase], like: str) -> TimingPlan:
        from hardware_agents.triton.data import output_metas

        pc = next(p for p in plan if p.name == like)
        out_bytes = sum(math.prod(o.shape or ()) * torch.empty((), dtype=torch_dtype(o.dtype)).element_size()
                        for o in output_metas(problem.definition, pc.workload))
        calls = self.warmup + max(self.reps, PER_ROUND)
        return TimingPlan(like=like, rounds=self.trials, per_round=PER_ROUND, calls=calls,
                          samples=self.sample_positions, full=self.full_checks,
                          positions_in_round=calls * out_bytes > self._keep_budget(),
                          reference_budget_s=self.reference_budget_s)

    def _profile_once(self, problem: Problem, solution: Solution, seeds: tuple[int, ...], timeout: float,
                      measure: bool) -> Profile:
        if solution.spec.language not in self.languages:
            return self._fail("compile_error", f"the Triton agent runs Python/Triton solutions; this one is "
                              f"{solution.spec.language!r}")
        try:
            entry = solution.entry_file()
            symbol = solution.entry_symbol
        except (ProblemFileError, IndexError) as e:
            return self._fail("compile_error", f"entry point {solution.spec.entry_point!r}: {e}")
        if not entry.path.endswith(".py"):
            return self._fail("compile_error", f"entry file {entry.path!r} is not a Python module")
        hits = check_sources({s.path: s.content for s in solution.sources})
        if hits:
            return self._fail("incorrect", "rejected by the static checks:\n" + "\n".join(hits))
        on_gpu = self.mode == "cuda"
        plan, contents = plan_cases(problem, seeds, on_gpu)
        too_big = self._too_big_to_interpret(problem, plan)
        if too_big:
            return self._fail("timeout", too_big)
        timed = measure and (on_gpu or self.interpreter_timing)
        tplan = self._timing_plan(problem, plan, contents[0]) if timed else None
        data = self.data.get(problem, plan, self._run_reference, device=self.mode, data_roots=self.data_roots,
                             timing=tplan)
        request = self._request(problem, solution, data, contents, seeds[0], tplan, entry.path, symbol)
        stage = {f"{PACKAGE}/{s.path}": s.content for s in solution.sources}
        stage.setdefault(f"{PACKAGE}/__init__.py", "")
        out_bytes = max(sum(r.nbytes for c in data.by_name.values() for r in c.ref64.values()), 1)
        rounds_dir = Path(request.timing.inputs_dir) if request.timing is not None else None
        policy = self._policy(timeout, [str(data.dir), *([str(rounds_dir)] if rounds_dir else [])],
                              4 * out_bytes + (64 << 20))
        try:
            out, box, clock = self._drive(request, policy, stage, data)
        except BaseException:
            if rounds_dir is not None:
                shutil.rmtree(rounds_dir, ignore_errors=True)
            raise
        try:
            if out.status == "unisolated":
                return self._fail("sandbox_error", out.error, isolation=out.isolation)
            prof = self._judge(problem, data, request, out, box, measure, solution.spec.language == "triton", clock)
            prof.isolation = out.isolation
            return prof
        except Exception as e:  # a result the kernel tampered with must not crash the agent
            return self._fail("runtime_error", f"invalid harness result ({type(e).__name__}: {e})\n{out.log}")
        finally:
            box.close()
            if rounds_dir is not None:
                shutil.rmtree(rounds_dir, ignore_errors=True)

    def _request(self, problem: Problem, solution: Solution, data: ProblemData, contents: list[str], seed: int,
                 tplan: TimingPlan | None, entry_path: str, symbol: str) -> HarnessRequest:
        cases = [CaseSpec(name=c.name, inputs_file=c.inputs_file, scalars=c.scalars, outputs=c.outputs)
                 for c in data.cases]
        timing_spec = None
        if tplan is not None:
            set_bytes = data.by_name[contents[0]].set_bytes
            l2 = l2_bytes(self._spec)
            timing_spec = TimingSpec(
                like=contents[0], per_round=PER_ROUND,
                rotation=rotation_for(PER_ROUND, set_bytes, l2 if self.mode == "cuda" else 0),
                timer="perf_counter" if self.mode == "interpreter" else self.timer,
                warmup=self.warmup, reps=tplan.calls - self.warmup, trials=self.trials,
                flush_bytes=self._flush_bytes(l2), calibration_rounds=self.calibration_rounds,
                keep_outputs=not tplan.positions_in_round, inputs_dir=str(self._rounds_dir()))
        first = data.cases[0].planned.workload
        return HarnessRequest(
            module_dir="", entry_file=entry_path, entry_symbol=symbol,
            destination_passing=solution.spec.destination_passing_style,
            inputs=input_metas(problem.definition, first), cases=cases,
            device="cuda" if self.mode == "cuda" else "cpu", timing=timing_spec, seed=seed)

    def _rounds_dir(self) -> Path:
        """A directory of ours for the timing rounds' inputs, readable by the child (on its
        read list), writable by us alone: nothing the kernel plants there can redirect a write."""
        d = private_dir(self.sandbox_dir or default_base_dir(), "accelopt-triton-rounds-")
        os.chmod(d, 0o755)
        (d / Path(round_file(0)).parent).mkdir(mode=0o755)
        return d

    def _flush_bytes(self, l2: int) -> int:
        if self.flush_bytes is not None:
            return self.flush_bytes
        # on CPU tensors (the interpreter) there is no GPU L2 to evict: a few MB of host cache
        return 8 << 20 if self.mode == "interpreter" else max(256 << 20, 4 * l2)

    # --- the clock -------------------------------------------------------------------------------

    @staticmethod
    def _call_count_error(res: HarnessResult, spec: TimingSpec) -> str | None:
        for k, run in enumerate([*res.calibration, *res.timing]):
            n = len(run.samples_ms) + len(run.warmup_ms)
            if n != spec.calls:
                what = f"calibration round {k}" if k < len(res.calibration) else f"round {k - len(res.calibration)}"
                return f"reported {n} timed calls in {what}; {spec.calls} were asked for"
        return None

    def _clock_mismatch(self, res: HarnessResult, clock: RoundClock, spec: TimingSpec, data: ProblemData,
                        counters: dict[str, float]) -> str | None:
        """The kernel's timer (CUDA events, or the host clock in the interpreter) lives in the
        kernel's process, so it is checked against our own clock. Per round, our wall time W
        from continuing the child to its next stop covers its n = warmup + reps calls (each
        timed by its timer, summing to T) and the untimed work between them. That untimed work
        was measured on this host, through the same loop, by the calibration rounds the child
        ran with a null entry point before the solution was imported: u per call (the
        fastest calibration round's wall time / n). An honest round has W - A <= T <= W, with
        A = n u (1 + margin) + share x T + n x 5 us + 1 ms (share: 5% on a GPU, 10% for
        interpreted calls). A round fails when T > W (a clock running fast) or T < W - A (a
        slowed or frozen clock). A clock slowed by a factor s reports T = K / s for calls
        that took K: it is caught once K (1 - (1 + share) / s) exceeds n u margin + slack,
        i.e. for s = 2 once the kernel's time is about a quarter of the untimed work or more
        (figures per kernel in the GPU check's table)."""
        n = spec.calls
        u = clock.untimed_per_call(n)
        if u is None:
            return "runtime_error: the child ran no calibration round (not our harness's protocol)"
        share = CLOCK_SHARE[self.mode]
        base_allow = n * u * (1 + self.clock_margin) + n * CLOCK_SLACK_PER_CALL_S + CLOCK_SLACK_PER_ROUND_S
        total_w = total_t = total_a = 0.0
        for k, (run, wall) in enumerate(zip(res.timing, clock.walls, strict=True)):
            t = (sum(run.samples_ms) + sum(run.warmup_ms)) / 1e3
            allow = base_allow + share * t
            total_w, total_t, total_a = total_w + wall, total_t + t, total_a + allow
            if t > wall * 1.02 + 1e-3:
                return (f"reported kernel time ({t * 1e3:.3g} ms) exceeds the wall time of its timing round "
                        f"({wall * 1e3:.3g} ms)")
            if t < wall - allow:
                return (f"timing_mismatch: in timing round {k} the kernel's process timed its {n} calls at "
                        f"{t * 1e3:.4g} ms in all, but they took {wall * 1e3:.4g} ms by our clock, of which at most "
                        f"{allow * 1e3:.4g} ms is the untimed work between calls (calibrated on this host: "
                        f"{u * 1e6:.4g} us a call): its clock was slowed or replaced")
        # Every moment the child ran in the timing phase, set-ups included: a child that stops
        # itself out of turn (so that its calls fall in what we take for a set-up) is bounded too.
        setups = clock.setups
        load = max((os.path.getsize(r.file) for r in data.rounds), default=0)
        per_setup = 2 * max(clock.cal_setups, default=0.0) + 4 * load / 200e6 + 0.25
        setup_allow = len(setups) * per_setup
        all_w = total_w + sum(setups)
        if total_t < all_w - total_a - setup_allow:
            return (f"timing_mismatch: the kernel's process ran {all_w * 1e3:.4g} ms in its timing phase by our "
                    f"clock (at most {(total_a + setup_allow) * 1e3:.4g} ms of it outside the calls) but timed its "
                    f"calls at {total_t * 1e3:.4g} ms: its clock was slowed or replaced")
        calls = n * len(clock.walls)
        counters.update({
            "timing_wall_s": total_w, "timing_kernel_clock_s": total_t, "timing_untimed_bound_s": total_a,
            "timing_setup_s": sum(setups), "timing_untimed_per_call_s": u,
            "timing_overhead_per_call_s": (total_w - total_t) / calls if calls else 0.0,
            "calibration_wall_s": sum(clock.cal_walls) + sum(clock.cal_setups)})
        return None

    # --- judging -------------------------------------------------------------------------------

    def _load_outputs(self, box: Sandbox, rel: str, max_bytes: int) -> dict[str, torch.Tensor]:
        with box.open_file(rel, max_bytes=max_bytes) as f:
            obj = torch.load(f, weights_only=True)
        if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
            raise ValueError(f"{rel} does not hold a dict of tensors")
        return obj

    def _check(self, problem: Problem, case: CaseData, label: str, got: dict[str, torch.Tensor]) -> SeedCheck:
        """dtype, shape and values of one case's outputs (FlashInfer-Bench's INCORRECT_DTYPE,
        INCORRECT_SHAPE and INCORRECT_NUMERICAL, all reported as `incorrect`)."""
        for meta in case.outputs:
            t = got.get(meta.name)
            if t is None:
                return SeedCheck(case=label, passed=False, note=f"output {meta.name} missing")
            if t.dtype != torch_dtype(meta.dtype):
                return SeedCheck(case=label, passed=False, note=f"output {meta.name} has dtype "
                                 f"{str(t.dtype).removeprefix('torch.')}, the definition says {meta.dtype}")
            expected = tuple(meta.shape or ())
            if tuple(t.shape) != expected:
                return SeedCheck(case=label, passed=False, note=f"output {meta.name} has shape {list(t.shape)}, "
                                 f"the definition says {list(expected)}")
        outputs = {n: to_float64(got[n]) for n in case.ref64}
        return validity.compare_outputs(label, outputs, case.ref64, tolerance_for(problem.definition),
                                        stats=case.stats)

    def _judge(self, problem: Problem, data: ProblemData, req: HarnessRequest, out: SandboxOutcome, box: Sandbox,
               measure: bool, needs_launch: bool, clock: RoundClock) -> Profile:
        log_tail = f"\n--- kernel output ---\n{out.log}" if out.log.strip() else ""
        counters: dict[str, float] = {"sandbox_wall_s": out.wall_s}
        if out.freeze_breach is not None:  # checked first: it voids everything the child reported
            b = out.freeze_breach
            counters["ran_while_stopped_ns"] = float(max(0, b.cpu_ns_now - b.cpu_ns_at_stop))
            return self._fail("incorrect", f"{b.describe()}. While the agent holds it stopped (between timing "
                              "rounds, while it stages inputs or reads outputs) the kernel's process must run no code: "
                              f"no timers, signals or helper processes that wake it{log_tail}", counters=counters)
        if out.status in ("timeout", "cpu_limit"):
            hint = ""
            if self.mode == "interpreter":
                biggest = max(data.cases, key=lambda c: input_elements(problem.definition, c.planned.workload))
                hint = (f"\nhint: the Triton interpreter ran {biggest.planned.label} "
                        f"({describe_axes(biggest.planned.workload)}, "
                        f"{input_elements(problem.definition, biggest.planned.workload):,} input elements); give the "
                        "problem smaller check workloads (check_workloads.jsonl) or profile it on a GPU")
            return self._fail("timeout", f"{out.error} (the worker was killed){hint}{log_tail}", counters=counters)
        if out.status == "crashed":
            return self._fail("runtime_error", f"the kernel crashed the harness: {out.error}{log_tail}",
                              counters=counters)
        if out.status == "error":
            status = "compile_error" if out.error_type in COMPILE_ERRORS else "runtime_error"
            return self._fail(status, f"{out.error}{log_tail}", counters=counters)
        res = out.decode(HarnessResult)
        counters.update({f"harness_{k}_s": v for k, v in res.phase_s.items()})
        max_bytes = max((c.set_bytes for c in data.cases), default=0) * 2 + (1 << 20)
        checks: list[SeedCheck] = []
        for run in res.cases:
            case = data.by_name.get(run.name)
            if case is None:
                return self._fail("runtime_error", f"the harness reported an unknown case {run.name!r}{log_tail}")
            label = run.name if case.planned.label == data.cases[0].planned.label else \
                f"{run.name} ({describe_axes(case.planned.workload)})"
            hint = convention_hint(req.destination_passing, run, len(req.inputs), len(case.outputs))
            hint = f"\n{hint}" if hint else ""
            if run.error:
                if run.error_type == "OutputMismatch":
                    checks.append(SeedCheck(case=label, passed=False, note=run.error.splitlines()[0]))
                    return self._fail("incorrect", f"{label}: {run.error}{hint}{log_tail}", correctness=checks,
                                      counters=counters)
                status = "compile_error" if run.error_type in COMPILE_ERRORS else "runtime_error"
                return self._fail(status, f"{label}: {run.error}{hint}{log_tail}", correctness=checks,
                                  counters=counters)
            got = self._load_outputs(box, run.output_file, max_bytes)
            chk = self._check(problem, case, label, got)
            if not chk.passed and req.destination_passing:
                unwritten = all(bool(torch.isnan(t).all()) for t in got.values() if t.is_floating_point())
                hint = convention_hint(True, run, len(req.inputs), len(case.outputs), outputs_unwritten=unwritten)
                if hint:
                    chk.note = f"{chk.note}\n{hint}"
            extra = []
            if run.mutated:
                extra.append(f"modified its input(s) {', '.join(run.mutated)} (or memory next to them); "
                             "inputs are read-only")
            if run.overflow:
                extra.append(f"wrote outside the bounds of output(s) {', '.join(run.overflow)}")
            if extra:
                chk.passed = False
                chk.note = "; ".join([chk.note, *extra]) if chk.note else "; ".join(extra)
            checks.append(chk)
        if len(checks) != len(data.cases):
            return self._fail("runtime_error", f"the harness ran {len(checks)} of {len(data.cases)} cases{log_tail}",
                              correctness=checks, counters=counters)
        if out.stray_processes:
            return self._fail("runtime_error", f"the kernel left {out.stray_processes} process(es) running "
                              f"(killed){log_tail}", correctness=checks, counters=counters)
        failed = [c for c in checks if not c.passed]
        if failed:
            return self._fail("incorrect", "\n".join(f"{c.case}: {c.note}" for c in failed)
                              + self._interpreter_note(problem) + log_tail, correctness=checks, counters=counters)
        idle = [r.name for r in res.cases if r.launches == 0]
        if needs_launch and idle:
            counters["cases_without_launch"] = float(len(idle))
            return self._fail("no_triton_launch", f"the Triton solution launched no Triton kernel in {len(idle)} of "
                              f"{len(res.cases)} checks ({', '.join(idle[:4])}): its outputs came from other code "
                              "(a torch fallback?), so they say nothing about its kernels. Under the interpreter "
                              "torch.cuda.is_available() is true and device='cuda' works on CPU tensors: take the "
                              f"Triton path.{log_tail}", correctness=checks, counters=counters)
        where = "; ".join(sorted({f"{c.planned.label}: {describe_axes(c.planned.workload)}" for c in data.cases}))
        if req.timing is None:
            why = self.mode_note if self.mode == "interpreter" else "timing not requested"
            notes = "".join(f"\nnote: {n}" for n in data.notes)
            return self._fail("unmeasured", f"correct at {where}; {why}{notes}", correctness=checks, counters=counters)
        return self._timed(problem, data, req, res, box, checks, counters, max_bytes, clock)

    def _too_big_to_interpret(self, problem: Problem, plan: list[PlannedCase]) -> str:
        """Why the interpreter is not even started (a production shape it would run for hours)."""
        if self.mode != "interpreter":
            return ""
        worst = max(plan, key=lambda pc: input_elements(problem.definition, pc.workload))
        n = input_elements(problem.definition, worst.workload)
        if n <= INTERPRETER_LIMIT:
            return ""
        return (f"not run: on this host (no {self._spec.name}) correctness is checked in the Triton interpreter, and "
                f"the workload it would run, {worst.label} ({describe_axes(worst.workload)}), holds {n:,} input "
                f"elements: hours of interpretation (the limit is {INTERPRETER_LIMIT:,}). Give the problem small "
                "check workloads (check_workloads.jsonl; `accelopt suite import-flashinfer` derives them from the "
                "variable axes where it can) or profile it on a GPU")

    def _interpreter_note(self, problem: Problem) -> str:
        """In the interpreter, bf16 tile arithmetic is unreliable (tl.dot, and products and
        sums of bf16 tiles can come out NaN): a wrong bf16 result there may be the interpreter's."""
        if self.mode != "interpreter":
            return ""
        if not any(s.dtype == "bfloat16" for s in problem.definition.inputs.values()):
            return ""
        return ("\nnote: checked in the Triton interpreter, whose bf16 arithmetic is unreliable (tl.dot, and "
                "products or sums of bf16 tiles, can give NaN or wrong values where a GPU does not): upcast tiles "
                "to fp32 before arithmetic (`.to(tl.float32)`), or check the kernel on a GPU")

    def _timed_outputs_wrong(self, problem: Problem, tr: TimedRound, res: HarnessResult, box: Sandbox,
                             spec: TimingSpec, max_bytes: int, checks: list[SeedCheck],
                             ) -> tuple[str, list[SeedCheck]] | None:
        """Round `tr`'s outputs against the references of exactly its calls: every call at the
        secret positions (the allclose rule), the secretly chosen calls in full. (message,
        failed checks) or None."""
        rel = res.timed_samples.get(tr.k)
        if rel is None:
            return f"the harness sent back no timed outputs of round {tr.k}", []
        with box.open_file(rel, max_bytes=max_bytes) as f:
            got = torch.load(f, weights_only=True)
        tol = tolerance_for(problem.definition)
        for name, ref in tr.ref_samples.items():
            g = got.get(name) if isinstance(got, dict) else None
            if not isinstance(g, torch.Tensor) or tuple(g.shape) != ref.shape:
                return f"the harness sent back malformed samples of {name} for round {tr.k}", []
            ok = validity.sampled_agreement(g.to(torch.float64).numpy(), ref, tr.ref_rms[name], tol)
            ok[~tr.covered] = True  # calls whose reference was not computed (a slow reference's budget)
            bad = np.flatnonzero(~ok.all(axis=1))
            if bad.size:
                t = int(bad[0])
                j = int(np.flatnonzero(~ok[t])[0])
                kind = "warm-up" if t < spec.warmup else "timed"
                return (f"the output of a timed call is wrong: {bad.size} of {len(tr.calls)} calls of timing round "
                        f"{tr.k} disagree with the reference at sampled elements (e.g. {kind} call {t}: "
                        f"{int((~ok[t]).sum())} of {ok.shape[1]} sampled elements of {name} wrong, "
                        f"{float(g[t, j]):.6g} where the reference is {float(ref[t, j]):.6g})"), []
        for t, case in tr.full_cases.items():
            rel_full = res.timed_full.get(f"{tr.k}-{t}")
            if rel_full is None:
                return f"the harness sent back no output of call {t} of round {tr.k}", []
            chk = self._check(problem, case, f"timed:r{tr.k}-call{t}", self._load_outputs(box, rel_full, max_bytes))
            if not chk.passed:
                return f"the output of a timed call is wrong ({chk.note})", [chk]
        return None

    def _timed(self, problem: Problem, data: ProblemData, req: HarnessRequest, res: HarnessResult, box: Sandbox,
               checks: list[SeedCheck], counters: dict[str, float], max_bytes: int, clock: RoundClock) -> Profile:
        walls = clock.walls
        assert req.timing is not None
        if res.skipped_timing or not res.timing:
            return self._fail("unmeasured", res.skipped_timing or "no timing result", correctness=checks,
                              counters=counters)
        if len(res.timing) != req.timing.trials or len(walls) != req.timing.trials:
            return self._fail("runtime_error", f"the harness reported {len(res.timing)} timing rounds and stopped for "
                              f"{len(walls)}; {req.timing.trials} were asked for", correctness=checks,
                              counters=counters)
        if res.timer != req.timing.timer:  # the child's record of how it timed is checked, never believed
            return self._fail("timing_mismatch", f"timing_mismatch: the kernel's process reported timing with "
                              f"{res.timer!r}; {req.timing.timer!r} was asked for", correctness=checks,
                              counters=counters)
        wrong_count = self._call_count_error(res, req.timing)
        if wrong_count:  # not our harness's protocol
            return self._fail("runtime_error", wrong_count, correctness=checks, counters=counters)
        changed = sum(r.mutated for r in res.timing)
        if changed:
            return self._fail("incorrect", f"modified its inputs in {changed} timed call(s); inputs are read-only",
                              correctness=checks, counters=counters)
        malformed = sum(r.malformed for r in res.timing)
        if malformed:
            return self._fail("incorrect", f"returned the wrong number or kind of values in {malformed} timed "
                              "call(s)", correctness=checks, counters=counters)
        for tr in data.rounds:
            wrong = self._timed_outputs_wrong(problem, tr, res, box, req.timing, max_bytes, checks)
            if wrong is not None:
                return self._fail("incorrect", wrong[0], correctness=[*checks, *wrong[1]], counters=counters)
        checked = sum(int(tr.covered.sum()) for tr in data.rounds)
        counters["timing_checked_calls"] = float(checked)
        counters["timing_calls"] = float(sum(len(tr.calls) for tr in data.rounds))
        # the chance that a kernel wrong on a random 5% of its calls passes every checked call
        counters["timing_escape_lazy_5pct"] = 0.95 ** checked
        counters["timing_sampled_positions"] = float(self.sample_positions)
        why = self._clock_mismatch(res, clock, req.timing, data, counters)
        if why:
            return self._fail("timing_mismatch", why, correctness=checks, counters=counters)
        samples = [s for r in res.timing for s in r.samples_ms]
        lat = timing.latency_ms(res.timing)
        stats = msgspec.structs.replace(validity.latency_stats(samples), median_ms=lat)
        timing_workload = data.by_name[req.timing.like].planned.workload
        timed_problem = problem if timing_workload == problem.workload else \
            msgspec.structs.replace(problem, workload=timing_workload)
        t_meas = lat / 1e3
        counters.update({
            "footprint_bytes": float(req.timing.rotation * data.by_name[req.timing.like].set_bytes),
            "trials": float(len(res.timing)),
            "reps_per_trial": float(len(res.timing[0].samples_ms)),
            "trial_median_spread": (max(r.median_ms for r in res.timing) - min(r.median_ms for r in res.timing))
            / lat if lat > 0 else 0.0,
        })
        toolchain = {**self.toolchain(), "timer": res.timer, **res.versions}
        if res.device_name:
            toolchain["gpu"] = res.device_name
        where = f"timed at {describe_axes(timing_workload)}" + "".join(f"\nnote: {n}" for n in data.notes)
        if problem.definition.x_roofline is None:  # e.g. imported definitions: no % of peak, no gate
            return Profile(status="passed", device=self.kind, log=f"{where}; the definition has no x_roofline, so "
                           "no % of peak", correctness=checks, latency=stats, counters=counters, toolchain=toolchain)
        dtypes = [s.dtype for s in problem.definition.inputs.values() if s.shape is not None]
        spec = spec_for_dtypes(self._spec, dtypes)
        tp, bound = t_peak(timed_problem, spec)
        terms = roofline_terms(timed_problem)
        if t_meas > 0:
            counters["achieved_gbs"] = terms.bytes_min / t_meas / 1e9
            counters["achieved_tflops"] = (terms.flops_matmul + terms.flops_vector) / t_meas / 1e12
        why = validity.implausible(t_meas, tp, self.max_pct_peak)
        if why:
            return Profile(status="incorrect", device=self.kind, log=why, correctness=checks, latency=stats,
                           t_peak_ms=tp * 1e3, pct_peak=pct_peak(tp, t_meas), bound=bound, counters=counters,
                           toolchain=toolchain)
        return Profile(status="passed", device=self.kind, log=where,
                       correctness=checks, latency=stats, t_peak_ms=tp * 1e3, pct_peak=pct_peak(tp, t_meas),
                       bound=bound, counters=counters, toolchain=toolchain)


class H100Agent(TritonAgent):
    kind = "h100"


class H200Agent(TritonAgent):
    kind = "h200"


class B200Agent(TritonAgent):
    kind = "b200"


AGENTS: dict[str, type[TritonAgent]] = {"h100": H100Agent, "h200": H200Agent, "b200": B200Agent}
