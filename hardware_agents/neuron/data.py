"""Inputs and references of one problem, staged for sandboxed NKI runs.

Per correctness case (the seeds, then the adversarial cases of the validity layer): inputs
drawn from the definition's `x_input_init` (NKIBench's `get_inputs` distributions),
transformed into the kernel's arguments with the problem's `transform_to_nki_inputs`, and
saved as .npy files in a directory the sandbox may read; the float64 reference outputs go
to a private 0700 directory outside the data dir and every sandbox read path (a kernel must
not be able to copy them).
Generating references at NKIBench shapes is costly, and every candidate of a problem uses
the same cases, so the last few problems are kept (LRU).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from accelopt.problem import Problem
from hardware_agents import validity
from hardware_agents.neuron.protocol import KernelArg
from hardware_agents.neuron.reference import ReferenceModule
from hardware_agents.sandbox import default_base_dir, private_dir


class CaseData:
    def __init__(self, case: validity.InputCase, args: list[KernelArg], ref_files: dict[str, str]) -> None:
        self.case = case
        self.args = args
        self.ref_files = ref_files

    def refs(self) -> dict[str, np.ndarray]:
        return {n: np.load(p, mmap_mode="r", allow_pickle=False) for n, p in self.ref_files.items()}


class ProblemData:
    """All cases of one (problem, seeds)."""

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

    def _case(self, problem: Problem, ref_mod: ReferenceModule, case: validity.InputCase) -> CaseData:
        inputs = validity.make_inputs(problem, case)
        ref64 = validity.reference_outputs(problem, inputs)
        bad = [n for n, r in ref64.items() if not np.all(np.isfinite(r))]
        if bad and case.adversarial:
            raise ValueError(f"{problem.name}: adversarial case {case.name!r} makes the reference non-finite in "
                             f"{bad}; fix x_adversarial")
        args = ref_mod.kernel_args(inputs)
        cdir = self.dir / case.name
        cdir.mkdir(mode=0o755)
        specs: list[KernelArg] = []
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray):
                path = cdir / f"arg{i}.npy"
                np.save(path, np.ascontiguousarray(a), allow_pickle=False)
                os.chmod(path, 0o644)
                specs.append(KernelArg(path=str(path)))
            else:
                specs.append(KernelArg(scalar=_scalar(a)))
        ref_files = {}
        for name, ref in ref64.items():
            path = self.private / f"{case.name}-{name}.npy"
            np.save(path, np.asarray(ref, dtype=np.float64), allow_pickle=False)
            ref_files[name] = str(path)
            self.output_bytes[name] = max(self.output_bytes.get(name, 0), int(ref.size) * 4)
        return CaseData(case, specs, ref_files)

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.private, ignore_errors=True)


def _scalar(a: Any) -> float | int | bool:
    if isinstance(a, np.generic):
        a = a.item()
    if isinstance(a, bool | int | float):
        return a
    raise TypeError(f"kernel argument of type {type(a).__name__} is neither an array nor a scalar")


class DataCache:
    """LRU of ProblemData by (problem content hash, seeds); thread-safe; removed on close/GC/exit."""

    def __init__(self, capacity: int = 2, base_dir: Path | None = None) -> None:
        self.capacity = capacity
        self._base = base_dir
        self._root: Path | None = None
        self._finalizer: weakref.finalize | None = None
        self._items: OrderedDict[tuple[str, tuple[int, ...]], ProblemData] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def root(self) -> Path:
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="accelopt-nki-", dir=self._base or default_base_dir()))
            os.chmod(self._root, 0o755)
            self._finalizer = weakref.finalize(self, shutil.rmtree, str(self._root), True)
        return self._root

    def get(self, problem: Problem, seeds: tuple[int, ...]) -> ProblemData:
        key = (problem.content_hash(), seeds)
        with self._lock:
            data = self._items.get(key)
            if data is not None:
                self._items.move_to_end(key)
                return data
            data = ProblemData(problem, seeds, self.root)
            self._items[key] = data
            while len(self._items) > self.capacity:
                _, old = self._items.popitem(last=False)
                old.remove()
            return data

    def close(self) -> None:
        with self._lock:
            self._items.clear()
            if self._finalizer is not None:
                self._finalizer()
            self._root, self._finalizer = None, None


__all__ = ["CaseData", "DataCache", "ProblemData"]
