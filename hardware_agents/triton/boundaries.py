"""The interpreter's check workloads across the tile boundaries a Triton kernel breaks at.

A problem's small check workloads (batch 3 and 5, M = 33...) sit inside the first tile of
most tilings, and the suite's production workloads are powers of two (8192 rows: whole
tiles only). So a kernel wrong from row 64 on (a grid capped at 64 programs, a tile's base
dropped), or one that drops the last partial tile after whole ones (a grid of
`max(1, M // 64)`), passed every check in the interpreter, which runs only the check
workloads. `boundary_workloads` derives workloads that cross those boundaries; the agent
checks them, one seed each, once a kernel's own cases pass, in a child of their own
(`stages.plan_boundary_cases`, `TritonAgent._at_the_boundaries`).

The rule, in one place:

- each free variable axis is varied alone, from the smallest value of every axis among the
  check workloads whose inputs are drawn at random, to the values of BOUNDARY_VALUES (an
  axis an equality constraint computes, such as `len_indptr == batch_size + 1`, follows);
- never past the problem's own workload on that axis (a kernel answers for the shapes
  up to the ones its problem is about), and none for a problem without check workloads
  (the interpreter then checks its own workload, what a GPU checks);
- in the order of BOUNDARY_VALUES, each value on every axis (the cheapest axis first),
  while the boundary workloads' input elements stay within BOUNDARY_ELEMENTS in total;
  an axis none of them fits (rows of 128,256 logits) gets the largest of FALLBACK_VALUES
  that still fits;
- of a paged definition (index inputs: `hardware_agents/index_inputs.py`) only the page
  table's length is varied (the key/value tokens of its few sequences: a sequence's tiles
  of keys), the cache's pages following it; interpreting those grows with more than their
  input elements: the sequence count (the paper's split-KV decode baseline took 20-32 s at
  63 and 64 one-page sequences) and, where queries are ragged too (a `qo_indptr`: paged
  prefill), queries times keys (129 queries of a one-query-per-program kernel ran past the
  90 s timeout), so a definition with ragged queries gets none; the structured ragged
  checks (`suites/flashinfer/ragged.py`) cover its sequences.
"""

from __future__ import annotations

import msgspec

from accelopt.problem import (
    AxisConst,
    Definition,
    ExpressionError,
    Problem,
    SafetensorsInput,
    Workload,
    eval_expression,
)
from hardware_agents import index_inputs as indices
from hardware_agents.index_inputs import IndexLayout
from hardware_agents.triton.inputs import input_elements
from hardware_agents.triton.specs import INTERPRETABLE_ELEMENTS

BOUNDARY_VALUES: tuple[int, ...] = (129, 128, 65, 127, 64, 63)
"""In the order of what each catches: 129 a kernel wrong from row 64 or 128 on, and a last
partial tile of one row after whole tiles of any size up to 128; 128 whole tiles and no
partial one (a kernel that assumes one); 65 just past 64 (a kernel that picks its tiling by
size); 127 a last tile one row short (tiles up to 64), a 128-row tile partial; 64 and 63 the
other side of 64."""

FALLBACK_VALUES: tuple[int, ...] = (33, 17, 9)
"""Smaller boundaries (tiles of 32, 16, 8) for an axis whose rows are too large for 63."""

BOUNDARY_ELEMENTS = INTERPRETABLE_ELEMENTS // 2
"""Input elements of all boundary workloads together: half of what the interpreter checks
in seconds to a minute (`specs.INTERPRETABLE_ELEMENTS`)."""


