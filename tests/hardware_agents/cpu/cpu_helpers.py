"""Helpers for the CPU agent tests: C solutions and a tiny problem to misbehave on."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from accelopt.problem import (
    AxisVar,
    Definition,
    Problem,
    Roofline,
    Solution,
    TensorSpec,
    Workload,
    one_file_solution,
)
from accelopt.profile import Profile
from hardware_agents.cpu import CpuAgent
from hardware_agents.cpu.stages import CpuStages


def c_solution(problem: Problem, source: str, name: str = "candidate") -> Solution:
    """A C solution for `problem` with `source` as its kernel.c (entry `kernel`)."""
    return one_file_solution(problem.name, source, name=name, author="test")


def scale_shift_problem(m: int = 256, n: int = 512) -> Problem:
    """out = 2x + 1: a tiny problem on which the misbehaving kernels run fast."""
    d = Definition(
        name="scale_shift",
        op_type="elementwise",
        axes={"M": AxisVar(), "N": AxisVar()},
        inputs={"x": TensorSpec(shape=["M", "N"], dtype="float32")},
        outputs={"out": TensorSpec(shape=["M", "N"], dtype="float32")},
        reference="def run(x):\n    return 2 * x + 1\n",
        x_numpy_reference="def run(x):\n    return 2 * x + 1\n",
        x_roofline=Roofline(flops_vector="2*M*N", bytes_min="8*M*N"),
    )
    w = Workload(uuid="scale-shift-test", axes={"M": m, "N": n})
    good = c_solution_source_scale_shift()
    base = one_file_solution("scale_shift", good, author="test")
    return Problem(definition=d, workload=w, baseline=base)


def c_solution_source_scale_shift(
    body: str = "out[i] = 2.0f * x[i] + 1.0f;", prelude: str = "", setup: str = ""
) -> str:
    return f"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
{prelude}
void kernel(const float* x, float* out) {{
    {setup}
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) {{ {body} }}
}}
"""


@contextlib.contextmanager
def kernel_output(agent: CpuAgent) -> Iterator[list[str]]:
    """Within this context, the output of each kernel server `agent` starts, in order: its
    stderr as the agent captured it (the first lines, scrubbed). A passed profile does not
    carry it (a kernel gets no channel into later prompts), so tests read it here: the
    agent's own stages, which keep a copy of what the server's end gave the judge."""
    kept: list[str] = []

    class Keeping(CpuStages):
        def finish(self, prof: Profile) -> Profile:
            prof = super().finish(prof)
            end = self.judge.closed if self.judge is not None else None
            if end is not None:
                kept.append(end.log)
            return prof

    setattr(agent, "stages", lambda *args: Keeping(agent, *args))  # noqa: B010 (a method, per instance)
    try:
        yield kept
    finally:
        delattr(agent, "stages")
