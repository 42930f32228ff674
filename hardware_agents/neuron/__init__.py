"""The Neuron hardware agent (device kinds "trn1" and "trn2"): NKI kernels on AWS Trainium.

    agent = get_agent("trn1")                  # or Trn1Agent(mode="auto", core="3", ...)
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

from hardware_agents.base import register_agent
from hardware_agents.neuron.agent import NKIBENCH_SEEDS, NeuronAgent, Trn1Agent, Trn2Agent
from hardware_agents.neuron.convention import CONVENTION, nki_interface_lines
from hardware_agents.neuron.profile_summary import COUNTER_FIELDS, parse_summary
from hardware_agents.neuron.sdk import NeuronSDKMissing, install_hint, sdk_available
from hardware_agents.neuron.specs import SPECS, TRN1, TRN2

# available everywhere: without the SDK the agents emulate (correctness, an estimated latency)
register_agent("trn1", Trn1Agent)
register_agent("trn2", Trn2Agent)

__all__ = [
    "CONVENTION",
    "COUNTER_FIELDS",
    "NKIBENCH_SEEDS",
    "SPECS",
    "TRN1",
    "TRN2",
    "NeuronAgent",
    "NeuronSDKMissing",
    "Trn1Agent",
    "Trn2Agent",
    "install_hint",
    "nki_interface_lines",
    "parse_summary",
    "sdk_available",
]
