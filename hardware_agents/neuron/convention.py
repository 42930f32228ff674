"""How the Neuron harness calls an NKI kernel, stated for prompts (kept here, next to the
harness, so the prompt says exactly what the agent does)."""

from __future__ import annotations

from accelopt.problem import Problem
from hardware_agents.neuron.reference import FROM_NKI, TO_NKI, ReferenceModule, kernel_arg_shapes

CONVENTION = """\
- The module is imported as it is (nothing is injected into it), so it imports what it uses:
  `import numpy as np`, `import neuronxcc.nki as nki`, `import neuronxcc.nki.language as nl`,
  `import neuronxcc.nki.isa as nisa`. The entry is an `@nki.jit` function that allocates each output
  in `nl.shared_hbm` (`nl.ndarray(shape, dtype=nl.float32, buffer=nl.shared_hbm)`) and returns it
  (a tuple when there are several).
- On a Trainium host it is compiled and run with `nki.baremetal` (neuronx-cc with
  `--auto-cast=none`: no silent casting to bf16), on one NeuronCore; latency is the on-device
  `total_time` of `neuron-profile`. Without a device it runs in `nki.simulate_kernel` (correctness only).
- Everything is float32: no float16/bfloat16/fp8/tf32 anywhere in the kernel (rejected)."""


def _shape(shape: tuple[int, ...] | None) -> str:
    return "[" + ", ".join(str(d) for d in shape or ()) + "]"


def nki_interface_lines(problem: Problem) -> list[str]:
    """The calling convention and this problem's kernel arguments (after the transforms)."""
    try:
        entry = problem.baseline.entry_symbol
    except (IndexError, AttributeError):
        entry = "kernel"
    d = problem.definition
    try:
        ref = ReferenceModule(problem) if d.x_numpy_reference else None
    except Exception:  # a broken reference must not break prompt rendering
        ref = None
    ins = ", ".join(d.inputs)
    lines = []
    if ref is not None and ref.to_nki is not None:
        lines.append(
            f"- The harness draws the inputs ({ins}), calls `{TO_NKI}([{ins}])` of the reference "
            f"module below and passes its result positionally: `{entry}(*{TO_NKI}([{ins}]))`."
        )
        shapes = kernel_arg_shapes(problem)
        if shapes:
            desc = ", ".join(
                f"arg{i}: {dt}{_shape(s)}" if kind == "array" else f"arg{i}: scalar {dt}"
                for i, (kind, s, dt) in enumerate(shapes)
            )
            lines.append(f"- So the kernel's arguments are: {desc}.")
    else:
        lines.append(
            f"- Entry point: `{entry}({ins})`, the inputs in this order (scalars as Python numbers)."
        )
    outs = ", ".join(d.outputs)
    if ref is not None and ref.from_nki is not None:
        lines.append(
            f"- Its return value goes through `{FROM_NKI}(kernel_out, ref)` of the reference module "
            f"(which reshapes it to the reference's shape) and is compared with `forward` ({outs})."
        )
    else:
        lines.append(f"- It returns the outputs ({outs}) with exactly the shapes listed above.")
    lines.append(CONVENTION)
    return lines


__all__ = ["CONVENTION", "nki_interface_lines"]
