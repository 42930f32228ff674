"""The Neuron family's descriptor (`hardware_agents/family.py`): the Trainium kinds trn1 and
trn2, the language `nki`, one NeuronCore per profiler; without the Neuron SDK the agent checks
correctness in AccelOpt's NKI emulator and estimates the latency (status `unmeasured`)."""

from __future__ import annotations

import os
from typing import Any, Literal

from accelopt.problem import Problem
from hardware_agents.base import HardwareAgent
from hardware_agents.family import AgentOption, Capabilities, DeviceFamily, DeviceKind, DeviceSlots, SlotError
from hardware_agents.kernel_language import PYTHON_CONSTANTS, KernelLanguage
from hardware_agents.neuron.nki_source import complete_nki_module
from hardware_agents.neuron.specs import SPECS
from hardware_agents.pipeline.device_spec import DeviceSpec

# The NKI kernel allocates its outputs: the harness cannot pre-fill them (docs/neuron.md).
KERNEL_ALLOCATED_OUTPUTS = (
    "The kernel allocates its own outputs, so every output element must be written: an unwritten element holds "
    "whatever the device memory held and fails the checks, which draw fresh inputs for every case. "
)


def _interface_lines(problem: Problem) -> list[str]:
    from hardware_agents.neuron.convention import nki_interface_lines

    return nki_interface_lines(problem)


NKI = KernelLanguage(
    name="nki",
    fence="python",
    entry="kernel",
    entry_file="kernel.py",
    extension=".py",
    interface_lines=_interface_lines,
    output_rule=KERNEL_ALLOCATED_OUTPUTS,
    numpy_reference=True,
    tuner=PYTHON_CONSTANTS,
    complete_source=complete_nki_module,
)


def _make_agent(kind: str, **options: Any) -> HardwareAgent:
    from hardware_agents.neuron.agent import Trn1Agent, Trn2Agent

    return {"trn1": Trn1Agent, "trn2": Trn2Agent}[kind](**options)


def _core(index: int, count: int) -> str:
    """NeuronCore `index` of NEURON_RT_VISIBLE_CORES when it is set (Ray sets it for an actor
    holding `neuron_cores`), else core `index`."""
    visible = [c.strip() for c in os.environ.get("NEURON_RT_VISIBLE_CORES", "").split(",") if c.strip()]
    if visible and len(visible) < count:
        raise SlotError(f"NEURON_RT_VISIBLE_CORES lists {len(visible)} core(s) for {count} profilers")
    return visible[index] if visible else str(index)


def _kind(name: str, chip: str) -> DeviceKind:
    # deploy/ray-cluster-aws.yaml labels Trainium nodes `accelerator_type:trn1` / `trn2` (Ray's
    # own label does not tell them apart)
    return DeviceKind(
        name=name,
        hardware=f"an AWS {chip} NeuronCore",
        spec=SPECS[name],
        node_label=f"accelerator_type:{name}",
    )


OPTIONS = (
    AgentOption("mode", Literal["auto", "device", "simulate", "emulate"], "auto: what the host has"),
    AgentOption("sdk_path", str | list[str] | None),
    AgentOption("neuron_profile", str | None),
    AgentOption("core", str | int | None, "the NeuronCore to run on"),
    AgentOption("timeout_s", float),
    AgentOption("timing_timeout_s", float),
    AgentOption("warmup", int),
    AgentOption("runs", int),
    AgentOption("max_rounds", int),
    AgentOption("spread_threshold", float),
    AgentOption("round_pause_s", float),
    AgentOption("min_seeds", int),
    AgentOption(
        "emulate_seeds", int, "correctness seeds in the emulate mode (the caller's first N; default 2)"
    ),
    AgentOption("max_pct_peak", float, "a measurement faster than this fraction of the roofline fails"),
    AgentOption("cc_flags", str),
    AgentOption("compile_options", str),
    AgentOption("device_glob", str),
    AgentOption("verify_summaries", bool),
    AgentOption("check_instance", bool),
    AgentOption("sandbox_dir", str | None),
    AgentOption("sandbox_options", dict[str, Any] | None),
    AgentOption("cache_dir", str | None),
    AgentOption("spec", DeviceSpec | None),
    AgentOption("extra_env", dict[str, str] | None),
    AgentOption("data_cache_problems", int),
)

FAMILY = DeviceFamily(
    name="neuron",
    kinds=(_kind("trn1", "Trainium1"), _kind("trn2", "Trainium2")),
    languages=(NKI,),
    make_agent=_make_agent,
    options=OPTIONS,
    capabilities=Capabilities(timed=True, interpreted=True, estimated=True),
    profile_timeout_s=900.0,  # neuronx-cc compiles each seed's kernel for minutes (docs/neuron.md)
    # a Trainium kind on a cluster without NeuronCores holds nothing: its agent emulates in
    # sandboxed processes of its own, and a CPU slot would keep it from starting beside the
    # cpu and GPU-less profilers on a small machine
    slots=DeviceSlots(ray_resource="neuron_cores", agent_option="core", pick=_core, cpus_without=0.0),
)
