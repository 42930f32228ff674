"""A device plugin as another package would ship it: the kind `acmecpu`, a CPU agent
variant (here the stock CPU agent under a new kind name), registered as a device family of
its own (`hardware_agents/family.py`) that runs the built-in language `c`."""

from typing import Any

from hardware_agents.base import HardwareAgent
from hardware_agents.cpu.agent import CpuAgent
from hardware_agents.cpu.family import OPTIONS as CPU_OPTIONS
from hardware_agents.families import register_family
from hardware_agents.family import Capabilities, DeviceFamily, DeviceKind


def _make_agent(kind: str, **options: Any) -> HardwareAgent:
    return CpuAgent(**options)


def register() -> None:
    register_family(
        DeviceFamily(
            name="acme",
            kinds=(DeviceKind(name="acmecpu", hardware="this host's CPU cores"),),
            runs=("c",),
            make_agent=_make_agent,
            options=CPU_OPTIONS,
            capabilities=Capabilities(timed=True),
        )
    )
