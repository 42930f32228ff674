"""The values a callable returned for a definition's outputs, in the definition's order: one
rule for the candidate's entry point (`harness.py`) and the trusted reference (`reference.py`),
so that both accept the same returns (as FlashInfer-Bench does)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def returned_values(
    result: Any, names: Sequence[str], who: str, error: Callable[[str], Exception] = ValueError
) -> list[Any]:
    """`result` as one value per output in `names`' order: one value, a tuple/list in that
    order, or a dict keyed by output name (keys that are not outputs are ignored). Anything else
    raises `error` with a message that begins with `who` ("the entry point")."""
    if isinstance(result, dict):
        absent = [n for n in names if n not in result]
        if absent:
            raise error(
                f"{who} returned a dict without output(s) {', '.join(absent)} "
                f"(its keys: {', '.join(map(str, result)) or 'none'})"
            )
        return [result[n] for n in names]
    values = list(result) if isinstance(result, tuple | list) else [result]
    if len(values) != len(names):
        raise error(
            f"{who} returned {len(values)} value(s); the definition has "
            f"{len(names)} output(s): {', '.join(names)}"
        )
    return values
