"""The CPU hardware agent (device kind "cpu"): C11 + OpenMP kernels profiled in a sandbox.

Calling convention (also in `CONVENTION`, rendered per problem by `c_signature`):

    void kernel(const float* in0, const float* in1, ..., float* out0, ...);

- inputs in the definition's order as `const float*` (scalar inputs by value), then the
  outputs as `float*`, destination-passing; nothing is returned;
- no size arguments: every axis is a compile-time macro passed as `-D<AXIS>=<value>`;
- tensors are dense row-major fp32, 64-byte aligned; outputs hold NaN on entry; inputs
  must not be modified; no state may carry over between calls;
- compiled with `gcc -std=gnu11 -O3 -march=native -fopenmp -shared -fPIC ... -lm`;
  OMP_NUM_THREADS = the usable cores.

    agent = get_agent("cpu")            # hardware_agents.families; or CpuAgent(cache_dir=..., ...)
    profile = agent.profile(problem, solution, seeds=(0, 21, 42))

Statuses: passed, compile_error (also: missing entry symbol, non-C language), runtime_error
(crash, leftover processes), incorrect (wrong values on any seed or adversarial case,
NaN, input mutation, out-of-bounds writes, wrong timed results, lower precision, faster than
the roofline allows), timeout (wall clock or CPU limit), unmeasured (correct, not timed).
"""

from __future__ import annotations

from typing import Any

__all__ = ["CONVENTION", "CpuAgent", "c_signature"]


def __getattr__(name: str) -> Any:
    """The agent and its convention, imported on first use: the family's descriptor
    (`family.py`) is imported by every lookup and stays light."""
    if name == "CpuAgent":
        from hardware_agents.cpu.agent import CpuAgent

        return CpuAgent
    if name in ("CONVENTION", "c_signature"):
        from hardware_agents.cpu import convention

        return getattr(convention, name)
    raise AttributeError(f"module 'hardware_agents.cpu' has no attribute {name!r}")
