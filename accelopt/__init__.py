"""AccelOpt: a self-improving, LLM-driven kernel optimizer as an event-sourced actor system."""

from accelopt._env import apply_offline_defaults

apply_offline_defaults()

__version__ = "0.1.0"
