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
     ours with the calibrated allowance, a round's set-up by the calibrated set-up, a round's
     calls' mean by their median -> a rejected round, not counted and followed by an extra
     round in the same child; more than `extra_rounds` rejected -> `timing_mismatch`), the roofline with the peaks
     of the problem's dtypes, and the plausibility gate -> `passed`; in the interpreter:
     `unmeasured` (correct, not timed), or `incorrect` with reason `no_triton_launch` for a
     Triton solution whose checks launched no Triton kernel;
     every config group of an autotuned kernel checked (`autotune.py`); an `incorrect`
     bf16 kernel run again with bf16 tiles in fp32 to decide whose error it is
     (`bf16_upcast.py`, `_decide_bf16`); a shape too large to interpret: `unchecked`.

The steps every agent shares are the pipeline's (hardware_agents/pipeline/: the plan, the
rounds driver, the clock bound, the verdict, the roofline gate); reading this harness's
result is `judge.py`. This module keeps the Triton steps: GPUs, sandbox policy, staging,
the harness request and its timing plan.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import msgspec
import torch

from accelopt.problem import Problem, ProblemFileError, Solution
from accelopt.profile import Profile
from hardware_agents.base import HardwareAgent
from hardware_agents.pipeline.cases import PlannedCase
from hardware_agents.pipeline.clock import ClockBound
from hardware_agents.pipeline.device_spec import DeviceSpec
from hardware_agents.pipeline.stages import Stages
from hardware_agents.sandbox import (
    Sandbox,
    SandboxChild,
    SandboxOutcome,
    SandboxPolicy,
    default_base_dir,
    private_dir,
)
from hardware_agents.triton import gpu as gpus
from hardware_agents.triton.data import DataCache, ProblemData, TimingPlan, input_metas
from hardware_agents.triton.inputs import torch_dtype
from hardware_agents.triton.records import (
    CaseSpec,
    HarnessRequest,
    TimerName,
    TimingSpec,
    round_file,
)
from hardware_agents.triton.reference import RefRequest, RefResult
from hardware_agents.triton.solution_cache import SolutionCache
from hardware_agents.triton.spare import REQUEST_FILE, ServeRequest
from hardware_agents.triton.specs import device_spec, kind_for_gpu_name, l2_bytes
from hardware_agents.triton.stages import (
    HARNESS_TARGET,
    Stage,
    TritonStages,
    hand_over_file,
    plan_boundary_cases,
    plan_triton_cases,
)

Mode = Literal["auto", "cuda", "interpreter"]
REFERENCE_TARGET = "hardware_agents.triton.reference:run_reference"
SERVE_TARGET = "hardware_agents.triton.spare:serve"
SERVED = {HARNESS_TARGET: "harness", REFERENCE_TARGET: "reference"}  # spare.TARGETS, by target
SPARE_FILE_BYTES = 32 << 30  # the largest file a spare may write (its work dir is re-capped per request)
SPARE_START_S = 600.0  # how long a spare may take to be ready
REFERENCE_TIMEOUT_S = 600.0  # a problem's references (its definition's code, every case and timed call)
CAPTURE_BUDGET_S = 200e-6  # host time a call's graph capture may take in a round's set-up (GPU)
PER_ROUND = 2  # fresh base contents per timing round (every call derives its own content from one)
# imported before the privilege drop; `warmup` opens Triton's cache (and CUDA on a GPU) as root
_PRELOAD = (
    "torch",
    "triton",
    "triton.language",
    "numpy",
    "hardware_agents.triton.harness",
    "hardware_agents.triton.reference",
    "hardware_agents.triton.warmup",
)


def default_cache_dir() -> Path:
    return Path(os.environ.get("ACCELOPT_CACHE_DIR") or Path.home() / ".cache" / "accelopt")


