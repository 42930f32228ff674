"""Inputs and references of one problem, held by the trusted side only.

Generating inputs and float64 references costs far more than a profile of a small kernel
(a float64 reference loop can take a second), and every candidate of a problem uses the
same cases, so a `DataCache` (`hardware_agents.datacache`) keeps the last few problems in
the parent's memory. Nothing is written to disk: the kernel's process gets its inputs in
a read-only shared region and never sees a reference.

Besides the correctness cases, a `ProblemData` holds a timing pool: a few input sets on
seeds drawn from the OS's random source when the data is built, never the correctness
seeds, with their float64 references. Timed calls get contents made from the pool
(`fresh_content`), so a kernel cannot know them in advance or recognise one it has seen; a
few timed calls of each profile get a pool set as it is (each at most once per profile,
and a kernel's process lives for one profile), whose output is then checked in full at no
cost. The kernel cannot tell those calls from the others.
"""

from __future__ import annotations

import itertools
import secrets
import time

import numpy as np

from accelopt.problem import Problem
from hardware_agents import validity

TIMING_POOL = 4
_CHUNKS = 8


class CaseData:
    def __init__(self, case: validity.InputCase, inputs: dict[str, object], ref64: dict[str, np.ndarray],
                 tol: validity.Tolerance) -> None:
        self.case = case
        self.inputs = inputs
        self.ref64 = ref64
        self.stats = {n: validity.RefStats(r, tol) for n, r in ref64.items()}


class ProblemData:
    """All correctness cases of one (problem, seeds) and the timing pool, in memory."""

    def __init__(self, problem: Problem, seeds: tuple[int, ...]) -> None:
        self.problem = problem
        tol = validity.tolerance_of(problem.definition)
        self.cases: list[CaseData] = []
        ref_s: list[float] = []
        for case in validity.input_cases(problem.definition, seeds):
            inputs = validity.make_inputs(problem, case)
            t0 = time.perf_counter()
            ref64 = validity.reference_outputs(problem, inputs)
            ref_s.append(time.perf_counter() - t0)
            bad = [n for n, r in ref64.items() if not np.all(np.isfinite(r))]
            if bad and case.adversarial:
                raise ValueError(f"{problem.name}: adversarial case {case.name!r} makes the reference "
                                 f"non-finite in {bad}; fix x_adversarial")
            self.cases.append(CaseData(case, inputs, ref64, tol))
        self.reference_s = float(np.median(ref_s)) if ref_s else 0.0
        self.pool: list[dict[str, object]] = []
        self.pool_ref64: list[dict[str, np.ndarray]] = []
        for _ in range(TIMING_POOL):
            seed = secrets.randbelow(2**31 - 1) + 100_000  # never one of the small correctness seeds
            inputs = validity.make_inputs(problem, validity.InputCase(name=f"pool-{seed}", seed=seed))
            self.pool.append(inputs)
            self.pool_ref64.append(validity.reference_outputs(problem, inputs))
        d = problem.definition
        self.float_inputs = [n for n, s in d.inputs.items() if s.dtype.startswith(("float", "bfloat"))]
        first = self.cases[0]
        self.set_bytes = sum(a.nbytes for a in first.inputs.values() if isinstance(a, np.ndarray))
        self.set_bytes += sum(np.dtype(validity.numpy_dtype(s.dtype)).itemsize * first.ref64[n].size
                              for n, s in d.outputs.items())

    def pool_content(self, dest: dict[str, np.ndarray], index: int) -> dict[str, np.ndarray]:
        """Write pool set `index` as it is into `dest`; its reference is `pool_ref64[index]`."""
        for name, arr in dest.items():
            np.copyto(arr, self.pool[index][name])  # type: ignore[arg-type]
        return dest

    def fresh_content(self, dest: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Write a never-seen input set into `dest` (the buffer views) and return it.

        Each float input is made of `_CHUNKS` pieces, each copied from a random pool set at
        a random offset (cyclically), so every value comes from a valid input of the problem
        but the whole is new: a cache keyed on content, or on a sample of it, misses, and
        roll-invariant summaries (sums, norms) differ from any seen before. Other inputs
        (integers, indices with structure) are copied whole from one pool set.
        """
        base = self.pool[int(rng.integers(len(self.pool)))]
        for name, arr in dest.items():
            src_whole = base[name]
            assert isinstance(src_whole, np.ndarray)
            if name not in self.float_inputs or arr.size < _CHUNKS:
                np.copyto(arr, src_whole)
                continue
            flat = arr.reshape(-1)
            n = flat.size
            bounds = np.linspace(0, n, _CHUNKS + 1).astype(np.int64)
            for lo, hi in itertools.pairwise(bounds):
                src = self.pool[int(rng.integers(len(self.pool)))][name]
                assert isinstance(src, np.ndarray)
                s = src.reshape(-1)
                off = int(rng.integers(n))
                take = int(hi - lo)
                first = min(take, n - off)
                flat[lo:lo + first] = s[off:off + first]
                if first < take:
                    flat[lo + first:hi] = s[:take - first]
        return dest
