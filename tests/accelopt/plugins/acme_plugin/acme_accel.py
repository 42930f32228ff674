"""A device plugin as another package would ship it: the kind `acmecpu`, a CPU agent
variant (here the stock CPU agent under a new kind name)."""

from hardware_agents.base import register_agent
from hardware_agents.cpu.agent import CpuAgent


def register() -> None:
    register_agent("acmecpu", CpuAgent)
