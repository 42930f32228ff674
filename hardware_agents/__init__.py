"""Hardware agents: one profiler per device family, behind one interface (see hardware_agents/README.md).

    from hardware_agents.families import get_agent, available_devices
    agent = get_agent("cpu")                       # HardwareAgent
    profile = agent.profile(problem, solution)      # accelopt.profile.Profile

Shared parts every agent uses: `base` (DeviceSpec, HardwareAgent, roofline), `sandbox` (run a
trusted harness with untrusted code in a locked-down child), `validity` (inputs, adversarial
cases, poisoning, comparison), `pipeline` (the judging steps every agent runs: cases,
verdict, driven rounds, the clock bound, the roofline gate, statistics). Each device family
lives in a subpackage (`cpu/`, `triton/`, `neuron/`, `sim/`) whose `family.py` is its
descriptor (`family.py` here); `families.py` lists them and answers every lookup the layers
above make. This file imports only `base`: a sandboxed child importing `hardware_agents.x`
loads no family.
"""

from hardware_agents.base import (
    DEFAULT_SEEDS,
    BandwidthPoint,
    DeviceSpec,
    HardwareAgent,
    roofline_terms,
    t_peak,
)

__all__ = [
    "DEFAULT_SEEDS",
    "BandwidthPoint",
    "DeviceSpec",
    "HardwareAgent",
    "roofline_terms",
    "t_peak",
]
