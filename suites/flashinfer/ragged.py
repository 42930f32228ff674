"""Check workloads that cover the batch and ragged structure of paged / ragged operators.

A check workload with one sequence (`len_indptr = 2`) passes a kernel that handles only the
first sequence of a batch. For definitions whose index inputs we synthesize
(`hardware_agents.index_inputs`), `ragged_check_workloads` derives small workloads with
several sequences: the index synthesizer then gives them different lengths, one of length 1,
the edges of the page size (`last_page_len` 1 and page_size), and for a causal operator some
sequences with more keys than queries (`STRUCTURES`: sequences, mean query length, extra
key/value tokens per sequence), so that a kernel that handles the first sequence only, drops a
sequence's last page, shifts the causal mask by one, or computes one head only, disagrees
with the reference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from accelopt.problem import (
    AxisConst,
    Definition,
    ExpressionError,
    InputSpec,
    SafetensorsInput,
    Workload,
    eval_expression,
)
from hardware_agents.index_inputs import IndexLayout

# (sequences, mean query (or key/value) length, extra key/value tokens per sequence for a
# causal operator)
STRUCTURES: tuple[tuple[int, int, int], ...] = ((4, 3, 2), (3, 2, 0))
MIN_SEQUENCES = 3  # a check workload with fewer synthesized sequences does not cover a batch


def covers_batches(d: Definition, workloads: Sequence[Workload]) -> bool:
    """Whether some workload has at least MIN_SEQUENCES sequences whose indices are
    synthesized (their structure is then the synthesizer's; recorded blobs may hold anything)."""
    layout = IndexLayout.of(d)
    axis = layout.batch_axis()
    if not layout or axis is None:
        return True
    names = {p.name for p in layout.indptrs}
    for w in workloads:
        synthesized = not any(isinstance(w.inputs.get(n), SafetensorsInput) for n in names)
        if synthesized and w.axes.get(axis, 0) - 1 >= MIN_SEQUENCES:
            return True
    return False


def _solve_batch(d: Definition, axes: dict[str, int], batch_axis: str, want: int) -> dict[str, int]:
    """`axes` with the batch axis at `want` and every variable axis an equality ties it to
    (`len_indptr == batch_size + 1`) set to the value that satisfies it."""
    out = dict(axes)
    out[batch_axis] = want
    for c in d.constraints:
        lhs, sep, rhs = (x.strip() for x in c.partition("=="))
        if not sep or lhs != batch_axis or "[" in rhs:
            continue
        for name in [a for a in d.axes if a in rhs and not isinstance(d.axes[a], AxisConst)]:
            for v in range(0, want + 1):
                try:
                    if int(eval_expression(rhs, {**out, name: v})) == want:
                        out[name] = v
                        break
                except (ExpressionError, ValueError, KeyError):
                    break
    return out


def ragged_axes(d: Definition, base: dict[str, int], sequences: int, mean: int, extra: int) -> dict[str, int]:
    """The axes of one structured check workload (see STRUCTURES), from `base` (the problem's
    axes with its other variable axes already scaled down)."""
    layout = IndexLayout.of(d)
    batch_axis = layout.batch_axis()
    assert batch_axis is not None
    axes = _solve_batch(d, base, batch_axis, sequences + 1)
    ps = layout.page_size(axes)
    q, kv = layout.side("q"), layout.side("kv")
    queries = sequences * mean
    tokens = queries + (sequences * extra if layout.causal else 0)
    for p in layout.indptrs:
        total = layout.total_axis(p)
        if total is None or not layout.variable(total):
            continue
        if p is q:
            axes[total] = queries
        elif p is kv and p.indices is not None:  # pages: every sequence's tokens in whole pages, plus one
            axes[total] = math.ceil(tokens / ps) + (sequences if p.last_page_len else 0)
        elif p is kv:
            axes[total] = tokens
        else:
            axes[total] = queries
    pages = layout.num_pages_axis()
    if layout.variable(pages) and pages is not None:
        used = max((axes.get(layout.total_axis(p) or "", 0) for p in layout.indptrs if p.indices), default=0)
        axes[pages] = used + 3  # distinct page ids, a few unused
    return axes


def ragged_check_workloads(d: Definition, main: Workload, base: dict[str, int], count: int) -> list[Workload]:
    """Up to `count` structured check workloads (STRUCTURES), from `base` axes."""
    out = []
    keep: dict[str, InputSpec] = {n: s for n, s in main.inputs.items() if not isinstance(s, SafetensorsInput)}
    for i, (sequences, mean, extra) in enumerate(STRUCTURES[:count]):
        axes = ragged_axes(d, base, sequences, mean, extra)
        out.append(
            Workload(uuid=f"{main.uuid}-x-ragged-{i + 1}", axes=axes, inputs=keep, x_label=f"ragged-{i + 1}")
        )
    return out


def describe(d: Definition, w: Workload) -> str:
    layout = IndexLayout.of(d)
    axis = layout.batch_axis()
    n = w.axes.get(axis, 1) - 1 if axis else 1
    causal = ", key/value at least query length in each (causal)" if layout.causal else ""
    return f"{n} sequences of different lengths, one of length 1{causal}"


__all__ = [
    "MIN_SEQUENCES",
    "STRUCTURES",
    "covers_batches",
    "describe",
    "ragged_axes",
    "ragged_check_workloads",
]
