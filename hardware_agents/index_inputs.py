"""Index inputs of paged and ragged operators, synthesized so that the definition's constraints
and its semantics hold (FlashInfer-Bench ships them as blobs; published folders often lack them).

`IndexLayout.of(definition)` reads the roles of a definition's index inputs from their names
and constraints: the `<p>indptr` inputs (the query side `qo_indptr`, the key/value side
`kv_indptr`, or any other), the axis each one's last element is tied to (`total_q ==
qo_indptr[-1].item()`, else the length of `<p>indices`), the page table `<p>indices` (ids
below the cache's `num_pages`), `<p>last_page_len`, the page size and whether the operator is
causal (its name, tags or description say so). `synthesize(definition, axes, seed)` then draws:

- every sequence length from one seeded generator: lengths sum to the tied total, every
  sequence is non-empty when the total allows, and with two or more sequences one has length 1
  and the others differ (so a kernel that handles one sequence, or assumes equal lengths, or
  mishandles a length-1 sequence, is caught);
- `<p>last_page_len` in [1, page_size], with both edges (1 and page_size) present when there are
  two or more sequences;
- for a causal operator, every sequence's key/value tokens ((pages - 1) * page_size +
  last_page_len, or its ragged length) at least its query length (the reference masks keys
  after each query's position counted from the end: a sequence with more queries than keys
  has rows that see nothing, -inf/NaN in the reference): the query lengths are drawn under
  those caps, and a total no caps can hold is an error naming it;
- page ids distinct (while the cache has enough pages) and in [0, num_pages).

`synthesized_arrays` gives them in the definition's dtypes and shapes. These are facts of the
problem format, the same on every device, so this module is no device family's: the Triton
agent's input generator (`triton/inputs.py`) and the FlashInfer suite importer
(`suites/flashinfer/`) both read it, with `axis_values` and `is_float` below.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from accelopt.problem import AxisConst, Definition, Workload


class IndexSynthesisError(ValueError):
    """Index inputs the definition's axes cannot satisfy (the Triton agent raises it as its
    input module's InputError)."""


def is_float(dtype: str) -> bool:
    """A floating-point dtype name of the problem format (`float16`, `bfloat16`, `float8_e4m3fn`)."""
    return dtype.startswith(("float", "bfloat"))


def axis_values(definition: Definition, workload: Workload) -> dict[str, int]:
    """Every axis's value at `workload`: the definition's constants, then the workload's axes."""
    values = {k: a.value for k, a in definition.axes.items() if isinstance(a, AxisConst)}
    values.update(workload.axes)
    return values


def _is_int_tensor(definition: Definition, name: str) -> bool:
    spec = definition.inputs[name]
    return spec.shape is not None and spec.dtype.startswith(("int", "uint"))


def synthesized_inputs(definition: Definition) -> list[str]:
    """Integer inputs whose values this module synthesizes (indptr / indices / last_page_len)."""
    out = []
    for name in definition.inputs:
        if not _is_int_tensor(definition, name):
            continue
        if (
            name.endswith("indptr")
            or name.endswith("last_page_len")
            or (name.endswith("indices") and (name[: -len("indices")] + "indptr") in definition.inputs)
        ):
            out.append(name)
    return out


def last_element_axis(definition: Definition, indptr: str) -> str | None:
    """The axis a constraint ties `indptr[-1]` to (`total_q == qo_indptr[-1].item()`)."""
    pat = re.compile(
        rf"^\s*(?:(\w+)\s*==\s*{indptr}\s*\[\s*-1\s*\](?:\.item\(\))?|{indptr}\s*\[\s*-1\s*\]"
        rf"(?:\.item\(\))?\s*==\s*(\w+))\s*$"
    )
    for c in definition.constraints:
        m = pat.match(c)
        if m:
            return m.group(1) or m.group(2)
    return None


def is_causal(definition: Definition) -> bool:
    text = " ".join([definition.name, definition.description or "", *definition.tags]).lower()
    return "causal" in text


