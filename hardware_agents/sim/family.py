"""The simulated device's descriptor (`hardware_agents/family.py`): the kind `sim`, hidden
unless opted in (`gate.py`: its probe, and its run refusal), no device to hold."""

from __future__ import annotations

from typing import Any

from hardware_agents.base import HardwareAgent
from hardware_agents.family import AgentOption, Capabilities, DeviceFamily, DeviceKind
from hardware_agents.sim.gate import KIND, refusal, sim_allowed


def _make_agent(kind: str, **options: Any) -> HardwareAgent:
    from hardware_agents.sim.agent import SimAgent

    return SimAgent(**options)


OPTIONS = (
    AgentOption("latency_ms", float, "median kernel latency"),
    AgentOption("spread", float, "sigma of the latency's log"),
    AgentOption("pass_rate", float, "share of kernels that pass"),
    AgentOption("profile_s", float, "how long a profile occupies the device"),
    AgentOption("profile_jitter", float),
    AgentOption("seed", int),
    AgentOption("baseline_passes", bool),
    AgentOption("allow", bool, "the opt-in: the simulated device on purpose"),
    AgentOption("timeout_s", float),
    AgentOption("cache_dir", Any),
)

FAMILY = DeviceFamily(
    name="sim",
    kinds=(DeviceKind(name=KIND, hardware="nothing (latencies are drawn)"),),
    any_language=True,  # it never compiles a kernel: nothing is refused up front
    make_agent=_make_agent,
    options=OPTIONS,
    capabilities=Capabilities(simulated=True),
    probe=sim_allowed,
    refuse_run=refusal,
)
