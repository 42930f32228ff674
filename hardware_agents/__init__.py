"""Hardware agents: one profiler per device family, behind one interface (see hardware_agents/README.md).

    from hardware_agents import get_agent, available_devices
    agent = get_agent("cpu")                       # HardwareAgent
    profile = agent.profile(problem, solution)      # accelopt.profile.Profile

Shared parts every agent uses: `base` (DeviceSpec, HardwareAgent, registry, roofline),
`sandbox` (run a trusted harness with untrusted code in a locked-down child), `validity`
(inputs, adversarial cases, poisoning, comparison), `pipeline` (the judging steps every
agent runs: cases, verdict, driven rounds, the clock bound, the roofline gate, statistics).
Agents live in subpackages (`cpu/`, ...) that register their device kinds on import.
See README.md in this folder.
"""

from hardware_agents.base import (
    DEFAULT_SEEDS,
    BandwidthPoint,
    DeviceSpec,
    HardwareAgent,
    available_devices,
    get_agent,
    register_agent,
    registered_kinds,
    roofline_terms,
    t_peak,
)

__all__ = [
    "DEFAULT_SEEDS",
    "BandwidthPoint",
    "DeviceSpec",
    "HardwareAgent",
    "available_devices",
    "get_agent",
    "register_agent",
    "registered_kinds",
    "roofline_terms",
    "t_peak",
]