@dataclass(frozen=True)
class Indptr:
    name: str
    prefix: str
    total_axis: str | None  # the axis its last element equals (None: the length of its indices)
    indices: str | None  # `<prefix>indices`, a page table, when the definition has one
    last_page_len: str | None

    @property
    def side(self) -> str:
        """ "q" (query offsets), "kv" (key/value offsets or pages) or "" (anything else)."""
        if "kv" in self.prefix:
            return "kv"
        return "q" if self.prefix.startswith("q") else ""


@dataclass(frozen=True)
class IndexLayout:
    """The roles of a definition's index inputs (see the module doc)."""

    definition: Definition = field(repr=False)
    indptrs: list[Indptr] = field(default_factory=list)
    causal: bool = False

    @classmethod
    def of(cls, definition: Definition) -> IndexLayout:
        names = synthesized_inputs(definition)
        ptrs = []
        for name in names:
            if not name.endswith("indptr"):
                continue
            prefix = name[: -len("indptr")]
            indices = prefix + "indices" if prefix + "indices" in names else None
            last = prefix + "last_page_len" if prefix + "last_page_len" in names else None
            ptrs.append(Indptr(name, prefix, last_element_axis(definition, name), indices, last))
        return cls(definition, ptrs, is_causal(definition))

    def __bool__(self) -> bool:
        return bool(self.indptrs)

    def side(self, side: str) -> Indptr | None:
        return next((p for p in self.indptrs if p.side == side), None)

    def batch_axis(self) -> str | None:
        """The axis of the indptr inputs' length (len_indptr)."""
        for p in self.indptrs:
            shape = self.definition.inputs[p.name].shape
            if shape:
                return shape[0]
        return None

    def page_size(self, axes: dict[str, int]) -> int:
        return int(axes.get("page_size", 1))

    def num_pages_axis(self) -> str | None:
        d = self.definition
        if "num_pages" in d.axes:
            return "num_pages"
        for name, spec in d.inputs.items():
            if "cache" in name and spec.shape:
                return spec.shape[0]
        return None

    def total_axis(self, p: Indptr) -> str | None:
        """The axis p's last element equals: its tied axis, else its page table's length."""
        if p.total_axis is not None:
            return p.total_axis
        if p.indices is not None:
            shape = self.definition.inputs[p.indices].shape
            return shape[0] if shape else None
        return None

    def variable(self, axis: str | None) -> bool:
        return axis is not None and not isinstance(self.definition.axes.get(axis), AxisConst)


# --- drawing ---------------------------------------------------------------------------------


def lengths(batch: int, total: int, rng: np.random.Generator) -> np.ndarray:
    """`batch` non-negative lengths summing to `total`: each at least 1 when total >= batch,
    one of them exactly 1 (two or more sequences), the others drawn (distinct where room allows),
    in a random order."""
    if batch <= 0:
        return np.zeros(0, np.int64)
    if total < batch:  # not every sequence can have one: a random few are empty
        out = np.zeros(batch, np.int64)
        out[rng.choice(batch, size=total, replace=False)] = 1
        return out
    if batch == 1:
        return np.array([total], np.int64)
    rest, extra = batch - 1, total - batch  # one sequence of length 1; the rest >= 1 plus `extra`
    cuts = np.sort(rng.integers(0, extra + 1, size=rest - 1)) if rest > 1 else np.zeros(0, np.int64)
    parts = np.diff(np.concatenate([[0], cuts, [extra]])) + 1
    out = np.concatenate([[1], parts]).astype(np.int64)
    return out[rng.permutation(batch)]


