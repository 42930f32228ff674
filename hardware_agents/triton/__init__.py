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
"""

from hardware_agents.base import register_agent
from hardware_agents.triton.agent import TritonAgent, plan_cases
from hardware_agents.triton.specs import GPU_KINDS, device_spec, kind_for_gpu_name, spec_for_dtypes


class H100Agent(TritonAgent):
    kind = "h100"


class H200Agent(TritonAgent):
    kind = "h200"


class B200Agent(TritonAgent):
    kind = "b200"


AGENTS: dict[str, type[TritonAgent]] = {"h100": H100Agent, "h200": H200Agent, "b200": B200Agent}


def _probe() -> bool:
    """Usable wherever Triton imports: timing on a matching GPU, else the interpreter."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


for _kind, _cls in AGENTS.items():
    register_agent(_kind, _cls, probe=_probe)

__all__ = ["AGENTS", "GPU_KINDS", "B200Agent", "H100Agent", "H200Agent", "TritonAgent", "device_spec",
           "kind_for_gpu_name", "plan_cases", "spec_for_dtypes"]
