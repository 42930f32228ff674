"""A kernel-language plugin as another package would ship it: the language `toylang`, made
known to AccelOpt by the one `register_family` call below (found through the
`accelopt.devices` entry point in `toylang_plugin-0.1.dist-info`): a device family whose
descriptor brings the language and a device kind, `toysim`, the simulated device (nothing
compiles or runs; latencies are drawn, see `hardware_agents/sim`) taking `toylang`, so a
whole run can use the language here. Its prompt templates are in `toylang_prompts/`. Toy
source looks like:

    param TILE := 64;
    proc main(x, y, out) { ... }
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from accelopt.problem import Problem
from hardware_agents.base import HardwareAgent
from hardware_agents.families import register_family
from hardware_agents.family import Capabilities, DeviceFamily, DeviceKind
from hardware_agents.languages import KernelLanguage, TunerSyntax
from hardware_agents.sim.agent import SimAgent
from hardware_agents.sim.family import OPTIONS as SIM_OPTIONS

PARAMS = TunerSyntax(
    name="toy-param",
    constant=re.compile(
        r"^(?P<pre>param[ \t]+(?P<name>[A-Z_][A-Z0-9_]*)[ \t]*:=[ \t]*)(?P<value>\d+)"
        r"(?P<post>;[ \t]*(?:--[^\n]*)?)$",
        re.MULTILINE,
    ),
    diff=re.compile(
        r"^(?P<sign>[-+])param[ \t]+(?P<name>[A-Z_][A-Z0-9_]*)[ \t]*:=[ \t]*(?P<value>\d+)", re.MULTILINE
    ),
    detect=re.compile(r"^param\b", re.MULTILINE),
)


def interface_lines(problem: Problem) -> list[str]:
    d = problem.definition
    args = ", ".join([*d.inputs, *d.outputs])
    return [
        f"- One toy module defining `proc {problem.baseline.entry_symbol}({args})`; it writes the outputs."
    ]


def complete_module(code: str, entry: str) -> str:
    """A toy module ends with `end {entry}.`; a reply that left it out gets it."""
    return (
        code
        if re.search(rf"^end {re.escape(entry)}\.$", code, re.MULTILINE)
        else code.rstrip() + f"\nend {entry}.\n"
    )


class ToySimAgent(SimAgent):
    kind = "toysim"
    languages = ("toylang",)


TOYLANG = KernelLanguage(
    name="toylang",
    fence="toy",
    entry="main",
    entry_file="kernel.toy",
    extension=".toy",
    interface_lines=interface_lines,
    output_rule="Toy outputs start as zeros; write every element. ",
    numpy_reference=True,
    tuner=PARAMS,
    complete_source=complete_module,
    prompt_dir=Path(__file__).parent / "toylang_prompts",
    aliases=("toy",),
)


def _make_agent(kind: str, **options: Any) -> HardwareAgent:
    return ToySimAgent(**options)


def register() -> None:
    register_family(
        DeviceFamily(
            name="toylang",
            kinds=(DeviceKind(name="toysim", hardware="nothing (latencies are drawn)"),),
            languages=(TOYLANG,),
            make_agent=_make_agent,
            options=SIM_OPTIONS,
            capabilities=Capabilities(simulated=True),
        )
    )
