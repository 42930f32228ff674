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
import math
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np

from accelopt.problem import Problem
from hardware_agents import validity
from hardware_agents.neuron.protocol import KernelArg
from hardware_agents.neuron.reference import ReferenceModule
from hardware_agents.pipeline.cases import adversarial_overflow
from hardware_agents.sandbox import private_dir

WORKDIR_SLACK = 256 << 20  # a child's work dir beyond the outputs it writes (headers, its stage file)


def references_base() -> Path:
    """Where the private reference dirs go: the temp dir, not `/dev/shm` (the sandboxes'
    base). NKIBench's bmm holds 12 GiB of float64 references over its six cases: in RAM
    they would take the machine's memory; on a disk-backed temp dir the page cache keeps
    what fits."""
    return Path(tempfile.gettempdir())


class CaseData:
    """One case: its staged kernel arguments at once, its float64 references when the
    problem's reference thread has computed them (`refs()` waits for them)."""

    def __init__(self, case: validity.InputCase, args: list[KernelArg]) -> None:
        self.case = case
        self.args = args
        self.ref_files: dict[str, str] = {}
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def refs(self) -> dict[str, np.ndarray]:
        """The references (memory-mapped), once computed; re-raises what computing them raised."""
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return {n: np.load(p, mmap_mode="r", allow_pickle=False) for n, p in self.ref_files.items()}

    def _done(self, ref_files: dict[str, str] | None, error: BaseException | None = None) -> None:
        self.ref_files = ref_files or {}
        self._error = error
        self._ready.set()


def _reference(problem: Problem, case: validity.InputCase, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
    ref64 = validity.reference_outputs(problem, inputs)
    overflow = adversarial_overflow(problem.name, case, ref64)
    if overflow is not None:
        raise ValueError(overflow)
    return {n: np.asarray(r, dtype=np.float64) for n, r in ref64.items()}


def output_bytes_of(problem: Problem) -> dict[str, int]:
    """Each output's size as the references hold it in fp32 (at least 4 bytes an element),
    from the definition's shapes: known before any reference is computed."""
    out = {}
    for name, shape in problem.output_shapes().items():
        item = max(4, np.dtype(validity.numpy_dtype(problem.definition.outputs[name].dtype)).itemsize)
        out[name] = math.prod(shape or ()) * item
    return out


class ProblemData:
    """All correctness cases of one (problem, seeds), under `root` (the cache's staging dir).

    The inputs are drawn and staged here; the float64 references are computed in a thread of
    their own, case by case in the cases' order, while the kernel compiles and runs (they are
    needed only to judge it: `CaseData.refs()` waits). numpy releases the GIL in the
    references' array work, so on a machine with two cores they cost no wall time of their
    own when the kernel's run takes longer."""

    def __init__(self, problem: Problem, seeds: tuple[int, ...], root: Path) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="nki-data-", dir=root))
        os.chmod(self.dir, 0o755)
        # outside the data dir (which is on the sandbox's read list) and 0700: the kernel's uid
        # reaches it neither through Landlock nor through permissions
        self.private = private_dir(references_base(), "accelopt-nki-refs-")
        self.cases: list[CaseData] = []
        self.output_bytes = output_bytes_of(problem)
        self._cancel = threading.Event()
        pending: list[tuple[CaseData, dict[str, Any]]] = []
        try:
            ref_mod = ReferenceModule(problem)
            for case in validity.input_cases(problem.definition, seeds):
                inputs = validity.make_inputs(problem, case)
                cdir = self.dir / case.name
                cdir.mkdir(mode=0o755)
                specs, _ = write_args(ref_mod.kernel_args(inputs), cdir)
                cd = CaseData(case, specs)
                self.cases.append(cd)
                pending.append((cd, inputs))
        except BaseException:
            self.remove()
            raise
        self.seeds = frozenset(c.case.seed for c in self.cases)
        self._thread = threading.Thread(
            target=self._references, args=(problem, pending), name=f"nki-refs-{problem.name}", daemon=True
        )
        self._thread.start()

    def _references(self, problem: Problem, pending: list[tuple[CaseData, dict[str, Any]]]) -> None:
        failed: BaseException | None = None
        while pending:
            cd, inputs = pending.pop(0)
            if failed is not None or self._cancel.is_set():
                cd._done(None, failed or RuntimeError("the problem's data was removed"))
                continue
            try:
                ref64 = _reference(problem, cd.case, inputs)
                del inputs
                files = {}
                for name, ref in ref64.items():
                    path = self.private / f"{cd.case.name}-{name}.npy"
                    np.save(path, ref, allow_pickle=False)
                    files[name] = str(path)
                cd._done(files)
            except BaseException as e:
                failed = e
                cd._done(None, e)

    def wait_references(self) -> None:
        """Block until every case's references are computed (or failed)."""
        for cd in self.cases:
            cd._ready.wait()

    def workdir_bytes(self, files: int, floor: int) -> int:
        """The work-dir cap of a child that writes `files` sets of this problem's outputs: their
        size (as fp32, what the references hold) + 256 MiB for the rest, at least `floor`."""
        return max(floor, files * sum(self.output_bytes.values()) + WORKDIR_SLACK)

    def remove(self) -> None:
        self._cancel.set()
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
