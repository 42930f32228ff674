"""Inputs and references of one problem's correctness cases, staged for sandboxed runs.

A `ProblemData` holds every case of a profile plan (the seeds and adversarial cases of
each workload the plan checks): the inputs as torch.save'd CPU tensors in a directory the
sandbox may read, and the float64 references (computed once by the reference harness in
its own sandboxed child, on the kernels' device) with their comparison statistics. A
`DataCache` keeps the last few problems in the LRU every agent uses
(`hardware_agents.datacache`).
"""

from __future__ import annotations

import math
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec
import numpy as np
import torch

from accelopt.problem import Definition, Problem, Tolerance, Workload
from hardware_agents import datacache, validity
from hardware_agents.triton.inputs import axis_values, case_inputs, is_float
from hardware_agents.triton.records import TensorMeta
from hardware_agents.triton.reference import RefCase, RefRequest

# Correctness bar of a definition without x_tolerance, by its narrowest float output:
# FlashInfer-Bench's default atol = rtol = 1e-2 for 16-bit and 8-bit outputs, plus a relative
# L2 bound a little above their rounding error; fp32 outputs keep the validity default.
LOW_PRECISION_TOLERANCE = Tolerance(rel_l2=1e-2, atol=1e-2, rtol=1e-2)


def tolerance_for(definition: Definition) -> Tolerance:
    if definition.x_tolerance is not None:
        return definition.x_tolerance
    dtypes = [s.dtype for s in definition.outputs.values() if is_float(s.dtype)]
    if any(d != "float32" for d in dtypes):
        return LOW_PRECISION_TOLERANCE
    return Tolerance()


class PlannedCase(msgspec.Struct, frozen=True, kw_only=True):
    name: str  # unique in the plan, safe as a file name
    workload: Workload
    case: validity.InputCase
    label: str  # the workload's label, for logs


def case_name(prefix: str, case: validity.InputCase) -> str:
    base = f"{prefix}-{case.name}" if prefix else case.name
    return re.sub(r"[^A-Za-z0-9_.-]", "_", base)


def output_metas(definition: Definition, workload: Workload) -> list[TensorMeta]:
    axes = axis_values(definition, workload)
    out = []
    for name, spec in definition.outputs.items():
        shape = definition.shape_of(name, axes)
        out.append(TensorMeta(name=name, dtype=spec.dtype, shape=list(shape) if shape is not None else None))
    return out


def input_metas(definition: Definition, workload: Workload) -> list[TensorMeta]:
    axes = axis_values(definition, workload)
    out = []
    for name, spec in definition.inputs.items():
        shape = definition.shape_of(name, axes)
        out.append(TensorMeta(name=name, dtype=spec.dtype, shape=list(shape) if shape is not None else None))
    return out


class CaseData:
    def __init__(self, planned: PlannedCase, inputs_file: str, scalars: dict[str, float | int | bool],
                 outputs: list[TensorMeta], ref64: dict[str, np.ndarray], tol: Tolerance, set_bytes: int) -> None:
        self.planned = planned
        self.name = planned.name
        self.inputs_file = inputs_file
        self.scalars = scalars
        self.outputs = outputs
        self.ref64 = ref64
        self.set_bytes = set_bytes
        self.stats = {n: validity.RefStats(r, tol) for n, r in ref64.items()}


RefRunner = Callable[[RefRequest, Sequence[str]], dict[str, dict[str, torch.Tensor]]]


