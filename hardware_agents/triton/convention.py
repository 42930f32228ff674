"""How the Triton harness calls a solution, as text for the prompts (kept next to the harness
so the prompt states exactly what the harness does)."""

from __future__ import annotations

from accelopt.problem import Problem, ScalarInput


def signature(problem: Problem) -> str:
    d = problem.definition
    entry = problem.baseline.entry_symbol
    args = list(d.inputs) + (list(d.outputs) if problem.baseline.spec.destination_passing_style else [])
    return f"{entry}({', '.join(args)})"


def interface_lines(problem: Problem) -> list[str]:
    """The calling convention of this problem's entry point (FlashInfer-Bench semantics)."""
    d = problem.definition
    spec = problem.baseline.spec
    entry_file, _, entry = spec.entry_point.partition("::")
    outs = ", ".join(d.outputs)
    lines = [
        f"- One Python module `{entry_file}` (with its imports) defining `{entry}`; arguments are positional, "
        "in the order of the definition's inputs."
    ]
    if spec.destination_passing_style:
        lines.append(
            f"- Destination-passing style: `{signature(problem)}` writes the outputs ({outs}) into the "
            "tensors the harness passes (allocated with exactly the shapes and dtypes above and filled with "
            "NaN before the call, so every element must be written); the return value is ignored."
        )
    else:
        lines.append(
            f"- Value-returning: `{signature(problem)}` returns the outputs ({outs}): one tensor, or a tuple "
            "in that order, with exactly the dtypes and shapes above."
        )
    scalars = [
        f"`{n}` is a Python {s.dtype.removesuffix('32').removesuffix('64')} scalar"
        + (
            f" (this workload: {inp.value!r})"
            if isinstance(inp := problem.workload.inputs.get(n), ScalarInput)
            else ""
        )
        for n, s in d.inputs.items()
        if s.shape is None
    ]
    tensors = "Tensors are contiguous torch tensors on the GPU (CPU tensors under the Triton interpreter)"
    lines.append(f"- {tensors}; inputs are read-only. " + ("; ".join(scalars) + "." if scalars else ""))
    lines.append(
        "- Read the workload sizes from the tensors' shapes: the kernel is also checked at other values of "
        "the axes marked [workload] (see below). Axes without the mark are constants of the definition."
    )
    lines.append(
        "- Do all the work inside the call, on the current stream, every call: no caching of results across "
        "calls, no other streams or CUDA graphs, no threads; the harness does the timing."
    )
    return lines
