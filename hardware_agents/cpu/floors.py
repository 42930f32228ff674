"""The float32 floor of a CPU correctness case's bar: where a kernel's outputs miss the
problem's tolerance, they are judged again with the bar widened by what float32 itself misses
by on these inputs (`pipeline/fp32.py`'s `Fp32Floor`, FP32_FLOOR_FACTOR times the larger of
the reference formula's own float32 error and the problem's baseline's, a trusted float32
kernel run on the same inputs in a kernel server of its own).

Why: on some draws of the adversarial `large` case float32 has no answer within the tolerance:
cpu_v2/bmm_softmax's own baseline missed it on 1 seed offset in 60 (2 of 524,288 elements, rel
L2 4.4e-4 against 2e-5; numpy's float32 evaluation 4.2e-5, its one-accumulator dot products
about 10x numpy's error), and a re-measure then lost every side of the problem. The floor is
computed only for a case that missed, and no more once one has missed with it (the kernel is
wrong whatever the rest do).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from accelopt.problem import Problem, Tolerance
from accelopt.profile import SeedCheck
from hardware_agents.cpu.data import CaseData
from hardware_agents.cpu.oracle import BaselineOracle, OracleUnavailable
from hardware_agents.pipeline import compare, fp32
from hardware_agents.pipeline.phases import Phases


class CaseFloors:
    def __init__(
        self,
        problem: Problem,
        tol: Tolerance,
        counters: dict[str, float],
        make_baseline: Callable[[], BaselineOracle] | None,
    ) -> None:
        self.problem, self.tol, self.counters = problem, tol, counters
        self._make_baseline = make_baseline
        self._baseline: BaselineOracle | None = None
        self.wrong = False  # a case missed even with the floor: no more floors

    def check(self, c: CaseData, outputs: dict[str, np.ndarray]) -> SeedCheck:
        """The case's outputs against its float64 reference, with the floor where they missed."""
        chk = compare.compare_outputs(c.case.name, outputs, c.ref64, self.tol, stats=c.stats)
        if chk.passed or self.wrong:
            return chk
        with Phases(self.counters)("floor"):
            floors = [fp32.fp32_floor(self.problem, c.inputs, c.ref64, c.case.seed)]
            baseline = self._baseline_outputs(c.inputs)
            if baseline is not None:
                floors.append(fp32.error_floor(baseline, c.ref64))
        chk = compare.compare_outputs(
            c.case.name, outputs, c.ref64, self.tol, stats=c.stats, floor=fp32.widest(*floors)
        )
        self.wrong = not chk.passed
        if chk.passed:
            self.counters["passed_on_fp32_floor"] = self.counters.get("passed_on_fp32_floor", 0.0) + 1
        return chk

    def _baseline_outputs(self, inputs: dict[str, Any]) -> dict[str, np.ndarray] | None:
        """The baseline's outputs on these inputs (its server started on first need), or None
        where it cannot run (then the reference formula's float32 error is the floor)."""
        if self._baseline is None and self._make_baseline is not None:
            try:
                self._baseline = self._make_baseline()
            except OracleUnavailable:
                self._make_baseline = None
        if self._baseline is None:
            return None
        try:
            return self._baseline.outputs(inputs)
        except OracleUnavailable:
            self.close()
            self._make_baseline = None
            return None

    def close(self) -> None:
        if self._baseline is not None:
            self._baseline.close()
            self._baseline = None


__all__ = ["CaseFloors"]