def reference_failure(definition: str, out: SandboxOutcome) -> str:
    """Why the definition's reference failed, without the harness's own frames: the error, and
    the lines of the traceback in the reference's code (where it raised)."""
    lines = out.log.splitlines()
    own = [
        f"{line.strip()}: {lines[i + 1].strip()}" if i + 1 < len(lines) else line.strip()
        for i, line in enumerate(lines)
        if f"<reference of {definition}>" in line
    ]
    where = "".join(f"\n  at {x}" for x in own[-3:])
    error = out.error.strip().splitlines()[-1] if out.error.strip() else out.status
    return f"{definition}: the reference failed ({out.status}): {error}{where}"


def rotation_for(contents: int, set_bytes: int, l2: int, max_bytes: int = 4 << 30) -> int:
    """Buffer sets for the timed loop: more than the contents and not a multiple of their
    count (contents move between buffers), enough to exceed 2x L2 when memory allows."""
    r = max(contents + 1, math.ceil(2 * l2 / max(set_bytes, 1)))
    r = min(r, 64, max(contents + 1, max_bytes // max(set_bytes, 1)))
    while contents > 1 and r % contents == 0:
        r += 1
    return r


def sets_for(contents: int, calls: int, set_bytes: int, l2: int, budget: int) -> int:
    """Buffer sets for the timed loop: one per call where they fit in `budget` (stocked before
    the clock starts: nothing is restocked between calls, so a call's untimed work is the same
    for every kernel), else `rotation_for`'s."""
    if calls * set_bytes <= budget:
        return calls
    return rotation_for(contents, set_bytes, l2, max_bytes=budget)


class TritonAgent(HardwareAgent):
    kind: ClassVar[str] = "h100"
    languages: ClassVar[tuple[str, ...]] = ("triton", "python")

    def __init__(
        self,
        *,
        mode: Mode = "auto",
        cache_dir: str | Path | None = None,
        sandbox_dir: str | Path | None = None,
        timeout_s: float = 120.0,
        max_pct_peak: float = 1.25,
        timer: TimerName = "cuda_event",
        warmup: int = 10,
        reps: int = 50,
        trials: int = 3,
        flush_bytes: int | None = None,
        gpus_to_use: Sequence[int] | None = None,
        any_gpu: bool = False,
        data_roots: Sequence[str | Path] = (),
        data_cache_problems: int | None = None,
        interpreter_timing: bool = False,
        spec: DeviceSpec | None = None,
        sandbox_options: dict[str, Any] | None = None,
        calibration_rounds: int = 2,
        clock_bound: ClockBound | None = None,
        simulated_flush_s: float = 0.0,
        sample_positions: int = 128,
        full_checks_per_round: int = 1,
        keep_outputs_bytes: int | None = None,
        timing_sets_bytes: int | None = None,
        spare_children: bool | None = None,
        confirm_mismatch: bool = True,
        extra_rounds: int = 2,
        graphs: bool | None = None,
        reference_budget_s: float = 20.0,
    ) -> None:
        """Long because it takes and checks every option of the agent (docs/triton.md names
        them), then selects the GPUs and sets up the pool and the caches."""
        self._spec = spec or device_spec(self.kind)
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.sandbox_dir = Path(sandbox_dir) if sandbox_dir else None
        self.timeout_s = timeout_s
        self.max_pct_peak = max_pct_peak
        if timer == "do_bench":
            raise ValueError(
                "timer 'do_bench' is not an agent timer: triton.testing.do_bench picks its own number "
                "of calls and runs untimed warm-ups, so its clock cannot be bounded by ours; the agent "
                "times with 'cuda_event' (scripts/gpu_check.py uses do_bench as an independent witness)"
            )
        if timer != "cuda_event":
            raise ValueError(
                f"timer must be 'cuda_event' (the GPU timer), not {timer!r}; the interpreter's simulated "
                "device clock is used automatically with interpreter_timing"
            )
        self.timer: TimerName = timer
        self.warmup, self.reps, self.trials = warmup, reps, trials
        self.calibration_rounds = max(1, calibration_rounds)
        self.clock_bound = clock_bound  # how the kernel's clock is held to ours (None: the mode's)
        self.simulated_flush_s = simulated_flush_s  # interpreter timing: the simulated device's flush
        self.sample_positions, self.full_checks = sample_positions, full_checks_per_round
        self.keep_outputs_bytes = keep_outputs_bytes
        self.timing_sets_bytes = timing_sets_bytes
        # a round the clock bound rejects is not counted and is followed by another, in the same
        # child, at most `extra_rounds` times (none without `confirm_mismatch`)
        self.extra_rounds = max(0, extra_rounds) if confirm_mismatch else 0
        self.reference_budget_s = reference_budget_s
        self._graphs = graphs  # each round's calls replayed as graphs (None: on a GPU, `figures.py`)
        self.flush_bytes = flush_bytes
        self.data_roots = [str(r) for r in data_roots]
        env_roots = os.environ.get("ACCELOPT_DATA_ROOTS") or os.environ.get("FIB_DATASET_PATH")
        if env_roots:
            self.data_roots += env_roots.split(os.pathsep)
        self.interpreter_timing = interpreter_timing
        self.sandbox_options = dict(
            sandbox_options or {}
        )  # SandboxPolicy fields, e.g. for an unusual GPU host
        self.gpu_infos = self._select_gpus(mode, gpus_to_use, any_gpu)
        self.mode: Literal["cuda", "interpreter"] = "cuda" if self.gpu_infos else "interpreter"
        # production-size data is large (GBs in /dev/shm); the interpreter's small data is cheap to keep
        self.data = DataCache(data_cache_problems or (3 if self.mode == "cuda" else 16), self.sandbox_dir)
        self.pool = (
            gpus.GpuPool([g.index for g in self.gpu_infos], self.cache_dir / "triton" / "locks")
            if self.gpu_infos
            else None
        )
        self.mode_note = self._mode_note(mode)
        self._toolchain: dict[str, str] | None = None
        self._lock = threading.Lock()
        # children started ahead of need (`spare.py`), one per GPU (None: the interpreter's)
        self.spare_children = self.mode == "cuda" if spare_children is None else spare_children
        self._spares: dict[int | None, tuple[Sandbox, SandboxChild]] = {}
        self._spare_lock = threading.Lock()
        self._rounds: Path | None = None
        self._closed = False
        # each solution's Triton compile cache, kept between its profiles (`solution_cache.py`)
        self.solution_cache = SolutionCache(self.cache_dir / "triton" / "solutions")

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
            raise RuntimeError(
                f"the {self.kind} agent was asked for mode 'cuda' but this host has no "
                f"{self._spec.name} (GPUs found: {names}); pass any_gpu=True to time on another GPU"
            )
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
    def graphs(self) -> bool:
        """Whether timing rounds replay their calls as graphs (the device figure)."""
        return self.mode == "cuda" if self._graphs is None else self._graphs

    @property
    def spec(self) -> DeviceSpec:
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
        self._closed = True
        self._close_spares()
        self.data.close()
        if self._rounds is not None:
            shutil.rmtree(self._rounds, ignore_errors=True)
            self._rounds = None

    # --- sandboxes -----------------------------------------------------------------------------

    def _policy(self, timeout: float, read_paths: Sequence[str], file_bytes: int) -> SandboxPolicy:
        env = {"TRITON_INTERPRET": "1"} if self.mode == "interpreter" else {}
        env.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})
        kw: dict[str, Any] = {
            "wall_timeout_s": timeout,
            "address_space_bytes": (1 << 44) if self.mode == "cuda" else 16 << 30,
            "max_processes": 256,
            "max_file_bytes": max(64 << 20, file_bytes),
            # the work dir (a tmpfs of its own as root) holds the outputs of every case and
            # timed round, at production shapes on a GPU (GBs of fp32 references): sized from
            # the data, never the 512 MiB default
            "workdir_bytes": max(512 << 20, file_bytes + (256 << 20)),
            "read_paths": tuple(read_paths),
            "env": env,
            "preload": _PRELOAD,
        }
        if self.mode == "cuda":  # CUDA maps a huge address space and opens /dev/nvidia* read/write
            kw["write_paths"] = tuple(gpus.device_nodes())
        kw.update(self.sandbox_options)
        return SandboxPolicy(**kw)

    @staticmethod
    def _stage(box: Sandbox, stage: Stage | None) -> None:
        for rel, content in (stage or {}).items():
            p = box.workdir / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                p.write_bytes(content)
            else:
                p.write_text(content)
            box.give(rel)

    def _box(self, policy: SandboxPolicy, stage: Stage | None) -> Sandbox:
        box = Sandbox(policy, base_dir=self.sandbox_dir)
        try:
            self._stage(box, stage)
        except BaseException:
            box.close()
            raise
        return box

    # --- spares (`spare.py`): children started ahead of need --------------------------------------

    def _spare_policy(self) -> SandboxPolicy:
        """What a spare may read: every problem's data and every timing round's folder (the
        work dir is re-capped for each request)."""
        timeout = max(
            self.timeout_s, REFERENCE_TIMEOUT_S
        )  # its CPU allowance; the wall clock starts per request
        return self._policy(timeout, [str(self.data.root), str(self._rounds_root())], SPARE_FILE_BYTES)

    def _start_spare(self, gpu: int | None) -> None:
        if not self.spare_children or self._closed:
            return
        with self._spare_lock:
            if gpu in self._spares:
                return
            box = Sandbox(self._spare_policy(), base_dir=self.sandbox_dir)
            try:
                env = {"CUDA_VISIBLE_DEVICES": str(gpu)} if gpu is not None else None
                child = box.spawn(SERVE_TARGET, b"", timeout_s=SPARE_START_S, extra_env=env)
            except BaseException:
                box.close()
                raise
            self._spares[gpu] = (box, child)

    def _claim_spare(
        self,
        gpu: int | None,
        target: str,
        request: msgspec.Struct,
        policy: SandboxPolicy,
        stage: Stage | None,
    ) -> tuple[Sandbox, SandboxChild] | None:
        """The spare of `gpu`, given `request` for `target` and continued into it (None: there
        is none, it died, or the request needs more time than it was started with)."""
        if policy.wall_timeout_s > max(self.timeout_s, REFERENCE_TIMEOUT_S):
            return None
        with self._spare_lock:
            got = self._spares.pop(gpu, None)
        if got is None:
            return None
        box, child = got
        try:
            if not (child.held or child.wait_stopped()):  # died while warming up: a fresh child instead
                child.finish()
                box.close()
                return None
            box.resize_workdir(policy.workdir_bytes)
            self._stage(box, stage)
            req = ServeRequest(target=target, payload=msgspec.msgpack.encode(request))
            path = box.workdir / REQUEST_FILE
            path.write_bytes(msgspec.msgpack.encode(req))
            box.give(REQUEST_FILE)
            child.restart_clock(policy.wall_timeout_s)
            child.resume()
        except BaseException:
            child.finish()
            box.close()
            raise
        return box, child

    def _close_spares(self) -> None:
        with self._spare_lock:
            spares, self._spares = list(self._spares.values()), {}
        for box, child in spares:
            child.kill()
            child.finish()
            box.close()

    def _rounds_root(self) -> Path:
        """The agent's folder of timing rounds (0711: each profile's folder in it has an
        unguessable name, and the children may read beneath it, never list it)."""
        if self._rounds is None:
            self._rounds = private_dir(self.sandbox_dir or default_base_dir(), "accelopt-triton-rounds-")
            os.chmod(self._rounds, 0o711)
        return self._rounds

    def _rounds_dir(self) -> Path:
        """A folder of ours for one profile's timing rounds' inputs: the child may read it, never
        write it (nothing the kernel plants there can redirect a write of ours)."""
        d = Path(tempfile.mkdtemp(prefix="r-", dir=self._rounds_root()))
        sub = d / Path(round_file(0)).parent
        sub.mkdir()
        for path in (d, sub):  # whatever the umask; the child opens the round files by name
            os.chmod(path, 0o711)
        return d

    # --- running children -------------------------------------------------------------------------

    def _run(
        self,
        target: str,
        request: msgspec.Struct,
        policy: SandboxPolicy,
        stage: Stage | None = None,
    ) -> tuple[SandboxOutcome, Sandbox]:
        """A child that runs to its end (the reference, an untimed harness)."""
        with self.pool.acquire() if self.pool is not None else contextlib.nullcontext(None) as idx:
            claimed = self._claim_spare(idx, SERVED[target], request, policy, stage)
            self._start_spare(idx)  # the next child warms up while this one works
            if claimed is not None:
                box, child = claimed
                try:
                    if child.wait_stopped():  # a stop the protocol does not have: not our harness
                        child.kill()
                    return child.finish(), box
                except BaseException:
                    box.close()
                    raise
            box = self._box(policy, stage)
            try:
                env = {"CUDA_VISIBLE_DEVICES": str(idx)} if idx is not None else None
                return box.run(target, request, extra_env=env), box
            except BaseException:
                box.close()
                raise

    def _run_reference(
        self, request: RefRequest, read_paths: Sequence[str]
    ) -> dict[str, dict[str, torch.Tensor]]:
        request = msgspec.structs.replace(request, device="cuda" if self.mode == "cuda" else "cpu")
        policy = self._policy(max(self.timeout_s, REFERENCE_TIMEOUT_S), read_paths, 16 << 30)
        out, box = self._run(REFERENCE_TARGET, request, policy)
        try:
            if out.status != "ok":
                raise ProblemFileError(reference_failure(request.definition, out))
            res = out.decode(RefResult)
            refs = {}
            for case, rel in res.files.items():
                with box.open_file(rel, max_bytes=16 << 30) as f:
                    refs[case] = torch.load(f, weights_only=True)
            return refs
        finally:
            box.close()

    # --- profile -------------------------------------------------------------------------------

    def _profile(
        self, problem: Problem, solution: Solution, seeds: tuple[int, ...], timeout: float, measure: bool
    ) -> Profile:
        """One profile through the stages (`stages.py`): a timing round the clock bound rejects
        is confirmed by extra rounds in the same child (`TritonStages.after_round`), never by
        another profile; an interpreted bf16 kernel found `incorrect` is profiled again with
        bf16 tiles in fp32. In the interpreter, a kernel correct there is then checked at the
        boundary workloads (`_at_the_boundaries`)."""
        prof = self._checked(self._hooks(problem, solution, seeds, timeout, measure), solution)
        return self._at_the_boundaries(prof, problem, solution, seeds, timeout)

    def _checked(self, hooks: TritonStages, solution: Solution) -> Profile:
        """`hooks` through the stages; an interpreted bf16 kernel found `incorrect` is run again
        with bf16 tiles in fp32 (`_decide_bf16`)."""
        prof = self._run_stages(hooks, solution)
        if prof.status != "incorrect" or not self._bf16_in_doubt(hooks.problem, solution):
            return prof
        upcast = self._hooks(hooks.problem, solution, hooks.seeds, hooks.timeout_s, hooks.measure)
        upcast.upcast_bf16, upcast.boundaries = True, hooks.boundaries
        return self._decide_bf16(prof, self._run_stages(upcast, solution))

    def _hooks(
        self, problem: Problem, solution: Solution, seeds: tuple[int, ...], timeout: float, measure: bool
    ) -> TritonStages:
        hooks = self.stages(problem, solution, seeds, timeout, measure)
        assert isinstance(hooks, TritonStages)
        return hooks

    def _at_the_boundaries(
        self, prof: Profile, problem: Problem, solution: Solution, seeds: tuple[int, ...], timeout: float
    ) -> Profile:
        """A kernel the interpreter found correct, checked at the boundary workloads of its
        check workloads too (`stages.plan_boundary_cases`), untimed, in a child of its own: the
        profile's child made the calls a GPU's makes. Wrong there, that verdict stands (with
        every case of both); correct, the profile gains those cases. Out of time there (or the
        machine's failure), it keeps its verdict and says the boundaries went unchecked: the
        interpreter's slowness is no fault of the kernel, and a GPU checks its production rows."""
        if self.mode != "interpreter" or prof.status not in ("unmeasured", "passed"):
            return prof
        if not plan_boundary_cases(problem, seeds):
            return prof
        t0 = time.perf_counter()
        hooks = self._hooks(problem, solution, seeds, timeout, False)
        hooks.boundaries = True
        edge = self._checked(hooks, solution)
        if edge.status in ("timeout", "sandbox_error"):
            prof.counters["boundary_unchecked"] = 1.0
            head, sep, tail = prof.log.partition("\n--- kernel output ---")
            why = edge.log.splitlines()[0] if edge.log else edge.status
            prof.log = f"{head}\nnot checked at the boundary workloads ({edge.status}: {why})" + sep + tail
            return prof
        if edge.status not in ("unmeasured", "passed"):
            edge.correctness = [*prof.correctness, *edge.correctness]
            edge.counters["boundary_cases"] = float(
                sum(c.case.startswith("boundary-") for c in edge.correctness)
            )
            return edge
        prof.correctness = [*prof.correctness, *edge.correctness]
        prof.counters["boundary_cases"] = float(len(edge.correctness))
        prof.counters["phase_boundaries_s"] = time.perf_counter() - t0
        head, sep, tail = prof.log.partition("\n--- kernel output ---")
        where = ", ".join(c.case.split(" ", 1)[0].removesuffix(f"-seed{seeds[0]}") for c in edge.correctness)
        prof.log = f"{head}\ncorrect at the boundary workloads too ({where})" + sep + tail
        return prof

    def _bf16_in_doubt(self, problem: Problem, solution: Solution) -> bool:
        """Whether an `incorrect` verdict may be the interpreter's: its bf16 tile arithmetic is
        wrong (raw 16-bit patterns), so a Triton kernel on bf16 data is re-run with bf16 tiles
        held in fp32 (`bf16_upcast`) to decide."""
        d = problem.definition
        tensors = [*d.inputs.values(), *d.outputs.values()]
        return (
            self.mode == "interpreter"
            and solution.spec.language == "triton"
            and any(t.dtype == "bfloat16" for t in tensors)
        )

    @staticmethod
    def _decide_bf16(native: Profile, upcast: Profile) -> Profile:
        """The verdict once the bf16 kernel has also run with its bf16 tiles in fp32: still
        wrong, it is wrong for its own reasons (the first verdict stands, saying so); correct,
        its failure was the interpreter's bf16 arithmetic (the upcast run's verdict, saying so
        and what failed natively)."""
        if upcast.status not in ("unmeasured", "passed"):
            note = (
                "\nnote: the same checks with bf16 tiles computed in fp32 fail too "
                f"({upcast.status}), so this is the kernel's own error, not the interpreter's bf16 arithmetic"
            )
            head, sep, tail = native.log.partition("\n--- kernel output ---")
            native.log = head + note + sep + tail
            return native
        failed = [c for c in native.correctness if not c.passed]
        what = (
            f"{len(failed)} check(s) failed ({', '.join(c.case for c in failed[:6])}"
            f"{', ...' if len(failed) > 6 else ''}; {failed[0].case}: {failed[0].note.splitlines()[0]})"
            if failed
            else native.log.splitlines()[0]
        )
        upcast.log = (
            "correct with bf16 tiles computed in fp32: with the Triton interpreter's own bf16 arithmetic "
            f"{what}, and with bf16 tiles held in fp32 every check passes, so the failure was the "
            "interpreter's. bf16 precision itself is checked on a GPU.\n" + upcast.log
        )
        upcast.counters["bf16_upcast"] = 1.0
        return upcast

    def _keep_budget(self) -> int:
        """How many bytes of outputs a round may keep (every call's, for the secret checks)."""
        if self.keep_outputs_bytes is not None:
            return self.keep_outputs_bytes
        if self.mode == "cuda":
            mem = min((g.memory_bytes for g in self.gpu_infos if g.memory_bytes), default=16 << 30)
            return mem // 4
        return 1 << 30

    def _sets_budget(self) -> int:
        """How many bytes of input buffer sets a round may stock before its clock starts."""
        if self.timing_sets_bytes is not None:
            return self.timing_sets_bytes
        if self.mode == "cuda":
            mem = min((g.memory_bytes for g in self.gpu_infos if g.memory_bytes), default=16 << 30)
            return mem // 4
        return 1 << 30

    def _timing_plan(self, problem: Problem, plan: list[PlannedCase], like: str) -> TimingPlan:
        from hardware_agents.triton.data import output_metas

        pc = next(p for p in plan if p.name == like)
        out_bytes = sum(
            math.prod(o.shape or ()) * torch.empty((), dtype=torch_dtype(o.dtype)).element_size()
            for o in output_metas(problem.definition, pc.workload)
        )
        calls = self.warmup + max(self.reps, PER_ROUND)
        kept = calls * (2 if self.graphs else 1)  # the graph replays' outputs are kept too
        return TimingPlan(
            like=like,
            rounds=self.trials + self.extra_rounds,
            per_round=PER_ROUND,
            calls=calls,
            samples=self.sample_positions,
            full=self.full_checks,
            positions_in_round=kept * out_bytes > self._keep_budget(),
            reference_budget_s=self.reference_budget_s,
        )

    def stages(
        self, problem: Problem, solution: Solution, seeds: tuple[int, ...], timeout_s: float, measure: bool
    ) -> Stages:
        return TritonStages(self, problem, solution, seeds, timeout_s, measure)

    def _request(
        self,
        problem: Problem,
        solution: Solution,
        data: ProblemData,
        contents: list[str],
        seed: int,
        tplan: TimingPlan | None,
        entry_path: str,
        symbol: str,
    ) -> HarnessRequest:
        cases = [
            CaseSpec(name=c.name, inputs_file=c.inputs_file, scalars=c.scalars, outputs=c.outputs)
            for c in data.cases
        ]
        timing_spec = None
        if tplan is not None:
            set_bytes = data.by_name[contents[0]].set_bytes
            l2 = l2_bytes(self._spec)
            timing_spec = TimingSpec(
                like=contents[0],
                per_round=PER_ROUND,
                rotation=sets_for(
                    PER_ROUND, tplan.calls, set_bytes, l2 if self.mode == "cuda" else 0, self._sets_budget()
                ),
                timer="simulated" if self.mode == "interpreter" else self.timer,
                device_flush_s=self.simulated_flush_s if self.mode == "interpreter" else 0.0,
                warmup=self.warmup,
                reps=tplan.calls - self.warmup,
                trials=self.trials,
                extra_rounds=self.extra_rounds,
                graphs=self.graphs,
                # a GPU host captures a Triton launch in tens of microseconds; the interpreter's
                # Python on a shared host takes ten times that
                capture_budget_s=CAPTURE_BUDGET_S if self.mode == "cuda" else 10 * CAPTURE_BUDGET_S,
                flush_bytes=self._flush_bytes(l2),
                calibration_rounds=self.calibration_rounds,
                keep_outputs=not tplan.positions_in_round,
                inputs_dir=str(self._rounds_dir()),
            )
        first = data.cases[0].planned.workload
        return HarnessRequest(
            module_dir="",
            entry_file=entry_path,
            entry_symbol=symbol,
            destination_passing=solution.spec.destination_passing_style,
            inputs=input_metas(problem.definition, first),
            cases=cases,
            device="cuda" if self.mode == "cuda" else "cpu",
            timing=timing_spec,
            seed=seed,
        )

    def _flush_bytes(self, l2: int) -> int:
        if self.flush_bytes is not None:
            return self.flush_bytes
        # on CPU tensors (the interpreter) there is no GPU L2 to evict: a few MB of host cache
        return 8 << 20 if self.mode == "interpreter" else max(256 << 20, 4 * l2)


class H100Agent(TritonAgent):
    kind = "h100"


class H200Agent(TritonAgent):
    kind = "h200"


class B200Agent(TritonAgent):
    kind = "b200"


AGENTS: dict[str, type[TritonAgent]] = {"h100": H100Agent, "h200": H200Agent, "b200": B200Agent}


__all__ = [
    "AGENTS",
    "HARNESS_TARGET",
    "B200Agent",
    "H100Agent",
    "H200Agent",
    "TritonAgent",
    "hand_over_file",
    "plan_triton_cases",
    "rotation_for",
    "sets_for",
]
