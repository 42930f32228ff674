"""Hardware agents: one profiler per device family, behind one interface (see hardware_agents/README.md).

    from hardware_agents import get_agent, available_devices
    agent = get_agent("cpu")                       # HardwareAgent
    profile = agent.profile(problem, solution)      # accelopt.profile.Profile

Shared parts every agent uses: `base` (HardwareAgent), `sandbox` (run a trusted harness
with untrusted code in a locked-down child), `pipeline` (the judging steps every agent
runs: inputs and adversarial cases, references, poisoned output buffers, comparison and its
float32 floor, cases, verdict, driven rounds, the clock bound, the device's roofline
(`DeviceSpec`) and its gate, statistics). Each device family lives in a subpackage (`cpu/`, `triton/`, `neuron/`,
`sim/`) whose `family.py` is its descriptor (`family.py` here); `families.py` lists them and
answers every lookup the layers above make. This file imports only `base` and the pipeline's
`device_spec` when it loads (the registry's lookups come from `families` on first use): a
sandboxed child importing `hardware_agents.x` loads no family.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hardware_agents.base import DEFAULT_SEEDS, HardwareAgent
from hardware_agents.pipeline.device_spec import BandwidthPoint, DeviceSpec, roofline_terms, t_peak

if TYPE_CHECKING:
    from hardware_agents.families import available_devices, get_agent, register_family, registered_kinds

__all__ = [
    "DEFAULT_SEEDS",
    "BandwidthPoint",
    "DeviceSpec",
    "HardwareAgent",
    "available_devices",
    "get_agent",
    "register_family",
    "registered_kinds",
    "roofline_terms",
    "t_peak",
]

_REGISTRY_LOOKUPS = ("available_devices", "get_agent", "register_family", "registered_kinds")


def __getattr__(name: str) -> Any:
    """The registry's lookups (`families.py`), imported on first use."""
    if name in _REGISTRY_LOOKUPS:
        from hardware_agents import families

        return getattr(families, name)
    raise AttributeError(f"module 'hardware_agents' has no attribute {name!r}")
