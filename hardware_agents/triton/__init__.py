"""The Triton hardware agent (device kinds h100, h200, b200): FlashInfer-Bench solutions,
i.e. a Python module whose entry function (`main.py::run`) launches `@triton.jit` kernels.

    agent = get_agent("h100")                    # TritonAgent for the H100 roofline
    profile = agent.profile(problem, solution)   # accelopt.profile.Profile

On a host with a matching NVIDIA GPU: sandboxed child per profile pinned to one GPU,
correctness on several seeds + adversarial inputs + smaller check workloads, timing with
CUDA events (cold L2, rotated input buffers, median of reps, mean of trials), % of peak.
Without one: correctness through the Triton interpreter (TRITON_INTERPRET=1) at the
problem's small check workloads, status `unmeasured`, so a CPU-only host can search for
correct kernels and leave timing to a GPU worker. `mode="interpreter"|"cuda"` forces one.

Calling convention (FlashInfer-Bench): arguments are positional in the definition's order;
with `destination_passing_style` (the default) `run(*inputs, *outputs)` writes outputs the
harness allocated (poisoned with NaN); otherwise `run(*inputs)` returns them (a tensor or a
tuple in the order of `outputs`). Output dtypes and shapes must match the definition.

Importing this package is cheap (no torch): the agent module loads when an agent is made.
See docs/triton.md.
"""

from __future__ import annotations

import importlib
from typing import Any

from hardware_agents.base import HardwareAgent
from hardware_agents.triton.specs import GPU_KINDS, device_spec, kind_for_gpu_name, spec_for_dtypes

_LAZY = {"TritonAgent", "H100Agent", "H200Agent", "B200Agent", "AGENTS", "plan_triton_cases"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module("hardware_agents.triton.agent"), name)
    if name == "timing":
        return importlib.import_module("hardware_agents.triton.timing")
    raise AttributeError(f"module 'hardware_agents.triton' has no attribute {name!r}")


def get_agent_for_host(*, interpreter: bool = False, **opts: Any) -> tuple[HardwareAgent, bool]:
    """(agent, on_gpu): the agent of this host's first GPU kind we know (an unknown NVIDIA GPU
    is timed under the H100's roofline), or with `interpreter` (or no GPU) an interpreter
    agent with the timed path on the host clock (a dry run: its figures mean nothing)."""
    from hardware_agents.triton import gpu
    from hardware_agents.triton.agent import AGENTS

    found = [] if interpreter else list(gpu.discover())
    if not found:
        opts = {"warmup": 1, "reps": 4, "trials": 2, "flush_bytes": 1 << 16, **opts}
        return AGENTS["h100"](mode="interpreter", interpreter_timing=True, **opts), False
    kind = kind_for_gpu_name(found[0].name)
    agent = AGENTS[kind or "h100"](mode="cuda", any_gpu=kind is None, **opts)
    return agent, True


__all__ = [
    "AGENTS",
    "GPU_KINDS",
    "B200Agent",
    "H100Agent",
    "H200Agent",
    "TritonAgent",
    "device_spec",
    "get_agent_for_host",
    "kind_for_gpu_name",
    "plan_triton_cases",
    "spec_for_dtypes",
]
