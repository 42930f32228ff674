"""Index algebra of a traced kernel: loop variables, `nl.arange` grids and their affine
combinations, and masks (conjunctions of affine inequalities).

An `Ix` is `const + sum(coef * loop_counter) + sum(coef * axis_value)` over a broadcast
shape: loop counters are the iteration numbers 0..trip-1 of `nl.affine_range` /
`nl.sequential_range` loops (the Python-visible loop value `start + step * counter` is an
`Ix` itself), and axis values run over the positions of the shape, as numpy broadcasts
`nl.arange(n)[:, None]` against `nl.arange(m)[None, :]`. Anything that is not affine (a
product of two indices, `//` or `%` of a loop index) is rejected, as the NKI compiler
rejects it (`err_unsupported_expression_in_mask`, non-affine indices).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hardware_agents.neuron.emulator.errors import NKICompileError, NotEmulated


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    n = max(len(a), len(b))
    a2, b2 = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a2, b2, strict=True):
        if x != y and 1 not in (x, y):
            raise NKICompileError(
                "err_index_shape_mismatch",
                f"index shapes {list(a)} and {list(b)} cannot be broadcast together",
            )
        out.append(max(x, y))
    return tuple(out)


class Ix:
    """An affine index expression (see the module doc). Immutable."""

    __slots__ = ("axes", "const", "loops", "shape")

    def __init__(
        self,
        const: int = 0,
        loops: dict[int, int] | None = None,
        axes: dict[int, int] | None = None,
        shape: tuple[int, ...] = (),
    ) -> None:
        self.const = int(const)
        self.loops = {k: v for k, v in (loops or {}).items() if v}
        self.shape = tuple(int(s) for s in shape)
        self.axes = {k: v for k, v in (axes or {}).items() if v and self.shape[k] > 1}

    # --- construction ------------------------------------------------------------------
    @staticmethod
    def of(x: Any) -> Ix:
        if isinstance(x, Ix):
            return x
        if isinstance(x, bool):
            raise NKICompileError("err_unsupported_index", "a boolean is not an index")
        try:
            import numpy as np

            if isinstance(x, int | np.integer):
                return Ix(int(x))
        except ImportError:  # pragma: no cover
            pass
        raise NotEmulated(
            f"indexing with {type(x).__name__}", "indices are integers, loop indices and nl.arange"
        )

    def _aligned(self, ndim: int) -> Ix:
        shift = ndim - len(self.shape)
        if shift == 0:
            return self
        return Ix(
            self.const, self.loops, {k + shift: v for k, v in self.axes.items()}, (1,) * shift + self.shape
        )

    @property
    def is_const(self) -> bool:
        return not self.loops and not self.axes

    @property
    def scalar(self) -> bool:
        return not self.axes

    def __repr__(self) -> str:
        parts = [str(self.const)] if self.const or (not self.loops and not self.axes) else []
        parts += [f"{c}*i{k}" for k, c in self.loops.items()] + [f"{c}*a{k}" for k, c in self.axes.items()]
        return " + ".join(parts) + (f" {list(self.shape)}" if self.shape else "")

    # --- arithmetic --------------------------------------------------------------------
    def __add__(self, other: Any) -> Ix:
        if isinstance(other, float) and other.is_integer():
            other = int(other)
        o = Ix.of(other)
        shape = _broadcast(self.shape, o.shape)
        a, b = self._aligned(len(shape)), o._aligned(len(shape))
        loops = dict(a.loops)
        for k, v in b.loops.items():
            loops[k] = loops.get(k, 0) + v
        axes = dict(a.axes)
        for k, v in b.axes.items():
            axes[k] = axes.get(k, 0) + v
        return Ix(a.const + b.const, loops, axes, shape)

    __radd__ = __add__

    def __neg__(self) -> Ix:
        return self * -1

    def __pos__(self) -> Ix:
        return self

    def __sub__(self, other: Any) -> Ix:
        return self + (-Ix.of(other))

    def __rsub__(self, other: Any) -> Ix:
        return Ix.of(other) - self

    def __mul__(self, other: Any) -> Ix:
        if isinstance(other, Ix):
            if other.is_const:
                other = other.const
            elif self.is_const:
                return other * self.const
            else:
                raise NKICompileError(
                    "err_unsupported_expression_in_mask",
                    "the product of two loop/arange indices is not an affine expression",
                )
        if isinstance(other, float) and other.is_integer():
            other = int(other)
        try:
            k = int(other)
        except (TypeError, ValueError):
            raise NotEmulated(f"multiplying an index by {type(other).__name__}") from None
        if k != other:
            raise NKICompileError(
                "err_unsupported_expression_in_mask", f"an index times {other!r} is not an integer"
            )
        return Ix(
            self.const * k,
            {a: c * k for a, c in self.loops.items()},
            {a: c * k for a, c in self.axes.items()},
            self.shape,
        )

    __rmul__ = __mul__

    def _nonaffine(self, op: str, other: Any) -> Any:
        if self.is_const and isinstance(other, int):
            return {"//": self.const // other, "%": self.const % other}[op] if other else 0
        raise NKICompileError(
            "err_unsupported_expression_in_mask",
            f"`{op}` of a loop index or nl.arange is not an affine expression (use a loop over the "
            "tiles instead, or nl.static_range where the value must be known)",
        )

    def __floordiv__(self, other: Any) -> Any:
        return self._nonaffine("//", other)

    def __mod__(self, other: Any) -> Any:
        return self._nonaffine("%", other)

    def __truediv__(self, other: Any) -> Any:
        return self._nonaffine("/", other)

    # --- numpy-style reshaping of aranges ---------------------------------------------------
    def __getitem__(self, key: Any) -> Ix:
        if not isinstance(key, tuple):
            key = (key,)
        if any(k is Ellipsis for k in key):
            raise NotEmulated("`...` in an nl.arange index")
        dims = iter(range(len(self.shape)))
        shape: list[int] = []
        axes: dict[int, int] = {}
        for k in key:
            if k is None:
                shape.append(1)
                continue
            if isinstance(k, slice) and k == slice(None):
                d = next(dims, None)
                if d is None:
                    raise NKICompileError("err_index_shape_mismatch", "too many indices for an nl.arange")
                if d in self.axes:
                    axes[len(shape)] = self.axes[d]
                shape.append(self.shape[d])
                continue
            raise NotEmulated(
                f"indexing an nl.arange with {k!r}", "only `[:, None]`-style reshapes are emulated"
            )
        for d in dims:
            if d in self.axes:
                axes[len(shape)] = self.axes[d]
            shape.append(self.shape[d])
        return Ix(self.const, self.loops, axes, tuple(shape))

    # --- comparisons make masks --------------------------------------------------------------
    def _pred(self, other: Any, op: str) -> Pred:
        d = self - Ix.of(other)
        if op == ">=":
            return Pred([d])
        if op == ">":
            return Pred([d - 1])
        if op == "<=":
            return Pred([-d])
        if op == "<":
            return Pred([-d - 1])
        return Pred([d, -d])  # ==

    def __ge__(self, other: Any) -> Pred:
        return self._pred(other, ">=")

    def __gt__(self, other: Any) -> Pred:
        return self._pred(other, ">")

    def __le__(self, other: Any) -> Pred:
        return self._pred(other, "<=")

    def __lt__(self, other: Any) -> Pred:
        return self._pred(other, "<")

    def __eq__(self, other: Any) -> Pred:  # type: ignore[override]
        return self._pred(other, "==")

    def __ne__(self, other: Any) -> Any:
        raise NotEmulated(
            "`!=` on a loop index or nl.arange", "write the mask as a conjunction of <, <=, >, >="
        )

    __hash__ = None  # type: ignore[assignment]

    # --- Python control flow is not allowed on traced values ---------------------------------
    def _concrete(self, what: str) -> int:
        if self.is_const:
            return self.const
        if self.axes:
            raise NKICompileError(
                "err_control_flow_condition_depending_on_arange",
                f"{what} depending on `nl.arange` or `nl.mgrid` is not supported",
            )
        raise NKICompileError(
            "err_dynamic_control_flow_not_supported",
            f"{what} depending on the index of an nl.affine_range/nl.sequential_range loop is "
            "not supported: the loop body is traced once (use nl.static_range for a Python value, "
            "or a mask)",
        )

    def __int__(self) -> int:
        return self._concrete("a Python integer")

    def __index__(self) -> int:
        return self._concrete("a Python integer")

    def __bool__(self) -> bool:
        return bool(self._concrete("Control-flow"))

    # --- evaluation ---------------------------------------------------------------------
    def bounds(self, trips: dict[int, int]) -> tuple[int, int]:
        """(min, max) over every loop counter in [0, trip) and every axis position."""
        lo = hi = self.const
        for k, c in self.loops.items():
            span = c * (trips[k] - 1)
            lo, hi = lo + min(0, span), hi + max(0, span)
        for a, c in self.axes.items():
            span = c * (self.shape[a] - 1)
            lo, hi = lo + min(0, span), hi + max(0, span)
        return lo, hi


class Pred:
    """A mask: the conjunction of `term >= 0` over its terms (each an `Ix`)."""

    __slots__ = ("terms",)

    def __init__(self, terms: Iterable[Ix]) -> None:
        self.terms = list(terms)

    def __and__(self, other: Any) -> Pred:
        if isinstance(other, bool):
            return self if other else Pred([Ix(-1)])
        if not isinstance(other, Pred):
            raise NotEmulated(f"`&` of a mask with {type(other).__name__}")
        return Pred(self.terms + other.terms)

    __rand__ = __and__

    def __or__(self, other: Any) -> Any:
        raise NotEmulated("`|` in a mask", "write the mask as a conjunction of affine comparisons")

    __ror__ = __or__

    def __invert__(self) -> Any:
        raise NotEmulated("`~` of a mask", "write the mask as a conjunction of affine comparisons")

    @property
    def shape(self) -> tuple[int, ...]:
        shape: tuple[int, ...] = ()
        for t in self.terms:
            shape = _broadcast(shape, t.shape)
        return shape

    def __bool__(self) -> bool:
        return all(t._concrete("Control-flow") >= 0 for t in self.terms)


def arange(*args: Any) -> Ix:
    """`nl.arange(stop)` / `nl.arange(start, stop)` as a 1-D index expression."""
    if len(args) == 1:
        start, stop = 0, args[0]
    elif len(args) in (2, 3):
        start, stop = args[0], args[1]
        if len(args) == 3 and args[2] not in (1, None):
            raise NotEmulated("nl.arange with a step")
    else:
        raise NKICompileError("err_invalid_arange", "nl.arange takes (stop) or (start, stop)")
    start, stop = int(start), int(stop)
    if stop <= start:
        raise NKICompileError("err_invalid_arange", f"nl.arange({start}, {stop}) is empty")
    return Ix(start, None, {0: 1}, (stop - start,))


class MGrid:
    """`nl.mgrid[0:128, 0:512]`: dense index grids, unpackable, with `.p`, `.x`, `.y`, `.z`."""

    def __getitem__(self, key: Any) -> GridResult:
        if not isinstance(key, tuple):
            key = (key,)
        n = len(key)
        out = []
        for i, s in enumerate(key):
            if not isinstance(s, slice) or s.step not in (None, 1):
                raise NotEmulated("nl.mgrid with a step or a non-slice")
            start = int(s.start or 0)
            stop = int(s.stop)
            base = arange(start, stop)
            out.append(Ix(base.const, None, {i: 1}, tuple(stop - start if j == i else 1 for j in range(n))))
        return GridResult(out)


class GridResult(tuple):
    """The index grids of one `nl.mgrid[...]`."""

    def __new__(cls, items: list[Ix]) -> GridResult:
        return super().__new__(cls, items)

    @property
    def p(self) -> Ix:
        return self[0]

    @property
    def x(self) -> Ix:
        return self[1]

    @property
    def y(self) -> Ix:
        return self[2]

    @property
    def z(self) -> Ix:
        return self[3]


__all__ = ["GridResult", "Ix", "MGrid", "Pred", "arange"]
