"""Exact memory dependences between the items of one block (a loop body, or the kernel body):
which item waits for which, and at which iteration distances.

An access is affine in the loop counters, so two accesses conflict at an iteration distance `d`
when, per dimension, their index ranges overlap once the loop counter moved by `d` (`deltas`):
exact where both move with the same coefficient, "may overlap" where they do not. Every pair
that may conflict is tested: there is no window of recent accesses (a window let 64 useless
copies of a tile hide the load that the tile's real readers wait for). What keeps it fast:

- a per-tensor grid index over each access's swept box (the memory it touches over every value
  of the open counters) yields only the accesses that can overlap at all, a read only the
  writes (reads of reads order nothing);
- an access whose memory a later exact write of the same iteration covers cannot be the only
  link to anything after that write (the write waits for it, and everything after waits for
  the write), so it leaves the forward index; an access covered by an earlier exact write is
  likewise implied for dependences reaching back from a later iteration.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from typing import NamedTuple

from hardware_agents.neuron.emulator.program import Access, Instr, Program

_REGISTER_CELLS = 16  # an access spanning more grid cells is kept in the always-tested list
_QUERY_CELLS = 256  # a query spanning more cells scans the tensor's accesses instead


class Acc(NamedTuple):
    """One memory access as a block sees it: per dimension the coefficients of the loop counters
    still open at this level and the [lo, hi] range the rest of the index sweeps."""

    tensor: int
    write: bool
    read: bool
    acc: bool  # an accumulating write (PSUM `+=`, loop_reduce)
    coef: tuple[tuple[tuple[int, int], ...], ...]
    lo: tuple[int, ...]
    hi: tuple[int, ...]
    whole: bool  # compare as the whole tensor (reshaped HBM views)
    own: float = 0.0  # latency of the instruction that makes the access
    # lifted out of loops that each move it (a loop touching the memory part by part, each part
    # once); None for an instruction's own access, False once a loop repeats it in place
    swept: bool | None = None
    # an unmasked instruction write that touches every element of its box: it may stand in for
    # the older accesses it covers
    exact: bool = False


class Dep(NamedTuple):
    """Item `src`, `lo` to `hi` iterations earlier, must have completed (`weight` None) or have
    started `weight` seconds before."""

    src: int
    lo: int
    hi: int
    weight: float | None


def _dense(a: Access) -> bool:
    """Whether the tile touches every element of its index box (no stride, no diagonal)."""
    seen: set[int] = set()
    for e in list(a.block) + list(a.dims):
        if len(e.axes) > 1:
            return False
        for axis, k in e.axes:
            if abs(k) != 1 or axis in seen:
                return False
            seen.add(axis)
    return True


def access(
    a: Access, prog: Program, write: bool, read: bool, acc: bool, own: float, exact: bool
) -> Acc | None:
    t = prog.tensors[a.tensor]
    if t.buffer in ("input", "const"):
        return None  # read-only: orders nothing
    base = t.alias if t.alias >= 0 else a.tensor
    coef: list[tuple[tuple[int, int], ...]] = []
    lo, hi = [], []
    for e in (*a.block, *a.dims):
        if not e.loops:
            coef.append(())
        else:
            terms: dict[int, int] = {}
            for var, k in e.loops:
                terms[var] = terms.get(var, 0) + k
            coef.append(tuple(sorted((v, k) for v, k in terms.items() if k)))
        low = high = e.c
        for axis, k in e.axes:
            span = k * (a.shape[axis] - 1)
            low, high = low + min(0, span), high + max(0, span)
        lo.append(low)
        hi.append(high)
    whole = t.alias >= 0
    return Acc(
        base,
        write,
        read,
        acc,
        tuple(coef),
        tuple(lo),
        tuple(hi),
        whole=whole,
        own=own,
        exact=exact and write and not whole and _dense(a),
    )


def instr_accs(ins: Instr, prog: Program, own: float) -> dict[int, list[Acc]]:
    out: dict[int, list[Acc]] = {}
    acc = ins.acc or ins.op == "loop_reduce"
    found = [access(ins.dst, prog, True, acc, acc, own, not ins.mask)] if ins.dst is not None else []
    found += [access(s, prog, False, True, False, own, False) for s in ins.srcs]
    for a in found:
        if a is not None:
            out.setdefault(a.tensor, []).append(a)
    return out


def lift(
    accs: Iterable[Acc], var: int, trip: int, drop: set[int], scope: dict[int, int]
) -> dict[int, list[Acc]]:
    """A loop's accesses as its parent sees them: the loop's counter sweeps its range, tensors
    declared inside the loop vanish, and accesses that now look alike merge into their hull."""
    merged: dict[tuple, list] = {}
    for a in accs:
        if scope.get(a.tensor, -1) in drop:
            continue
        coef, lo, hi = [], list(a.lo), list(a.hi)
        moved = False
        for d, terms in enumerate(a.coef):
            k = dict(terms).get(var, 0)
            span = k * (trip - 1)
            moved = moved or span != 0
            lo[d], hi[d] = lo[d] + min(0, span), hi[d] + max(0, span)
            coef.append(tuple((v, c) for v, c in terms if v != var))
        swept = a.swept if trip == 1 else (a.swept is not False and moved)
        key = (a.tensor, a.write, a.read, a.acc, tuple(coef), a.whole, swept)
        box = merged.get(key)
        if box is None:
            merged[key] = [lo, hi, a.own]
        else:
            box[0] = [min(x, y) for x, y in zip(box[0], lo, strict=True)]
            box[1] = [max(x, y) for x, y in zip(box[1], hi, strict=True)]
            box[2] = max(box[2], a.own)
    out: dict[int, list[Acc]] = {}
    for (tensor, write, read, acc, coef_t, whole, swept), (lo2, hi2, own) in merged.items():
        out.setdefault(tensor, []).append(
            Acc(tensor, write, read, acc, coef_t, tuple(lo2), tuple(hi2), whole, own, swept)
        )
    return out


def deltas(x: Acc, y: Acc, var: int, trip: int, trips: dict[int, int]) -> tuple[int, int] | None:
    """The iteration distances d in [0, trip-1] at which `y` (d iterations after `x`, same
    values of the outer counters) touches memory `x` touches, as an interval, or None."""
    lo_d, hi_d = 0, trip - 1
    if x.whole or y.whole or len(x.coef) != len(y.coef):
        return lo_d, hi_d
    for cx_t, cy_t, xl, xh, yl, yh in zip(x.coef, y.coef, x.lo, x.hi, y.lo, y.hi, strict=True):
        if not cx_t and not cy_t:  # neither moves: the ranges overlap at every distance, or never
            if yl > xh or xl > yh:
                return None
            continue
        cx, cy = dict(cx_t), dict(cy_t)
        ax, ay = cx.pop(var, 0), cy.pop(var, 0)
        for v in set(cx) | set(cy):  # other open counters: equal coefficients cancel
            kx, ky = cx.get(v, 0), cy.get(v, 0)
            if kx != ky:
                span = trips.get(v, 1) - 1
                xl, xh = xl + min(0, kx * span), xh + max(0, kx * span)
                yl, yh = yl + min(0, ky * span), yh + max(0, ky * span)
        if ax != ay:  # they move differently: may overlap at any distance
            span = trip - 1
            xl, xh = xl + min(0, ax * span), xh + max(0, ax * span)
            yl, yh = yl + min(0, ay * span), yh + max(0, ay * span)
            if yl > xh or xl > yh:
                return None
            continue
        # overlap iff a*d in [xl - yh, xh - yl]
        low, high = xl - yh, xh - yl
        if ax == 0:
            if low > 0 or high < 0:
                return None
            continue
        if ax > 0:
            dl, dh = -(-low // ax), high // ax
        else:
            dl, dh = -(-high // ax), low // ax
        lo_d, hi_d = max(lo_d, dl), min(hi_d, dh)
        if lo_d > hi_d:
            return None
    return lo_d, hi_d


def _covers(w: Acc, a: Acc) -> bool:
    """`w` (an exact write) writes every element `a` touches, in the same iteration."""
    return (
        not a.whole
        and w.coef == a.coef
        and all(wl <= al and ah <= wh for wl, wh, al, ah in zip(w.lo, w.hi, a.lo, a.hi, strict=True))
    )


class _Entry:
    __slots__ = ("acc", "alive", "exposed", "item", "stamp")

    def __init__(self, item: int, acc: Acc, exposed: bool) -> None:
        self.item = item
        self.acc = acc
        self.alive = True  # not covered by a later exact write of the same iteration
        self.exposed = exposed  # not covered by an earlier exact write of the same iteration
        self.stamp = -1


Box = tuple[tuple[int, ...], tuple[int, ...]]


class _Grid:
    """A tensor's grid of cells, sized by its first access (tiles of a tensor are usually alike)."""

    def __init__(self) -> None:
        self.size: tuple[int, ...] | None = None

    def keys(self, box: Box | None) -> list[tuple[int, ...]] | None:
        """The cells `box` spans (None: the whole tensor, or more than a query scans)."""
        if box is None:
            return None
        lo, hi = box
        if self.size is None:
            self.size = tuple(max(1, h - l + 1) for l, h in zip(lo, hi, strict=True))  # noqa: E741
        size = self.size
        if len(lo) != len(size):
            return None
        firsts = [a // s for a, s in zip(lo, size, strict=True)]
        lasts = [b // s for b, s in zip(hi, size, strict=True)]
        if firsts == lasts:  # the usual tile: one cell
            return [tuple(firsts)]
        keys: list[tuple[int, ...]] = [()]
        for first, last in zip(firsts, lasts, strict=True):
            if (last - first + 1) * len(keys) > _QUERY_CELLS:
                return None
            keys = [(*k, i) for k in keys for i in range(first, last + 1)]
        return keys


class _TensorIndex:
    """One tensor's reads, or its writes, each registered in the grid cells its swept box spans."""

    def __init__(self) -> None:
        self.entries: list[_Entry] = []
        self.wide: list[_Entry] = []  # whole-tensor views, boxes spanning too many cells
        self.cells: dict[tuple[int, ...], list[_Entry]] = {}
        self.stale = 0

    def add(self, e: _Entry, keys: list[tuple[int, ...]] | None) -> None:
        self.entries.append(e)
        if keys is None or len(keys) > _REGISTER_CELLS:
            self.wide.append(e)
            return
        for key in keys:
            self.cells.setdefault(key, []).append(e)

    def candidates(self, keys: list[tuple[int, ...]] | None, stamp: int) -> list[_Entry]:
        """The entries whose boxes may overlap the cells `keys` (each once), in no particular order."""
        if keys is None:
            pool: Iterable[_Entry] = self.entries
        else:
            cells = self.cells
            pool = [e for key in keys for e in cells.get(key, ())]
            pool.extend(self.wide)
        out = []
        for e in pool:
            if e.stamp != stamp and (e.alive or e.exposed):
                e.stamp = stamp
                out.append(e)
        return out

    def retire(self, e: _Entry, backward: bool) -> None:
        e.alive = False
        if not (backward and e.exposed):
            self.stale += 1
            if self.stale > 64 and self.stale * 2 > len(self.entries):
                self._compact()

    def _compact(self) -> None:
        keep = lambda lst: [e for e in lst if e.alive or e.exposed]  # noqa: E731
        self.entries = keep(self.entries)
        self.wide = keep(self.wide)
        self.cells = {k: v2 for k, v in self.cells.items() if (v2 := keep(v))}
        self.stale = 0


def swept_box(a: Acc, var: int, trip: int, trips: dict[int, int]) -> Box | None:
    """The memory `a` touches over every value of its open counters (None: the whole tensor)."""
    if a.whole:
        return None
    lo, hi = list(a.lo), list(a.hi)
    for d, terms in enumerate(a.coef):
        for v, k in terms:
            span = k * ((trip if v == var else trips.get(v, 1)) - 1)
            lo[d] += min(0, span)
            hi[d] += max(0, span)
    return tuple(lo), tuple(hi)


Weight = Callable[[int, int, Acc, Acc], float | None]


def find_deps(
    accs: list[dict[int, list[Acc]]],
    var: int,
    trip: int,
    trips: dict[int, int],
    weight: Weight,
    fresh: Iterable[int] = (),
) -> list[list[Dep]]:
    """Per item of a block (in program order; `accs[j]` its accesses by tensor), every item it
    waits for: in the same iteration (`lo == 0`, an earlier item) or `lo..hi` iterations back
    (any item, itself included). `weight(x, y, a, b)`: how long after item `x` starts item `y`
    may start when `y`'s access `b` conflicts with `x`'s access `a` (None: once `x` completes,
    which is never sooner than any figure it gives). Tensors in `fresh` are new
    memory each iteration (tiles declared in the loop body): they carry nothing across."""
    fresh = set(fresh)
    grids: dict[int, _Grid] = {}
    index: dict[tuple[int, bool], _TensorIndex] = {}  # (tensor, writes?)
    stamps = itertools.count()
    found: list[dict[tuple[int, int, int], float]] = [{} for _ in accs]

    def edge(x: int, y: int, lo: int, hi: int, w: float | None) -> None:
        key = (x, lo, hi)
        got = math.inf if w is None else w
        if got > found[y].get(key, -1.0):
            found[y][key] = got

    for j, by_tensor in enumerate(accs):
        for tensor, bs in by_tensor.items():
            carried = trip > 1 and tensor not in fresh
            grid = grids.setdefault(tensor, _Grid())
            writes = index.setdefault((tensor, True), _TensorIndex())
            reads = index.setdefault((tensor, False), _TensorIndex())
            cells = [grid.keys(swept_box(b, var, trip, trips)) for b in bs]
            for b, keys in zip(bs, cells, strict=True):
                # a read conflicts with writes only; a write with both
                for idx in (writes, reads) if b.write else (writes,):
                    for e in idx.candidates(keys, next(stamps)):
                        a = e.acc
                        if e.alive:  # j (n) after e's item (n - d), d >= 0
                            d = deltas(a, b, var, trip, trips)
                            if d is not None and (carried or d[0] == 0):
                                edge(e.item, j, d[0], d[1] if carried else 0, weight(e.item, j, a, b))
                        if carried and e.exposed:  # e's item (n) after j (n - d), d >= 1
                            d = deltas(b, a, var, trip, trips)
                            if d is not None and d[1] >= 1:
                                edge(j, e.item, max(1, d[0]), d[1], weight(j, e.item, b, a))
            if carried:  # j after itself, d >= 1 iterations back
                for a in bs:
                    for b in bs:
                        if a.write or b.write:
                            d = deltas(a, b, var, trip, trips)
                            if d is not None and d[1] >= 1:
                                edge(j, j, max(1, d[0]), d[1], weight(j, j, a, b))
            # enter j's accesses: reads first, so that j's own exact writes may cover them
            for b, keys in sorted(zip(bs, cells, strict=True), key=lambda p: p[0].write):
                exposed = carried and not any(
                    e.alive and e.acc.exact and e.item != j and _covers(e.acc, b)
                    for e in writes.candidates(keys, next(stamps))
                )
                if b.exact:
                    for idx in (writes, reads):
                        for e in idx.candidates(keys, next(stamps)):
                            if e.alive and _covers(b, e.acc):
                                idx.retire(e, carried)
                (writes if b.write else reads).add(_Entry(j, b, exposed), keys)
    return [[Dep(x, lo, hi, None if w == math.inf else w) for (x, lo, hi), w in f.items()] for f in found]


__all__ = ["Acc", "Dep", "access", "deltas", "find_deps", "instr_accs", "lift", "swept_box"]
