"""Profile an NKI kernel without a Trainium: correctness in the emulator, latency ESTIMATED.

Shows the same profiler API as `profile_cpu_kernel.py` on the `trn1` device kind. On a machine
without the Neuron SDK the Neuron agent emulates: the kernel runs in AccelOpt's NKI emulator
inside the sandbox and is checked against the reference; the status is `unmeasured` (correct,
not timed) and its latency is a cost model's estimate, kept apart from measured latencies
(`Profile.estimate`). On a Trainium host the same call compiles and times it for real.

    python examples/profile_nki_kernel.py [SUITE/PROBLEM]
"""

from __future__ import annotations

import sys

import suites
from hardware_agents import get_agent


def main(ref: str = "nki_tune/silu") -> int:
    problem = suites.get_problem(ref)
    device = suites.suite_info(ref.rpartition("/")[0]).device
    agent = get_agent(device)
    try:
        prof = agent.profile(problem, problem.baseline)
    finally:
        agent.close()
    checked = ", ".join(f"{c.case} {'ok' if c.passed else 'WRONG'}" for c in prof.correctness)
    print(f"{ref} baseline on {device}: {prof.status}; correctness: {checked}")
    if prof.estimate is not None:  # a cost model's figure, never a measurement
        e = prof.estimate
        pct = f", {e.peak_fraction:.1%} of peak" if e.peak_fraction is not None else ""
        print(f"ESTIMATED latency {e.latency_ms:.4f} ms by {e.model} ({e.bound}-bound{pct})")
    elif prof.latency is not None:
        print(f"measured latency: median {prof.latency.median_ms:.4f} ms")
    else:
        print(prof.log)
    return 0 if prof.status in ("passed", "unmeasured") else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