def boundary_workloads(problem: Problem, budget: int = BOUNDARY_ELEMENTS) -> list[Workload]:
    """The boundary workloads of the problem's check workloads (see the module doc), derived
    from those whose inputs are drawn at random (recorded data fixes its workload's shape);
    none without such check workloads (the interpreter then runs the problem's own, as a GPU
    does)."""
    d = problem.definition
    if IndexLayout.of(d).side("q") is not None:
        return []
    index_names = set(indices.synthesized_inputs(d))
    interpreted = [  # their inputs are drawn at random, as the boundary workloads' are
        w
        for w in problem.check_workloads
        if not any(isinstance(s, SafetensorsInput) and n not in index_names for n, s in w.inputs.items())
    ]
    if not interpreted:
        return []
    smallest = min(interpreted, key=lambda w: input_elements(d, w))
    base = msgspec.structs.replace(
        smallest,
        axes={a: min(w.axes.get(a, v) for w in interpreted) for a, v in smallest.axes.items()},
        inputs={n: s for n, s in smallest.inputs.items() if not isinstance(s, SafetensorsInput)},
    )
    seen = {_key(w.axes) for w in interpreted}
    per_axis = {
        axis: {v: _candidate(problem, base, axis, v) for v in (*BOUNDARY_VALUES, *FALLBACK_VALUES)}
        for axis in free_axes(d, base)
    }
    out: list[Workload] = []
    covered: set[str] = set()  # the axes some boundary workload crosses
    spent = 0

    def take(axis: str, w: Workload | None) -> bool:
        nonlocal spent
        if w is None or _key(w.axes) in seen or spent + input_elements(d, w) > budget:
            return False
        spent += input_elements(d, w)
        seen.add(_key(w.axes))
        out.append(w)
        covered.add(axis)
        return True

    for v in BOUNDARY_VALUES:
        for axis in sorted(per_axis, key=lambda a: _size(d, per_axis[a][v])):
            take(axis, per_axis[axis][v])
    for axis, cands in per_axis.items():
        if axis not in covered:
            any(take(axis, cands[v]) for v in FALLBACK_VALUES)  # the largest that fits
    return out


def free_axes(d: Definition, base: Workload) -> list[str]:
    """The variable axes a boundary workload may set: not one an equality constraint computes
    (`len_indptr == batch_size + 1`); of a paged definition, only its page table's length
    (the cache's pages follow it, and its sequence count is not varied: see the module doc)."""
    derived = {lhs for lhs, _ in _equalities(d)}
    layout = IndexLayout.of(d)
    tables = {layout.total_axis(p) for p in layout.indptrs}
    return [
        a
        for a, spec in d.axes.items()
        if not isinstance(spec, AxisConst)
        and a in base.axes
        and a not in derived
        and (not layout or a in tables)
    ]


def _key(axes: dict[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(axes.items()))


def _size(d: Definition, w: Workload | None) -> int:
    return input_elements(d, w) if w is not None else 1 << 62


def _candidate(problem: Problem, base: Workload, axis: str, value: int) -> Workload | None:
    """`base` with `axis` at `value` (the axes that follow it set to match), or None where that
    is past the problem's own workload, the base's own value, or no valid workload."""
    d = problem.definition
    if value > problem.workload.axes.get(axis, value) or value == base.axes[axis]:
        return None
    axes = _consistent(d, IndexLayout.of(d), {**base.axes, axis: value})
    if axes is None:
        return None
    return msgspec.structs.replace(
        base,
        uuid=f"{problem.workload.uuid}-boundary-{axis}-{value}",
        axes=axes,
        x_label=f"boundary-{axis}-{value}",
    )


def _consistent(d: Definition, layout: IndexLayout, axes: dict[str, int]) -> dict[str, int] | None:
    """`axes` with the axes that follow the one set made to match, or None if they cannot."""
    out = _equal(d, axes)
    if layout:
        pages = layout.num_pages_axis()
        if pages is not None and layout.variable(pages):  # distinct page ids
            tables = [layout.total_axis(p) or "" for p in layout.indptrs if p.indices]
            out[pages] = max([out[pages], *(out.get(t, 0) for t in tables)])
    if any(v < 1 for v in out.values()):
        return None
    if layout:
        consts = {k: a.value for k, a in d.axes.items() if isinstance(a, AxisConst)}
        try:
            indices.synthesize(d, {**consts, **out}, 0)
        except indices.IndexSynthesisError:
            return None
    return out


def _equalities(d: Definition) -> list[tuple[str, str]]:
    """(axis, expression) of the constraints `axis == expression of axes` on variable axes."""
    out = []
    for c in d.constraints:
        lhs, sep, rhs = (x.strip() for x in c.partition("=="))
        if (
            sep
            and lhs in d.axes
            and not isinstance(d.axes[lhs], AxisConst)
            and "[" not in rhs
            and "." not in rhs
        ):
            out.append((lhs, rhs))
    return out


def _equal(d: Definition, axes: dict[str, int]) -> dict[str, int]:
    consts = {k: a.value for k, a in d.axes.items() if isinstance(a, AxisConst)}
    out = dict(axes)
    for axis, expr in _equalities(d):
        try:
            out[axis] = int(eval_expression(expr, {**consts, **out}))
        except (ExpressionError, ValueError):
            continue
    return out


__all__ = ["BOUNDARY_ELEMENTS", "BOUNDARY_VALUES", "FALLBACK_VALUES", "boundary_workloads", "free_axes"]
