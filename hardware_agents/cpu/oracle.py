"""References for the full checks of timed calls: the problem's own baseline as a fast oracle,
with the float64 reference as the judge of every disagreement.

A kernel lazy on a random fraction f of its timed calls (a wrong but finite output now and
then) escapes K full checks drawn at random among its calls with probability (1 - f)^K. The
judge checks K = FULL_CHECKS calls per profile (f = 5 % caught with probability >= 99 %:
K = 90), more than the float64 reference allows where it is slow (cpu/mamba: ~0.5 s a
call). So the calls drawn for a check are run again through the problem's baseline kernel
(trusted: it ships with the suite and passes the same correctness cases), in a kernel
server of its own (the same sandboxed boundary, `KernelRunner`), and the candidate's outputs
are compared with the baseline's at twice the tolerance. The verdict never rests on the
baseline: where the two disagree, the call's float64 reference is computed here and decides.

`BaselineOracle.check` returns why a call is wrong (or None); the oracle stops being used
(the judge falls back to float64 references within a time budget) when the baseline cannot
run.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from accelopt.problem import Problem, Tolerance
from hardware_agents.cpu.compiler import Compiler
from hardware_agents.cpu.data import ProblemData
from hardware_agents.cpu.runner import KernelDied, KernelRunner
from hardware_agents.pipeline import compare, numpy_ref
from hardware_agents.sandbox import Sandbox, SandboxPolicy

LAZY_FRACTION = 0.05
LAZY_CONFIDENCE = 0.99
FULL_CHECKS = math.ceil(math.log(1 - LAZY_CONFIDENCE) / math.log(1 - LAZY_FRACTION))  # 90
ORACLE_SETS = 8  # calls the baseline runs per batch of checks


def lazy_fraction_caught(checks: int, confidence: float = LAZY_CONFIDENCE) -> float:
    """The smallest fraction f of lazy calls caught with probability >= `confidence` by
    `checks` full checks drawn at random: 1 - (1 - confidence)^(1/checks)."""
    return 1.0 if checks <= 0 else 1.0 - (1.0 - confidence) ** (1.0 / checks)


class OracleUnavailable(Exception):
    """The baseline could not be built or run: fall back to float64 references."""


class BaselineOracle:
    def __init__(
        self,
        problem: Problem,
        library: str,
        symbol: str,
        policy: SandboxPolicy,
        scalars: dict[str, Any],
        timeout_s: float,
        sandbox_dir: Any = None,
    ) -> None:
        self.problem = problem
        self.tol = compare.tolerance_of(problem.definition)
        self.loose = Tolerance(rel_l2=2 * self.tol.rel_l2, atol=2 * self.tol.atol, rtol=2 * self.tol.rtol)
        self.disagreements = 0  # candidate vs baseline disagreements the float64 reference settled
        self.checked = 0
        self.scalars = scalars
        self._box = Sandbox(policy, base_dir=sandbox_dir, prefix="accelopt-oracle-")
        self._runner: KernelRunner | None = None
        try:
            shutil.copyfile(library, self._box.workdir / "baseline.so")
            self._box.give("baseline.so")
            self._runner = KernelRunner(
                self._box,
                problem,
                library=str(self._box.workdir / "baseline.so"),
                symbol=symbol,
                sets=ORACLE_SETS,
                scalars=scalars,
                timeout_s=timeout_s,
            )
            self._runner.ready()
        except (KernelDied, OSError) as e:
            self.close()
            raise OracleUnavailable(f"the baseline kernel server did not start: {e}") from e

    def check(self, calls: list[tuple[str, dict[str, np.ndarray], dict[str, np.ndarray]]]) -> str | None:
        """Check each (name, inputs, outputs) in full; the first failure's reason, or None.
        `inputs` and `outputs` are views the caller keeps unchanged during the call."""
        for lo in range(0, len(calls), ORACLE_SETS):
            chunk = calls[lo : lo + ORACLE_SETS]
            sets = list(range(len(chunk)))
            runner = self._run([inputs for _, inputs, _ in chunk])
            for b, (name, inputs, outputs) in zip(sets, chunk, strict=True):
                self.checked += 1
                ref = runner.buffers[b].outputs
                if compare.compare_outputs(name, outputs, ref, self.loose).passed:
                    continue
                self.disagreements += 1  # the float64 reference decides
                full = {
                    n: np.array(inputs[n]) if n in inputs else self.scalars[n]
                    for n in self.problem.definition.inputs
                }
                chk = compare.compare_outputs(
                    name, outputs, numpy_ref.reference_outputs(self.problem, full), self.tol
                )
                if not chk.passed:
                    return chk.note
        return None

    def outputs(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        """The baseline's outputs on one input set (copies)."""
        return {n: np.array(a) for n, a in self._run([inputs]).buffers[0].outputs.items()}

    def _run(self, input_sets: list[dict[str, Any]]) -> KernelRunner:
        """The baseline called once on each input set (at most ORACLE_SETS), in its sets 0..n-1."""
        runner = self._runner
        if runner is None:
            raise OracleUnavailable("closed")
        sets = list(range(len(input_sets)))
        for b, inputs in zip(sets, input_sets, strict=True):
            for name, arr in runner.buffers[b].inputs.items():
                np.copyto(arr, inputs[name])
        runner.prepare(sets)
        try:
            runner.run(sets)
        except KernelDied as e:
            self._runner = None
            raise OracleUnavailable(f"the baseline kernel died: {e.outcome.status} {e.outcome.error}") from e
        return runner

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
            self._runner = None
        self._box.close()


def baseline_oracle(
    problem: Problem,
    data: ProblemData,
    policy: SandboxPolicy,
    timeout: float,
    *,
    compiler: Compiler,
    sandbox_dir: Path | None = None,
) -> Callable[[], BaselineOracle] | None:
    """The baseline kernel as the fast reference of the timed calls' full checks (built by
    `compiler`, run under `policy` with room for `ORACLE_SETS` sets), or None where the problem
    has no C baseline that builds."""
    base = problem.baseline
    if base is None or base.spec.language != "c":
        return None
    try:
        symbol = base.entry_symbol
    except IndexError:
        return None
    build = compiler.build(base, problem.axis_values())
    if not build.ok or build.so_path is None:
        return None
    so_path = build.so_path
    scalars = {n: v for n, v in data.cases[0].inputs.items() if not isinstance(v, np.ndarray)}
    oracle_policy = msgspec.structs.replace(
        policy,
        address_space_bytes=(1 << 30)
        + 2 * ORACLE_SETS * (data.set_bytes + 4096 * (1 + 2 * len(problem.definition.outputs))),
    )
    return lambda: BaselineOracle(
        problem, so_path, symbol, oracle_policy, scalars, timeout, sandbox_dir=sandbox_dir
    )
