"""Profile a C kernel on the CPU: the suite's baseline, then a kernel of your own.

Shows the profiler's Python API (what `accelopt profile cpu/silu` runs): load a problem of a
suite, get the hardware agent of its device, and profile a solution. The kernel is compiled,
run in a sandboxed child on fresh inputs (three seeds and adversarial cases), checked against
the problem's reference, timed by the trusted side's clock and placed on the roofline. A bad
kernel is a status, never an exception: here one that forgets the sigmoid is `incorrect`.

    python examples/profile_cpu_kernel.py [SUITE/PROBLEM]
"""

from __future__ import annotations

import sys

import msgspec

import suites
from accelopt.problem import SourceFile
from accelopt.profile import Profile
from hardware_agents import get_agent

# the baseline's loop with the sigmoid left out: compiles and runs, but computes the wrong thing
WRONG_SILU = """
#include <stddef.h>
void kernel(const float* x, float* out) {
    for (long i = 0; i < (long)M * N; i++) out[i] = x[i];
}
"""


def describe(prof: Profile) -> str:
    if prof.status != "passed":
        return f"{prof.status} ({prof.log.strip().splitlines()[0] if prof.log.strip() else 'no log'})"
    pct = f"{prof.peak_fraction:.1%} of peak" if prof.peak_fraction is not None else "no roofline"
    return f"passed, median {prof.latency_ms:.3f} ms, {pct} ({prof.bound} bound)"


def main(ref: str = "cpu/silu") -> int:
    problem = suites.get_problem(ref)
    device = suites.suite_info(ref.rpartition("/")[0]).device
    agent = get_agent(device)
    try:
        baseline = agent.profile(problem, problem.baseline)
        print(f"{ref} baseline on {device}: {describe(baseline)}")
        for check in baseline.correctness:  # the inputs it was checked on
            print(f"  {check.case}: {'ok' if check.passed else 'WRONG'}")
        if ref == "cpu/silu":  # a kernel of your own: the baseline with its source replaced
            entry_file = problem.baseline.spec.entry_point.split("::")[0]
            mine = msgspec.structs.replace(
                problem.baseline, name="wrong_silu", sources=[SourceFile(path=entry_file, content=WRONG_SILU)]
            )
            print(f"{ref} wrong_silu on {device}: {describe(agent.profile(problem, mine))}")
    finally:
        agent.close()
    return 0 if baseline.passed else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
