"""The CPU family's descriptor (`hardware_agents/family.py`): the kind `cpu`, the language `c`,
peaks measured on the host (`accelopt calibrate`), one CPU per profiler."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from accelopt.problem import Problem
from hardware_agents.base import HardwareAgent
from hardware_agents.family import (
    AgentOption,
    Calibration,
    CalibrationError,
    Capabilities,
    DeviceFamily,
    DeviceKind,
)
from hardware_agents.kernel_language import NAN_FILLED_OUTPUTS, KernelLanguage, TunerSyntax
from hardware_agents.pipeline.device_spec import DeviceSpec

# C: `#define NAME <int>` (or an identifier), the value optionally in parentheses, with a
# suffix and a trailing comment allowed; chosen for any source with a `#define` line.
C_DEFINES = TunerSyntax(
    name="c-define",
    constant=re.compile(
        r"^(?P<pre>[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)[ \t]+\(?)(?P<value>\d+|[A-Za-z_]\w*)"
        r"(?P<post>\)?[uUlL]*[ \t]*(?://[^\n]*|/\*[^\n]*)?)$",
        re.MULTILINE,
    ),
    diff=re.compile(
        r"^(?P<sign>[-+])[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)[ \t]+\(?(?P<value>"
        r"[A-Za-z_]\w*|\d+)",
        re.MULTILINE,
    ),
    detect=re.compile(r"^[ \t]*#[ \t]*define\b", re.MULTILINE),
)


def _interface_lines(problem: Problem) -> list[str]:
    from hardware_agents.cpu.convention import interface_lines

    return interface_lines(problem)


C = KernelLanguage(
    name="c",
    fence="c",
    entry="kernel",
    entry_file="kernel.c",
    extension=".c",
    interface_lines=_interface_lines,
    output_rule=NAN_FILLED_OUTPUTS,
    numpy_reference=True,
    tuner=C_DEFINES,
)


def _make_agent(kind: str, **options: Any) -> HardwareAgent:
    from hardware_agents.cpu.agent import CpuAgent

    return CpuAgent(**options)


def _calibrate(cache_dir: Path | None, force: bool, quick: bool) -> Calibration:
    import msgspec

    from hardware_agents.cpu import calibrate as cpu

    try:
        rec = cpu.calibrate(cache_dir, force=force, quick=quick)
    except cpu.CalibrationError as e:
        raise CalibrationError(str(e)) from e
    busy = (
        f"the machine was busy (load {rec.loadavg:.1f} on {rec.machine.cores} cores): peaks are "
        "probably under-measured; run `accelopt calibrate --force` on an idle machine"
    )
    return Calibration(
        spec=rec.spec,
        quick=rec.quick,
        created=rec.created,
        seconds=rec.seconds,
        cached_at=str(cpu.calibration_path(cache_dir, quick=rec.quick, machine=rec.machine)),
        warnings=(busy,) if rec.busy() else (),
        record=msgspec.to_builtins(rec),
    )


OPTIONS = (
    AgentOption("cache_dir", str | None, "calibrations, compiled baselines and cached data"),
    AgentOption("spec", DeviceSpec | None, "peaks to use instead of the calibration"),
    AgentOption("calibrate_if_missing", bool),
    AgentOption("quick_calibration", bool),
    AgentOption("timeout_s", float),
    AgentOption("timing_budget_s", float),
    AgentOption("max_reruns", int),
    AgentOption("spread_threshold", float),
    AgentOption("max_pct_peak", float, "a measurement faster than this fraction of the roofline fails"),
    AgentOption("threads", int | None),
    AgentOption("exclusive_timing", bool),
    AgentOption("sandbox_dir", str | None),
    AgentOption("cc", str, "the C compiler"),
    AgentOption("data_cache_problems", int),
    AgentOption("sandbox_options", dict[str, Any] | None),
)

FAMILY = DeviceFamily(
    name="cpu",
    kinds=(DeviceKind(name="cpu", hardware="this host's CPU cores"),),
    languages=(C,),
    make_agent=_make_agent,
    options=OPTIONS,
    capabilities=Capabilities(timed=True),
    profile_timeout_s=60.0,  # a C kernel compiles in seconds
    calibrate=_calibrate,
)
