"""When a profile fails in a way the other calling convention would explain, say so.

A FlashInfer-Bench solution is destination-passing (`run(*inputs, *outputs)`, returns
nothing) or value-returning (`run(*inputs)` returns the outputs); published folders often
leave it implicit, and `run(*args, **kwargs)` does not tell. Calling a value-returning
kernel with its outputs appended fails with a TypeError about positional arguments, or
leaves the outputs it was handed unwritten (NaN) while it returns tensors; calling a
destination-passing one without them fails the other way round.
"""

from __future__ import annotations

import re

from hardware_agents.triton.records import CaseRun

# errors of a call with more or fewer arguments than the entry point expects (a signature, an
# args[i] past the end, an unpacking of *args)
_ARITY = re.compile(
    r"positional argument|takes \d+ positional|missing \d+ required positional|"
    r"too many (positional )?arguments|unexpected keyword|values to unpack|tuple index out of range"
)
_ARITY_ERRORS = ("TypeError", "IndexError", "ValueError")


def convention_hint(
    destination_passing: bool, run: CaseRun, n_inputs: int, n_outputs: int, outputs_unwritten: bool = False
) -> str:
    """A hint for the log, or "" when nothing points at the calling convention."""
    if destination_passing:
        arity = _arity_error(run)
        returned = run.returned.startswith(("tensor", "tuple", "dict"))
        if arity or (outputs_unwritten and returned):
            why = (
                "it failed on the argument count"
                if arity
                else f"it left its output arguments unwritten and returned a {run.returned}"
            )
            return (
                f"hint: the solution is destination-passing, so `run` was called with the {n_inputs} "
                f"input(s) then the {n_outputs} output(s), and {why}: if it takes the inputs only and "
                "returns its outputs (FlashInfer-Bench's older convention), it is value-returning: import it "
                "with `--convention value` (or `--solution-convention NAME=value`), or set "
                "destination_passing_style to false in its solution.json"
            )
        return ""
    arity = _arity_error(run)
    if arity or run.returned == "none":
        why = "it failed on the argument count" if arity else "it returned nothing"
        return (
            f"hint: the solution is value-returning, so `run` was called with the {n_inputs} input(s) "
            f"only, and {why}: if it writes its outputs into arguments after the inputs, it is "
            "destination-passing: import it with `--convention dps` (or `--solution-convention NAME=dps`), "
            "or set destination_passing_style to true in its solution.json"
        )
    return ""


def _arity_error(run: CaseRun) -> bool:
    first = run.error.splitlines()[0] if run.error else ""
    return run.error_type in _ARITY_ERRORS and bool(_ARITY.search(first))