def under_caps(total: int, caps: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Lengths summing to `total` with lengths[i] <= caps[i], each at least 1 where its cap and
    the total allow, the rest spread at random."""
    n = len(caps)
    if total > int(caps.sum()):
        raise IndexSynthesisError(f"{total} cannot be spread under caps summing to {int(caps.sum())}")
    out = np.minimum(caps, 1).astype(np.int64)
    if int(out.sum()) > total:  # fewer queries than sequences with keys
        keep = rng.choice(np.flatnonzero(out), size=total, replace=False)
        out[:] = 0
        out[keep] = 1
        return out
    left = total - int(out.sum())
    for i in rng.permutation(n):  # a random share of what is left, then the rest greedily
        room = int(caps[i] - out[i])
        give = min(left, int(rng.integers(0, room + 1)))
        out[i] += give
        left -= give
    for i in rng.permutation(n):
        give = min(left, int(caps[i] - out[i]))
        out[i] += give
        left -= give
    return out


def _with_edges(values: np.ndarray, lo: int, hi: int, rng: np.random.Generator) -> np.ndarray:
    """`values` with lo and hi placed at two random positions (when there are two)."""
    if len(values) >= 2 and hi > lo:
        i, j = rng.choice(len(values), size=2, replace=False)
        values[i], values[j] = lo, hi
    return values


def _offsets(lens: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)


def synthesize(definition: Definition, axes: dict[str, int], seed: int) -> dict[str, np.ndarray]:
    """Every index input of the definition at these axes, as int64 arrays (see the module doc)."""
    layout = IndexLayout.of(definition)
    rng = np.random.default_rng([seed, 7])
    out: dict[str, np.ndarray] = {}
    ps = layout.page_size(axes)
    kv_tokens: np.ndarray | None = None
    # the key/value side first: a causal query side is drawn under its token counts
    for p in sorted(layout.indptrs, key=lambda p: p.side != "kv"):
        shape = definition.inputs[p.name].shape
        batch = axes[shape[0]] - 1 if shape else 0
        axis = layout.total_axis(p)
        if axis is None or axis not in axes:
            raise IndexSynthesisError(
                f"{definition.name}: cannot synthesize {p.name}: no constraint ties {p.name}[-1] to an "
                f"axis and there is no {p.prefix}indices input"
            )
        total = axes[axis]
        if p.side == "q" and layout.causal and kv_tokens is not None:
            try:
                lens = under_caps(total, kv_tokens, rng)
            except IndexSynthesisError:
                raise IndexSynthesisError(
                    f"{definition.name} is causal: every sequence needs at least as many key/value "
                    f"tokens as queries, and {axis}={total} queries cannot fit under the "
                    f"{int(kv_tokens.sum())} key/value tokens of these axes"
                ) from None
        else:
            lens = lengths(batch, total, rng)
        out[p.name] = _offsets(lens)
        if p.indices is not None:
            out[p.indices] = _page_ids(definition, layout, axes, total, rng)
        if p.side != "kv":
            continue
        if p.last_page_len is not None:
            last = rng.integers(1, ps + 1, size=batch)
            last = _with_edges(last, 1, ps, rng)
            last[lens == 0] = 0
            out[p.last_page_len] = last
            kv_tokens = np.maximum(lens - 1, 0) * ps + last
        else:
            kv_tokens = lens * ps if p.indices is not None else lens
    return out


def synthesized_arrays(definition: Definition, axes: dict[str, int], seed: int) -> dict[str, np.ndarray]:
    """`synthesize`'s index inputs in the definition's dtypes and shapes (IndexSynthesisError
    where one's element count is not its shape's)."""
    out = {}
    for name, a in synthesize(definition, axes, seed).items():
        shape = definition.shape_of(name, axes)
        if shape is not None and a.size != int(np.prod(shape)):
            raise IndexSynthesisError(
                f"{definition.name}: synthesized {name} has {a.size} elements, its shape is {list(shape)}"
            )
        typed = np.ascontiguousarray(a.astype(np.dtype(definition.inputs[name].dtype)))
        out[name] = typed.reshape(shape) if shape is not None else typed
    return out


def _page_ids(
    definition: Definition, layout: IndexLayout, axes: dict[str, int], n: int, rng: np.random.Generator
) -> np.ndarray:
    axis = layout.num_pages_axis()
    pages = axes.get(axis, 0) if axis else 0
    if pages <= 0:
        raise IndexSynthesisError(
            f"{definition.name}: cannot synthesize page ids: no num_pages axis and no *cache* input"
        )
    return rng.permutation(pages)[:n] if n <= pages else rng.integers(0, pages, size=n)


__all__ = [
    "IndexLayout",
    "IndexSynthesisError",
    "Indptr",
    "is_causal",
    "last_element_axis",
    "lengths",
    "synthesize",
    "synthesized_inputs",
    "under_caps",
]
