"""The built-in kernel languages: `c` (the CPU agent), `triton` (alias `python`: the Triton
agent) and `nki` (the Neuron agents). Their calling conventions live next to each agent's
harness (`hardware_agents/<agent>/convention.py`) and are imported only when a prompt needs
them, so importing the registry stays cheap."""

from __future__ import annotations

import re

from accelopt.problem import Problem
from hardware_agents.languages.nki_source import complete_nki_module
from hardware_agents.languages.registry import KernelLanguage, TunerSyntax, register_language

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

# Python (Triton, NKI): a module-level `UPPER_CASE = <int>` (optionally annotated, or a quoted
# identifier); the fallback for sources no other syntax claims.
PYTHON_CONSTANTS = TunerSyntax(
    name="python-constant",
    constant=re.compile(
        r"^(?P<pre>(?P<name>[A-Z_][A-Z0-9_]*)[ \t]*(?::[ \t]*[\w.\[\]]+[ \t]*)?=[ \t]*)"
        r"(?P<value>\d+|[\"']?[A-Za-z_]\w*[\"']?)(?P<post>[ \t]*(?:#[^\n]*)?)$",
        re.MULTILINE,
    ),
    diff=re.compile(
        r"^(?P<sign>[-+])(?P<name>[A-Z_][A-Z0-9_]*)[ \t]*(?::[^=\n]*)?=[ \t]*(?P<value>\d+)", re.MULTILINE
    ),
)

NAN_FILLED_OUTPUTS = (
    "Output buffers are filled with NaN before each call, so every output element must be written. "
)
# The NKI kernel allocates its outputs: the harness cannot pre-fill them (docs/neuron.md).
KERNEL_ALLOCATED_OUTPUTS = (
    "The kernel allocates its own outputs, so every output element must be written: an unwritten element holds "
    "whatever the device memory held and fails the checks, which draw fresh inputs for every case. "
)


def c_interface_lines(problem: Problem) -> list[str]:
    from hardware_agents.cpu.convention import interface_lines

    return interface_lines(problem)


def triton_interface_lines(problem: Problem) -> list[str]:
    from hardware_agents.triton.convention import interface_lines

    return interface_lines(problem)


def nki_interface_lines(problem: Problem) -> list[str]:
    from hardware_agents.neuron.convention import nki_interface_lines

    return nki_interface_lines(problem)


C = register_language(
    KernelLanguage(
        name="c",
        fence="c",
        entry="kernel",
        entry_file="kernel.c",
        extension=".c",
        interface_lines=c_interface_lines,
        output_rule=NAN_FILLED_OUTPUTS,
        numpy_reference=True,
        tuner=C_DEFINES,
    )
)
TRITON = register_language(
    KernelLanguage(
        name="triton",
        fence="python",
        entry="run",
        entry_file="main.py",
        extension=".py",
        interface_lines=triton_interface_lines,
        output_rule=NAN_FILLED_OUTPUTS,
        tuner=PYTHON_CONSTANTS,
        aliases=("python",),
    )
)
NKI = register_language(
    KernelLanguage(
        name="nki",
        fence="python",
        entry="kernel",
        entry_file="kernel.py",
        extension=".py",
        interface_lines=nki_interface_lines,
        output_rule=KERNEL_ALLOCATED_OUTPUTS,
        numpy_reference=True,
        tuner=PYTHON_CONSTANTS,
        complete_source=complete_nki_module,
    )
)
