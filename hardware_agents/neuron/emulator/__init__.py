"""An NKI emulator: `@nki.jit` kernels written against `neuronxcc.nki` run on the CPU with
NKI's semantics (see docs/neuron.md, "The emulator").

    from hardware_agents.neuron.emulator import install, compile_kernel, execute, estimate
    install()                      # `import neuronxcc.nki` now finds the emulator (this process only)
    prog = compile_kernel(kernel, [ArgSpec.of(a) for a in args])   # trace: the compile step
    outs = execute(prog, args)     # run the program with numpy, tile by tile
    est = estimate(prog, "trn1")   # the trn1 cost model's estimated latency, per engine

The Neuron agent runs the compile step in the kernel's sandboxed process and the execution in
another sandboxed process that runs no kernel code; the estimate is computed by the agent
itself from the program it validated.
"""

from __future__ import annotations

import sys
import types

from hardware_agents.neuron.emulator.errors import NKICompileError, NKIError, NKIRuntimeError, NotEmulated
from hardware_agents.neuron.emulator.kernel import ArgSpec, compile_kernel, simulate_kernel

MODULES = (
    "neuronxcc",
    "neuronxcc.nki",
    "neuronxcc.nki.language",
    "neuronxcc.nki.isa",
    "neuronxcc.nki.typing",
)
EMULATOR_VERSION = "accelopt-nki-emulator 1"


def modules() -> dict[str, types.ModuleType]:
    """The stand-in modules for `neuronxcc`, `neuronxcc.nki` and its submodules."""
    from hardware_agents.neuron.emulator import isa, kernel, language, nt

    root = types.ModuleType("neuronxcc", "AccelOpt's NKI emulator standing in for the Neuron compiler")
    root.__version__ = EMULATOR_VERSION  # type: ignore[attr-defined]
    root.__path__ = []
    nki = types.ModuleType("neuronxcc.nki", "neuronxcc.nki (AccelOpt's NKI emulator)")
    nki.__path__ = []
    for name in kernel.__all__:
        setattr(nki, name, getattr(kernel, name))
    nki.language, nki.isa, nki.typing = language, isa, nt  # type: ignore[attr-defined]
    nki.emulated = True  # type: ignore[attr-defined]
    root.nki = nki  # type: ignore[attr-defined]
    return {
        "neuronxcc": root,
        "neuronxcc.nki": nki,
        "neuronxcc.nki.language": language,
        "neuronxcc.nki.isa": isa,
        "neuronxcc.nki.typing": nt,
    }


def install() -> None:
    """Make `import neuronxcc.nki[.language|.isa|.typing]` find the emulator in this process."""
    sys.modules.update(modules())


__all__ = [
    "EMULATOR_VERSION",
    "MODULES",
    "ArgSpec",
    "NKICompileError",
    "NKIError",
    "NKIRuntimeError",
    "NotEmulated",
    "compile_kernel",
    "install",
    "modules",
    "simulate_kernel",
]
