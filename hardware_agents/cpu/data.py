"""Inputs and references of one problem, held by the trusted side only.

Generating inputs and float64 references costs far more than a profile of a small kernel
(a float64 reference loop can take a second), and every candidate of a problem uses the
same cases, so a `DataCache` (`hardware_agents.datacache`) keeps the last few problems in
the parent's memory. Nothing is written to disk: the kernel's process gets its inputs in
a read-only shared region and never sees a reference.

Besides the correctness cases, a `ProblemData` holds a timing pool: a few input sets on
seeds drawn from the OS's random source when the data is built, never the correctness
seeds, with their float64 references. Every timed call gets fresh random values
(`fresh_content`: the definition's init expressions on a seed drawn for that call), so no
run of values in it was ever seen by the kernel: a cache keyed on content, on a sample of
it or on any run of it misses. A few timed calls of each profile get a pool set as it is
(each at most once per profile, and a kernel's process lives for one profile), whose
output is then checked in full at no cost. The kernel cannot tell those calls from the
others: both are the definition's inputs on a seed it has never seen.
"""

from __future__ import annotations

import secrets
import time

import numpy as np

from accelopt.problem import Problem, Tolerance
from hardware_agents.pipeline import compare, inputgen, numpy_ref
from hardware_agents.pipeline.cases import adversarial_overflow

TIMING_POOL = 4


class CaseData:
    def __init__(
        self,
        case: inputgen.InputCase,
        inputs: dict[str, object],
        ref64: dict[str, np.ndarray],
        tol: Tolerance,
    ) -> None:
        self.case = case
        self.inputs = inputs
        self.ref64 = ref64
        self.stats = {n: compare.RefStats(r, tol) for n, r in ref64.items()}


class ProblemData:
    """All correctness cases of one (problem, seeds) and the timing pool, in memory."""

    def __init__(self, problem: Problem, seeds: tuple[int, ...]) -> None:
        self.problem = problem
        tol = compare.tolerance_of(problem.definition)
        self.cases: list[CaseData] = []
        ref_s: list[float] = []
        for case in inputgen.input_cases(problem.definition, seeds):
            inputs = inputgen.make_inputs(problem, case)
            t0 = time.perf_counter()
            ref64 = numpy_ref.reference_outputs(problem, inputs)
            ref_s.append(time.perf_counter() - t0)
            overflow = adversarial_overflow(problem.name, case, ref64)
            if overflow is not None:
                raise ValueError(overflow)
            self.cases.append(CaseData(case, inputs, ref64, tol))
        self.reference_s = float(np.median(ref_s)) if ref_s else 0.0
        self.pool: list[dict[str, object]] = []
        self.pool_ref64: list[dict[str, np.ndarray]] = []
        for _ in range(TIMING_POOL):
            seed = secrets.randbelow(2**31 - 1) + 100_000  # never one of the small correctness seeds
            inputs = inputgen.make_inputs(problem, inputgen.InputCase(name=f"pool-{seed}", seed=seed))
            self.pool.append(inputs)
            self.pool_ref64.append(numpy_ref.reference_outputs(problem, inputs))
        d = problem.definition
        self.float_inputs = [n for n, s in d.inputs.items() if s.dtype.startswith(("float", "bfloat"))]
        first = self.cases[0]
        self.set_bytes = sum(a.nbytes for a in first.inputs.values() if isinstance(a, np.ndarray))
        self.set_bytes += sum(
            np.dtype(inputgen.numpy_dtype(s.dtype)).itemsize * first.ref64[n].size
            for n, s in d.outputs.items()
        )

    def pool_content(self, dest: dict[str, np.ndarray], index: int) -> dict[str, np.ndarray]:
        """Write pool set `index` as it is into `dest`; its reference is `pool_ref64[index]`."""
        for name, arr in dest.items():
            np.copyto(arr, self.pool[index][name])  # type: ignore[arg-type]
        return dest

    def fresh_content(self, dest: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Write a never-seen input set into `dest` (the buffer views) and return it: every
        array input drawn afresh from its init expression on a seed drawn from `rng` (the
        correctness cases' generator, so the values are valid inputs of the problem)."""
        seed = int(rng.integers(1 << 62)) | (1 << 62)  # never one of the small correctness seeds
        values = inputgen.make_inputs(self.problem, inputgen.InputCase(name="timed", seed=seed))
        for name, arr in dest.items():
            np.copyto(arr, values[name])
        return dest
