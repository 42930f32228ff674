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
result is `judge.py`, the stages `stages.py`, the harness request and its timing plan
`request.py`, the children (a GPU each, spares started ahead of need) `children.py`. This
module keeps the agent: its options, GPUs, sandbox policy, references, and the profiles
repeated (a bf16 kernel's upcast run, the interpreter's boundary workloads).
"""

from __future__ import annotations

import os
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
from hardware_agents.pipeline.clock import ClockBound
from hardware_agents.pipeline.device_spec import DeviceSpec
from hardware_agents.pipeline.stages import Stages
from hardware_agents.sandbox import (
    SandboxOutcome,
    SandboxPolicy,
)
from hardware_agents.triton import gpu as gpus
from hardware_agents.triton.children import REFERENCE_TARGET, SPARE_FILE_BYTES, Children
from hardware_agents.triton.data import DataCache
from hardware_agents.triton.records import (
    TimerName,
)
from hardware_agents.triton.reference import RefRequest, RefResult
from hardware_agents.triton.request import RoundsFolders
from hardware_agents.triton.solution_cache import SolutionCache
from hardware_agents.triton.specs import device_spec, kind_for_gpu_name
from hardware_agents.triton.stages import TritonStages, plan_boundary_cases, plan_triton_cases

Mode = Literal["auto", "cuda", "interpreter"]
REFERENCE_TIMEOUT_S = 600.0  # a problem's references (its definition's code, every case and timed call)
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
        device_judge: bool | None = None,
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
        self.mode_note = self._mode_note(mode)
        if device_judge and self.mode == "cuda":
            raise ValueError(
                "device_judge is proven in the interpreter only: on a GPU its CUDA IPC buffers are "
                "exercised by scripts/gpu_check.py, not yet wired into the agent's profiles"
            )
        # the judge owns the buffers and compares in place (`device_judge.py`); the interpreter's
        # default; False: outputs handed over in files, compared on the host (the old path)
        self.device_judge = self.mode == "interpreter" if device_judge is None else device_judge
        self._toolchain: dict[str, str] | None = None
        self._lock = threading.Lock()
        self.rounds = RoundsFolders(self.sandbox_dir)  # each profile's timing rounds' inputs
        # the children, holding the pool's GPUs; spares started ahead of need (`spare.py`), one
        # per GPU (None: the interpreter's)
        self.children = Children(
            gpus.GpuPool([g.index for g in self.gpu_infos], self.cache_dir / "triton" / "locks")
            if self.gpu_infos
            else None,
            sandbox_dir=self.sandbox_dir,
            spares=self.mode == "cuda" if spare_children is None else spare_children,
            longest_s=max(self.timeout_s, REFERENCE_TIMEOUT_S),
            spare_policy=self._spare_policy,
        )
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
        self.children.close()
        self.data.close()
        self.rounds.close()

    # --- the device context the stages use (`stages.TritonDevice`) ------------------------------

    def sandbox_policy(self, timeout: float, read_paths: Sequence[str], file_bytes: int) -> SandboxPolicy:
        """A child's sandbox: `read_paths` besides its own, files up to `file_bytes`, a work dir
        sized for them, the GPUs' device nodes on a GPU."""
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

    def _spare_policy(self) -> SandboxPolicy:
        """What a spare may read: every problem's data and every timing round's folder (the
        work dir is re-capped for each request)."""
        timeout = max(
            self.timeout_s, REFERENCE_TIMEOUT_S
        )  # its CPU allowance; the wall clock starts per request
        return self.sandbox_policy(timeout, [str(self.data.root), str(self.rounds.root())], SPARE_FILE_BYTES)

    def run_reference(
        self, request: RefRequest, read_paths: Sequence[str]
    ) -> dict[str, dict[str, torch.Tensor]]:
        """The definition's reference outputs of `request`'s cases, from a child on this
        agent's device (reading `read_paths`): case -> output name -> tensor."""
        request = msgspec.structs.replace(request, device="cuda" if self.mode == "cuda" else "cpu")
        policy = self.sandbox_policy(max(self.timeout_s, REFERENCE_TIMEOUT_S), read_paths, 16 << 30)
        out, box = self.children.run(REFERENCE_TARGET, request, policy)
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

    def stages(
        self, problem: Problem, solution: Solution, seeds: tuple[int, ...], timeout_s: float, measure: bool
    ) -> Stages:
        return TritonStages(self, problem, solution, seeds, timeout_s, measure)


class H100Agent(TritonAgent):
    kind = "h100"


class H200Agent(TritonAgent):
    kind = "h200"


class B200Agent(TritonAgent):
    kind = "b200"


AGENTS: dict[str, type[TritonAgent]] = {"h100": H100Agent, "h200": H200Agent, "b200": B200Agent}


__all__ = [
    "AGENTS",
    "B200Agent",
    "H100Agent",
    "H200Agent",
    "TritonAgent",
    "plan_triton_cases",
]
