"""Inputs and references of one problem, staged for sandboxed NKI runs.

Correctness (`ProblemData`, one per (problem, seeds), kept by the generic LRU of
`hardware_agents.datacache`): per case (the seeds, then the adversarial cases of the
validity layer) inputs drawn from the definition's `x_input_init` (NKIBench's `get_inputs`
distributions), transformed into the kernel's arguments with the problem's
`transform_to_nki_inputs`, and saved as .npy files in a directory the sandbox may read; the
float64 reference outputs go to a private 0700 directory outside the data dir and every
sandbox read path (a kernel must not be able to copy them).

Timing (`TimingRound`, one per timing round, made by the agent when that round starts):
inputs drawn on a fresh seed from the OS's random source (never a correctness seed), so a
cache keyed on content seen in the correctness runs never hits; their float64 references
stay in the agent's memory. The agent writes a round's argument files into the timing
child's work dir only when the child waits for that round.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from accelopt.problem import Problem
from hardware_agents import validity
from hardware_agents.neuron.protocol import KernelArg
from hardware_agents.neuron.reference import ReferenceModule
from hardware_agents.pipeline.cases import adversarial_overflow
from hardware_agents.sandbox import default_base_dir, private_dir


WORKDIR_SLACK = 256 << 20  # a child's work dir beyond the outputs it writes (headers, its stage file)


class CaseData:
    def __init__(self, case: validity.InputCase, args: list[KernelArg], ref_files: dict[str, str]) -> None:
        self.case = case
        self.args = args
        self.ref_files = ref_files

    def refs(self) -> dict[str, np.ndarray]:
        return {n: np.load(p, mmap_mode="r", allow_pickle=False) for n, p in self.ref_files.items()}


def _reference(problem: Problem, case: validity.InputCase, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
    ref64 = validity.reference_outputs(problem, inputs)
    overflow = adversarial_overflow(problem.name, case, ref64)
    if overflow is not None:
        raise ValueError(overflow)
    return {n: np.asarray(r, dtype=np.float64) for n, r in ref64.items()}


class ProblemData:
    """All correctness cases of one (problem, seeds), under `root` (the cache's staging dir)."""

    def __init__(self, problem: Problem, seeds: tuple[int, ...], root: Path) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="nki-data-", dir=root))
        os.chmod(self.dir, 0o755)
        # outside the data dir (which is on the sandbox's read list) and 0700: the kernel's uid
        # reaches it neither through Landlock nor through permissions
        self.private = private_dir(default_base_dir(), "accelopt-nki-refs-")
        self.cases: list[CaseData] = []
        self.output_bytes: dict[str, int] = {}
        try:
            ref_mod = ReferenceModule(problem)
            for case in validity.input_cases(problem.definition, seeds):
                self.cases.append(self._case(problem, ref_mod, case))
        except BaseException:
            self.remove()
            raise
        self.seeds = frozenset(c.case.seed for c in self.cases)

    def _case(self, problem: Problem, ref_mod: ReferenceModule, case: validity.InputCase) -> CaseData:
        inputs = validity.make_inputs(problem, case)
        ref64 = _reference(problem, case, inputs)
        cdir = self.dir / case.name
        cdir.mkdir(mode=0o755)
        specs, _ = write_args(ref_mod.kernel_args(inputs), cdir)
        ref_files = {}
        for name, ref in ref64.items():
            path = self.private / f"{case.name}-{name}.npy"
            np.save(path, ref, allow_pickle=False)
            ref_files[name] = str(path)
            self.output_bytes[name] = max(self.output_bytes.get(name, 0), int(ref.size) * 4)
        return CaseData(case, specs, ref_files)

    def workdir_bytes(self, files: int, floor: int) -> int:
        """The work-dir cap of a child that writes `files` sets of this problem's outputs: their
        size (as fp32, what the references hold) + 256 MiB for the rest, at least `floor`."""
        return max(floor, files * sum(self.output_bytes.values()) + WORKDIR_SLACK)

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.private, ignore_errors=True)


def build_problem_data(problem: Problem, seeds: tuple[int, ...], root: Path | None) -> ProblemData:
    """The `build` of the agent's `DataCache` (which stages under a 0755 root)."""
    assert root is not None, "the Neuron agent's DataCache stages files: it needs a prefix"
    return ProblemData(problem, seeds, root)


def write_args(args: list[Any], cdir: Path) -> tuple[list[KernelArg], dict[str, str]]:
    """Save the array arguments as world-readable .npy files in `cdir`; (their specs, sha256 of
    each file by path)."""
    specs: list[KernelArg] = []
    digests: dict[str, str] = {}
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            path = cdir / f"arg{i}.npy"
            np.save(path, np.ascontiguousarray(a), allow_pickle=False)
            os.chmod(path, 0o644)
            specs.append(KernelArg(path=str(path)))
            digests[str(path)] = file_digest(path)
        else:
            specs.append(KernelArg(scalar=_scalar(a)))
    return specs, digests


def file_digest(path: Path | str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


class TimingRound:
    """One timing round's fresh inputs (as kernel arguments) and their float64 references,
    held in the agent's memory; `stage(dir)` writes the argument files for the timing child."""

    def __init__(self, problem: Problem, ref_mod: ReferenceModule, index: int, seed: int) -> None:
        self.index = index
        self.case = validity.InputCase(name=f"timing-r{index}", seed=seed)
        inputs = validity.make_inputs(problem, self.case)
        self.refs = _reference(problem, self.case, inputs)
        bad = [n for n, r in self.refs.items() if not np.all(np.isfinite(r))]
        if bad:
            raise ValueError(f"{problem.name}: the reference is non-finite in {bad} on timing seed {seed}")
        self.args = ref_mod.kernel_args(inputs)
        self.digests: dict[str, str] = {}

    def stage(self, cdir: Path) -> list[KernelArg]:
        cdir.mkdir(mode=0o755, parents=True)
        specs, self.digests = write_args(self.args, cdir)
        return specs

    def changed_files(self) -> list[str]:
        """Staged argument files whose bytes are no longer what was written (or are gone)."""
        out = []
        for path, digest in self.digests.items():
            try:
                same = file_digest(path) == digest
            except OSError:
                same = False
            if not same:
                out.append(Path(path).name)
        return out


def _scalar(a: Any) -> float | int | bool:
    if isinstance(a, np.generic):
        a = a.item()
    if isinstance(a, bool | int | float):
        return a
    raise TypeError(f"kernel argument of type {type(a).__name__} is neither an array nor a scalar")


__all__ = ["CaseData", "ProblemData", "TimingRound", "build_problem_data", "file_digest", "write_args"]
