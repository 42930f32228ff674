"""The Neuron hardware agent (device kinds "trn1" and "trn2"): NKI kernels on AWS Trainium.

    agent = get_agent("trn1")                  # hardware_agents.families; or Trn1Agent(core="3", ...)
    profile = agent.profile(problem, solution)  # seeds 0, 21, 42, 63, 84 + adversarial cases

Modes (chosen from what the host has):
- device (a /dev/neuron* node): compile and run with `nki.baremetal` (neuronx-cc,
  NEURON_CC_FLAGS=--auto-cast=none) on one NeuronCore (`core`, else the
  NEURON_RT_VISIBLE_CORES that Ray sets for an actor holding a `neuron_cores` resource);
  timed in rounds the agent drives, each on inputs drawn on a fresh seed, with every
  profiled run's output checked; latency from `neuron-profile` summaries read in a child of
  their own and bounded by the agent's clock; the profiler counters go into `Profile.counters`;
- simulate (neuronx-cc but no device): correctness with `nki.simulate_kernel`, status
  `unmeasured`;
- emulate (no Neuron SDK): correctness in AccelOpt's NKI emulator (`emulator/`), status
  `unmeasured` with an ESTIMATED latency from the trn1 cost model (`Profile.estimate`);
  asking for `device`/`simulate` without the SDK raises `NeuronSDKMissing`, naming the AWS
  Neuron SDK and how to install it.

Device specs (`SPECS`): cited per-NeuronCore peaks for trn1 and trn2 (see `specs.py`).
Prompt helpers: `nki_interface_lines(problem)`, `CONVENTION`. See docs/neuron.md.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the module of this package that defines it, imported on first use: the family's
# descriptor (`family.py`) is imported by every lookup and stays light
_LAZY = {
    "NKIBENCH_SEEDS": "agent",
    "NeuronAgent": "agent",
    "Trn1Agent": "agent",
    "Trn2Agent": "agent",
    "CONVENTION": "convention",
    "nki_interface_lines": "convention",
    "NeuronSDKMissing": "sdk",
    "install_hint": "sdk",
    "sdk_available": "sdk",
    "SPECS": "specs",
    "TRN1": "specs",
    "TRN2": "specs",
    "COUNTER_FIELDS": "profile_summary",
    "parse_summary": "profile_summary",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'hardware_agents.neuron' has no attribute {name!r}")


__all__ = sorted(_LAZY)