def to_float64(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bool:
        return t.to(torch.int64).numpy().astype(np.float64)
    return t.detach().to("cpu", torch.float64).numpy()


def timing_plan(plan: Sequence[PlannedCase], like: str, rounds: int, per_round: int) -> list[list[PlannedCase]]:
    """The fresh contents of each timing round: `per_round` cases at the workload of the
    correctness case `like`, on seeds from the OS's random source (never a correctness seed)."""
    base = next(pc for pc in plan if pc.name == like)
    used = {pc.case.seed for pc in plan}
    out = []
    for k in range(rounds):
        row = []
        for j in range(per_round):
            seed = secrets.randbits(31)
            while seed in used:
                seed = secrets.randbits(31)
            used.add(seed)
            case = validity.InputCase(name=f"timing-r{k}-c{j}", seed=seed)
            row.append(PlannedCase(name=f"timing-r{k}-c{j}", workload=base.workload, case=case, label=base.label))
        out.append(row)
    return out


class ProblemData:
    """Every planned case of one problem: input files under `self.dir` (the kernel's sandbox
    may read it), references in memory only. With `timing` (the rounds of `timing_plan`), also
    the fresh timing contents: their inputs under `self.timing_dir`, which only the reference
    child may read (the agent hands a round's inputs to the kernel's child when it times that
    round), and their references, in memory too."""

    def __init__(self, problem: Problem, plan: Sequence[PlannedCase], root: Path, run_reference: RefRunner,
                 data_roots: Sequence[str | Path] = (), timing: Sequence[Sequence[PlannedCase]] = ()) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="triton-data-", dir=root))
        os.chmod(self.dir, 0o755)
        self.timing_dir = Path(tempfile.mkdtemp(prefix="triton-timing-", dir=root))
        os.chmod(self.timing_dir, 0o755)  # for the reference child's uid; never on the kernel's read list
        self.cases: list[CaseData] = []
        self.rounds: list[list[CaseData]] = []
        self.notes: list[str] = []
        d = problem.definition
        tol = tolerance_for(d)
        round_of = {pc.name: k for k, row in enumerate(timing) for pc in row}
        try:
            staged: list[tuple[PlannedCase, str, dict, list[TensorMeta], int]] = []
            for pc in [*plan, *(pc for row in timing for pc in row)]:
                tensors, scalars = case_inputs(d, pc.workload, pc.case, data_roots)
                path = (self.timing_dir if pc.name in round_of else self.dir) / f"{pc.name}.pt"
                torch.save(tensors, path)
                os.chmod(path, 0o644)
                outs = output_metas(d, pc.workload)
                nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
                nbytes += sum(math.prod(o.shape or ()) * torch.empty((), dtype=_dt(o.dtype)).element_size() for o in outs)
                staged.append((pc, str(path), scalars, outs, nbytes))
            request = RefRequest(definition=d.name, source=d.reference, inputs=input_metas(d, problem.workload),
                                 outputs=list(d.outputs),
                                 cases=[RefCase(name=pc.name, inputs_file=f, scalars=sc) for pc, f, sc, _, _ in staged])
            refs = run_reference(request, [str(self.dir), str(self.timing_dir)])
            self.rounds = [[] for _ in timing]
            for pc, f, sc, outs, nbytes in staged:
                ref = refs[pc.name]
                ref64: dict[str, np.ndarray] = {}
                for meta in outs:
                    t = ref.get(meta.name)
                    if t is None:
                        raise ValueError(f"{d.name}: the reference produced no output {meta.name}")
                    if meta.shape is not None and list(t.shape) != meta.shape:
                        raise ValueError(f"{d.name}: reference output {meta.name} has shape {list(t.shape)}, "
                                         f"the definition says {meta.shape} (workload {pc.label})")
                    if t.is_floating_point():  # the exact answer as the output dtype holds it (fp16 overflows)
                        t = t.to(_dt(meta.dtype))
                    ref64[meta.name] = to_float64(t)
                bad = [n for n, r in ref64.items() if not np.all(np.isfinite(r))]
                if pc.name in round_of:
                    if bad:
                        raise ValueError(f"{d.name}: the reference is non-finite in {bad} on timing seed "
                                         f"{pc.case.seed}")
                    self.rounds[round_of[pc.name]].append(CaseData(pc, f, sc, outs, ref64, tol, nbytes))
                    continue
                if bad and pc.case.adversarial:
                    if d.x_adversarial is not None:
                        raise ValueError(f"{d.name}: adversarial case {pc.case.name!r} makes the reference non-finite "
                                         f"in {bad}; fix x_adversarial")
                    self.notes.append(f"adversarial case {pc.case.name!r} skipped at {pc.label}: the reference "
                                      f"overflows {', '.join(bad)} at those magnitudes (set x_adversarial)")
                    continue
                self.cases.append(CaseData(pc, f, sc, outs, ref64, tol, nbytes))
        except BaseException:
            self.remove()
            raise
        self.by_name = {c.name: c for c in (*self.cases, *(c for row in self.rounds for c in row))}

    def round_inputs(self, k: int) -> dict[str, dict[str, torch.Tensor]]:
        """Timing round k's inputs: content name -> input tensors (the scalars are the `like` case's)."""
        return {c.name: torch.load(c.inputs_file, weights_only=True) for c in self.rounds[k]}

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.timing_dir, ignore_errors=True)


def _dt(name: str) -> torch.dtype:
    from hardware_agents.triton.inputs import torch_dtype

    return torch_dtype(name)


class DataCache:
    """The last few problems' data, in the LRU of `hardware_agents.datacache`, keyed by
    (problem hash, plan, device, timing); the staging dir goes away on close/GC/exit."""

    def __init__(self, capacity: int = 3, base_dir: Path | None = None) -> None:
        # 0755: the sandboxed children (other uids) read the inputs; references are in memory
        self._cache: datacache.DataCache[ProblemData] = datacache.DataCache(
            _by_lookup_only, capacity=capacity, base_dir=base_dir, prefix="accelopt-triton-data-", mode=0o755)

    @property
    def root(self) -> Path:
        root = self._cache.root
        assert root is not None
        return root

    def get(self, problem: Problem, plan: Sequence[PlannedCase], run_reference: RefRunner, *, device: str,
            data_roots: Sequence[str | Path] = (), timing: tuple[str, int, int] | None = None) -> ProblemData:
        """`timing`: (like, rounds, per_round) to make the fresh timing contents too (see
        `timing_plan`); they are drawn once per cached problem."""
        key = (problem.content_hash(), msgspec.json.encode(list(plan)).decode(), device, timing)

        def build(root: Path | None) -> ProblemData:
            assert root is not None
            rounds = timing_plan(plan, *timing) if timing else ()
            return ProblemData(problem, plan, root, run_reference, data_roots, rounds)

        return self._cache.lookup(key, build)

    def close(self) -> None:
        self._cache.close()


def _by_lookup_only(problem: Problem, seeds: tuple[int, ...], root: Path | None) -> ProblemData:
    raise TypeError("the Triton data cache builds entries through DataCache.get(problem, plan, ...)")
