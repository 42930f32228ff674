"""Inputs and references of one problem, staged as .npy files for sandboxed harness runs.

Generating inputs and float64 references costs far more than a profile of a small kernel
(a float64 reference loop can take a second), and every candidate of a problem uses the
same cases, so a `DataCache` keeps the last few problems: the float64 references in memory
(the parent's authoritative comparison) and, in a world-readable directory the sandbox may
read, the inputs and float32 references the harness loads.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import weakref
from collections import OrderedDict
from pathlib import Path

import numpy as np

from accelopt.problem import Problem
from hardware_agents import validity
from hardware_agents.sandbox import default_base_dir, private_dir


class CaseData:
    def __init__(self, case: validity.InputCase, inputs: dict[str, object], ref64: dict[str, np.ndarray],
                 input_files: dict[str, str], ref_files: dict[str, str], tol: validity.Tolerance) -> None:
        self.case = case
        self.inputs = inputs
        self.ref64 = ref64
        self.input_files = input_files
        self.ref_files = ref_files
        self.stats = {n: validity.RefStats(r, tol) for n, r in ref64.items()}


class ProblemData:
    """All cases of one (problem, seeds): generated once, files under `self.dir`."""

    def __init__(self, problem: Problem, seeds: tuple[int, ...], root: Path) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="data-", dir=root))
        os.chmod(self.dir, 0o755)
        self.cases: list[CaseData] = []
        self.set_bytes = 0  # inputs + outputs of one call
        try:
            for case in validity.input_cases(problem.definition, seeds):
                inputs = validity.make_inputs(problem, case)
                ref64 = validity.reference_outputs(problem, inputs)
                bad = [n for n, r in ref64.items() if not np.all(np.isfinite(r))]
                if bad and case.adversarial:
                    raise ValueError(f"{problem.name}: adversarial case {case.name!r} makes the reference "
                                     f"non-finite in {bad}; fix x_adversarial")
                cdir = self.dir / case.name
                cdir.mkdir(mode=0o755)
                in_files, ref_files = {}, {}
                for name, arr in inputs.items():
                    if isinstance(arr, np.ndarray):
                        in_files[name] = str(cdir / f"in-{name}.npy")
                        np.save(in_files[name], arr)
                out_dtypes = {n: validity.numpy_dtype(s.dtype) for n, s in problem.definition.outputs.items()}
                for name, ref in ref64.items():
                    ref_files[name] = str(cdir / f"ref-{name}.npy")
                    with np.errstate(all="ignore"):
                        np.save(ref_files[name], ref.astype(out_dtypes[name]))
                for f in cdir.iterdir():
                    os.chmod(f, 0o644)
                self.cases.append(CaseData(case, inputs, ref64, in_files, ref_files,
                                           validity.tolerance_of(problem.definition)))
            first = self.cases[0]
            self.set_bytes = sum(a.nbytes for a in first.inputs.values() if isinstance(a, np.ndarray))
            self.set_bytes += sum(np.dtype(out_dtypes[n]).itemsize * r.size for n, r in first.ref64.items())
        except BaseException:
            self.remove()
            raise

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


class DataCache:
    """LRU of ProblemData by (problem content hash, seeds); thread-safe.

    The directory is made on first use and removed by `close()`, or when the cache is
    garbage-collected, or at interpreter exit (an agent nobody closes must not leave
    hundreds of MB in /dev/shm).
    """

    def __init__(self, capacity: int = 3, base_dir: Path | None = None) -> None:
        self.capacity = capacity
        self._base = base_dir
        self._root: Path | None = None
        self._finalizer: weakref.finalize | None = None
        self._items: OrderedDict[tuple[str, tuple[int, ...]], ProblemData] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def root(self) -> Path:
        if self._root is None:
            self._root = private_dir(self._base or default_base_dir(), "accelopt-data-")
            os.chmod(self._root, 0o755)
            self._finalizer = weakref.finalize(self, shutil.rmtree, str(self._root), True)
        return self._root

    def get(self, problem: Problem, seeds: tuple[int, ...]) -> ProblemData:
        key = (problem.content_hash(), seeds)
        with self._lock:  # generation is serialised: two threads never build the same data twice
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
                self._finalizer()  # removes the directory, once
            self._root, self._finalizer = None, None
