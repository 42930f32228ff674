"""The Triton family's descriptor (`hardware_agents/family.py`): the NVIDIA GPU kinds h100,
h200 and b200, the language `triton` (alias `python`), one GPU per profiler; without a GPU
the agent checks correctness in the Triton interpreter (status `unmeasured`)."""

from __future__ import annotations

import importlib.util
from typing import Any, Literal

from accelopt.problem import Problem
from hardware_agents.base import HardwareAgent
from hardware_agents.family import AgentOption, Capabilities, DeviceFamily, DeviceKind, DeviceSlots
from hardware_agents.kernel_language import NAN_FILLED_OUTPUTS, PYTHON_CONSTANTS, KernelLanguage
from hardware_agents.pipeline.clock import ClockBound
from hardware_agents.pipeline.device_spec import DeviceSpec
from hardware_agents.triton.records import NO_TRITON_LAUNCH, TimerName
from hardware_agents.triton.specs import GPU_KINDS, INTERPRETABLE_ELEMENTS, device_spec


def _interface_lines(problem: Problem) -> list[str]:
    from hardware_agents.triton.convention import interface_lines

    return interface_lines(problem)


TRITON = KernelLanguage(
    name="triton",
    fence="python",
    entry="run",
    entry_file="main.py",
    extension=".py",
    interface_lines=_interface_lines,
    output_rule=NAN_FILLED_OUTPUTS,
    tuner=PYTHON_CONSTANTS,
    aliases=("python",),
)


def _make_agent(kind: str, **options: Any) -> HardwareAgent:
    from hardware_agents.triton.agent import AGENTS  # imports torch: only when an agent is made

    return AGENTS[kind](**options)


def _probe() -> bool:
    """Usable wherever Triton and torch are installed: timing on a matching GPU, else the
    interpreter."""
    return all(importlib.util.find_spec(m) is not None for m in ("triton", "torch"))


def _gpu(index: int, count: int) -> list[int]:
    return [index]


def _kind(name: str) -> DeviceKind:
    spec = device_spec(name)
    gpu = spec.extra["match"]  # "H100": what the GPU's name contains
    # Ray labels NVIDIA nodes `accelerator_type:<GPU>` itself
    return DeviceKind(
        name=name, hardware=f"an NVIDIA {gpu} GPU", spec=spec, node_label=f"accelerator_type:{gpu}"
    )


OPTIONS = (
    AgentOption(
        "mode", Literal["auto", "cuda", "interpreter"], "auto: CUDA on a matching GPU, else the interpreter"
    ),
    AgentOption("cache_dir", str | None),
    AgentOption("sandbox_dir", str | None),
    AgentOption("timeout_s", float),
    AgentOption("max_pct_peak", float, "a measurement faster than this fraction of the roofline fails"),
    AgentOption("timer", TimerName),
    AgentOption("warmup", int),
    AgentOption("reps", int),
    AgentOption("trials", int),
    AgentOption("flush_bytes", int | None),
    AgentOption("gpus_to_use", list[int] | None, "the GPUs (indices) this agent may time on"),
    AgentOption("any_gpu", bool, "time on a GPU of another kind, under this kind's roofline"),
    AgentOption("data_roots", list[str], "folders relative safetensors paths resolve against"),
    AgentOption("data_cache_problems", int | None),
    AgentOption("interpreter_timing", bool),
    AgentOption("spec", DeviceSpec | None),
    AgentOption("sandbox_options", dict[str, Any] | None),
    AgentOption("calibration_rounds", int),
    AgentOption("clock_bound", ClockBound | None),
    AgentOption("simulated_flush_s", float),
    AgentOption("sample_positions", int),
    AgentOption("full_checks_per_round", int),
    AgentOption("keep_outputs_bytes", int | None),
    AgentOption("timing_sets_bytes", int | None),
    AgentOption("spare_children", bool | None),
    AgentOption("confirm_mismatch", bool),
    AgentOption("extra_rounds", int),
    AgentOption(
        "device_judge",
        bool | None,
        "the judge reads outputs in place from a region it owns (default: in the interpreter; refused on a GPU)",
    ),
    AgentOption(
        "graphs", bool | None, "replay each timed call as a graph: the device figure (default: on a GPU)"
    ),
    AgentOption("reference_budget_s", float),
)

FAMILY = DeviceFamily(
    name="triton",
    kinds=tuple(_kind(k) for k in GPU_KINDS),
    languages=(TRITON,),
    make_agent=_make_agent,
    options=OPTIONS,
    capabilities=Capabilities(timed=True, interpreted=True, interpretable_elements=INTERPRETABLE_ELEMENTS),
    profile_timeout_s=300.0,  # Triton autotuning and JIT take minutes
    runtime_reasons={NO_TRITON_LAUNCH: "launched no Triton kernel"},
    probe=_probe,
    # a GPU kind on a Ray cluster without GPUs takes a CPU slot: its agent checks
    # correctness in the interpreter and leaves timing to a GPU worker
    slots=DeviceSlots(ray_resource="GPU", agent_option="gpus_to_use", pick=_gpu, cpus_without=1.0),
)
