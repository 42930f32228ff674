"""The dependency and pipelining half of the trn1 cost model: how long one call takes when
instructions wait for their operands, not only for their engine.

Engines run their own instruction streams and synchronise through semaphores: an instruction
starts once every instruction whose result it reads (RAW), whose operand it overwrites (WAR)
or whose result it overwrites (WAW) has finished. Each instruction has an occupancy (how long
it holds its engine: the ISA cost, priced in cost.py) and a latency (how long until a
consumer may start: occupancy plus the fixed costs of a dependent instruction). Per loop body:

- one iteration's critical path `L` is the longest chain of latencies through the body (an
  inner loop counts as one node, its whole pipelined time);
- iterations overlap as a software pipeline with initiation interval
  `II = max(busiest engine or port per iteration, every loop-carried cycle / its distance,
  inner loops' own recurrences, L / iterations the on-chip memory can hold at once)`;
  a cycle is a dependence from iteration i to i+d closed by a chain back inside the body:
  memory written and read again in the next iteration (`nl.sequential_range` carried
  values, tiles reused without a loop index: distance 1) or the physical buffers of a tile
  allocated inside the loop (NKI rotates `loop_buffers` of them: distance `loop_buffers`);
  block-indexed tiles are distinct per iteration and carry nothing;
- the loop takes `max(trip * engines, L + (trip - 1) * II)`.

The kernel body is one such block run once. Accesses are affine in the loop counters, so the
dependence tests are interval tests per dimension (`_deltas`): exact where both accesses move
with the same coefficient, "may overlap" where they do not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

import msgspec

from hardware_agents.neuron.emulator.analysis import loop_order
from hardware_agents.neuron.emulator.program import Access, Instr, Loop, Node, Program

LOOKBACK = 64  # accesses of a tensor an access is tested against


class LoopEstimate(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What the schedule says about one loop (per run of the loop)."""

    line: int  # kernel source line of the loop body's first instruction
    kind: str  # "affine" or "sequential"
    trip: int
    iteration_s: float  # one iteration's critical path
    ii_s: float  # initiation interval: steady-state time between iterations
    engines_ii_s: float  # the busiest engine or port per iteration
    limit: str  # what sets ii: "engines", "carried dependence", "buffers", "inner loop", "on-chip memory"
    in_flight: int = 0  # iterations the on-chip memory holds at once, when fewer than `trip` (else 0)
    total_s: float


class Timing(NamedTuple):
    """One instruction's timing, from the cost model's pricing."""

    occ: dict[str, float]  # seconds it holds each engine or shared port
    lat: float  # seconds from its start until a dependent instruction may start
    pe: bool  # a Tensor Engine instruction (PSUM accumulation pipelines in the engine)


class _Acc(NamedTuple):
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


class _Item(NamedTuple):
    occ: dict[str, float]
    lat: float
    accs: dict[int, list[_Acc]]  # by tensor
    serial: float  # loops: time their rotating buffers are held across runs of the loop
    pe: bool
    loop: bool


def _access(a: Access, prog: Program, write: bool, read: bool, acc: bool, own: float) -> _Acc | None:
    t = prog.tensors[a.tensor]
    if t.buffer in ("input", "const"):
        return None  # read-only: orders nothing
    base = t.alias if t.alias >= 0 else a.tensor
    coef, lo, hi = [], [], []
    for e in list(a.block) + list(a.dims):
        terms: dict[int, int] = {}
        for var, k in e.loops:
            terms[var] = terms.get(var, 0) + k
        low = high = e.c
        for axis, k in e.axes:
            span = k * (a.shape[axis] - 1)
            low, high = low + min(0, span), high + max(0, span)
        coef.append(tuple(sorted((v, k) for v, k in terms.items() if k)))
        lo.append(low)
        hi.append(high)
    return _Acc(base, write, read, acc, tuple(coef), tuple(lo), tuple(hi), whole=t.alias >= 0, own=own)


def _instr_accs(ins: Instr, prog: Program, own: float) -> dict[int, list[_Acc]]:
    out: dict[int, list[_Acc]] = {}
    acc = ins.acc or ins.op == "loop_reduce"
    found = [_access(ins.dst, prog, True, acc, acc, own)] if ins.dst is not None else []
    found += [_access(s, prog, False, True, False, own) for s in ins.srcs]
    for a in found:
        if a is not None:
            out.setdefault(a.tensor, []).append(a)
    return out


def _lift(
    accs: Iterable[_Acc], var: int, trip: int, drop: set[int], scope: dict[int, int]
) -> dict[int, list[_Acc]]:
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
    out: dict[int, list[_Acc]] = {}
    for (tensor, write, read, acc, coef_t, whole, swept), (lo2, hi2, own) in merged.items():
        out.setdefault(tensor, []).append(
            _Acc(tensor, write, read, acc, coef_t, tuple(lo2), tuple(hi2), whole, own, swept)
        )
    return out


def _deltas(x: _Acc, y: _Acc, var: int, trip: int, trips: dict[int, int]) -> tuple[int, int] | None:
    """The iteration distances d in [0, trip-1] at which `y` (d iterations after `x`, same
    values of the outer counters) touches memory `x` touches, as an interval, or None."""
    lo_d, hi_d = 0, trip - 1
    if x.whole or y.whole or len(x.coef) != len(y.coef):
        return lo_d, hi_d
    for cx_t, cy_t, xl, xh, yl, yh in zip(x.coef, y.coef, x.lo, x.hi, y.lo, y.hi, strict=True):
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


class Scheduler:
    """The schedule of one program, given each instruction's `Timing` (keyed by id())."""

    def __init__(
        self,
        prog: Program,
        timing: dict[int, Timing],
        loop_buffers: int,
        footprints: list[dict[str, int] | None],
        capacity: dict[str, int],
    ) -> None:
        self.prog = prog
        self.timing = timing
        self.buffers = max(1, loop_buffers)
        self.capacity = capacity
        # where a tensor was declared matters for on-chip tiles only (a tile declared in a loop body
        # is fresh memory each iteration: the executor allocates it so); HBM keeps its contents
        self.scope = {t.id: t.scope if t.buffer in ("sbuf", "psum") else -1 for t in prog.tensors}
        self.trips = dict(prog.loop_trips)
        self.footprints = footprints
        self.loops: list[LoopEstimate] = []
        self._order: dict[int, int] = {}

    def run(self) -> float:
        """The critical path of one kernel call (seconds); fills `loops`."""
        self._order = {id(n): i for i, n in enumerate(loop_order(self.prog))}
        items = self._items(self.prog.body, None)
        start, _ = self._dag(items, None, 1)
        return max((start[j] + it.lat for j, it in enumerate(items)), default=0.0)

    # --- one block ------------------------------------------------------------------------
    def _items(self, nodes: list[Node], var: int | None) -> list[_Item]:
        out = []
        for n in nodes:
            if isinstance(n, Instr):
                t = self.timing[id(n)]
                out.append(_Item(t.occ, t.lat, _instr_accs(n, self.prog, t.lat), 0.0, t.pe, loop=False))
            elif isinstance(n, Loop):
                out.append(self._loop(n))
        return out

    @staticmethod
    def _weight(x: _Item, y: _Item, a: _Acc, b: _Acc) -> float:
        """How long after `x` starts `y` may start, given that `y`'s access `b` depends on `x`'s
        access `a`: `x`'s latency, with two exceptions. PSUM accumulation into the same bank
        pipelines in the Tensor Engine (its occupancy). Between two loops that both touch the
        memory part by part, each part waits only for its own producer: `y` cannot start before
        `x`'s first part is done, nor end before its last part is (not the whole of `x`)."""
        if x.loop and y.loop and a.swept and b.swept:
            return max(a.own, x.lat - y.lat + b.own)
        if a.acc and b.acc and x.pe and y.pe:
            return x.occ.get("pe", x.lat)
        return x.lat

    def _dag(
        self, items: list[_Item], var: int | None, trip: int
    ) -> tuple[list[float], list[list[tuple[int, float]]]]:
        """Earliest start of each item within one iteration, and the edges into each item. Each
        access is tested against the last `LOOKBACK` accesses of its tensor (an older one's
        dependence is usually implied by a newer one's; a missed one only shortens the path)."""
        edges: list[list[tuple[int, float]]] = [[] for _ in items]
        start = [0.0] * len(items)
        recent: dict[int, list[tuple[int, _Acc]]] = {}
        v = var if var is not None else -1
        for j, y in enumerate(items):
            found: dict[int, float] = {}
            for tensor, ys in y.accs.items():
                for i, a in recent.get(tensor, ()):
                    for b in ys:
                        if not (a.write or b.write):
                            continue
                        d = _deltas(a, b, v, trip, self.trips)
                        if d is None or d[0] > 0:
                            continue
                        w = self._weight(items[i], y, a, b)
                        if w > found.get(i, -1.0):
                            found[i] = w
            for i, w in found.items():
                edges[j].append((i, w))
                start[j] = max(start[j], start[i] + w)
            for tensor, ys in y.accs.items():
                lst = recent.setdefault(tensor, [])
                lst.extend((j, b) for b in ys)
                if len(lst) > LOOKBACK:
                    del lst[: len(lst) - LOOKBACK]
        return start, edges

    def _carried(self, items: list[_Item], var: int, trip: int) -> list[tuple[int, int, float, int, bool]]:
        """Loop-carried dependences: (x, y, weight, distance, through a rotating buffer) for `y`
        in a later iteration depending on `x`; pairs within `LOOKBACK` accesses of a tensor."""
        out = []
        by_tensor: dict[int, list[tuple[int, _Acc]]] = {}
        for j, it in enumerate(items):
            for tensor, lst in it.accs.items():
                by_tensor.setdefault(tensor, []).extend((j, a) for a in lst)
        for tensor, accs in by_tensor.items():
            rotating = self.scope.get(tensor, -1) == var
            if rotating and self.buffers >= trip:
                continue
            for n, (xi, a) in enumerate(accs):
                for yi, b in accs[max(0, n - LOOKBACK) : n + 1]:
                    for (pi, p), (qi, q) in (((xi, a), (yi, b)), ((yi, b), (xi, a))):
                        if not (p.write or q.write):
                            continue
                        d = _deltas(p, q, var, trip, self.trips)
                        if d is None:
                            continue
                        if (
                            rotating
                        ):  # a fresh tile per iteration: its physical buffer returns every `buffers`
                            if d[0] > 0:
                                continue
                            dist = self.buffers
                        elif d[1] < 1:
                            continue
                        else:
                            dist = max(1, d[0])
                        out.append((pi, qi, self._weight(items[pi], items[qi], p, q), dist, rotating))
        return out

    def _longest_from(self, src: int, edges: list[list[tuple[int, float]]]) -> list[float]:
        dist = [-math.inf] * len(edges)
        dist[src] = 0.0
        for j in range(src + 1, len(edges)):
            for i, w in edges[j]:
                if dist[i] > -math.inf:
                    dist[j] = max(dist[j], dist[i] + w)
        return dist

    def _loop(self, loop: Loop) -> _Item:
        items = self._items(loop.body, loop.var)
        trip = loop.trip
        start, edges = self._dag(items, loop.var, trip)
        length = max((start[j] + it.lat for j, it in enumerate(items)), default=0.0)
        occ: dict[str, float] = {}
        for it in items:
            for r, s in it.occ.items():
                occ[r] = occ.get(r, 0.0) + s
        engines = max(occ.values(), default=0.0)
        rec = rec_rotating = 0.0
        if trip > 1:
            paths: dict[int, list[float]] = {}
            for xi, yi, w, dist, rotating in self._carried(items, loop.var, trip):
                if yi not in paths:
                    paths[yi] = self._longest_from(yi, edges)
                back = paths[yi][xi]  # the chain from y back to x closes the cycle
                if back == -math.inf:
                    continue
                cycle = (w + back) / dist
                rec = max(rec, cycle)
                if rotating:
                    rec_rotating = max(rec_rotating, cycle)
        inner = max((it.serial for it in items), default=0.0)
        in_flight = self._in_flight(loop)
        memory = length / in_flight if 0 < in_flight < trip else 0.0
        ii = max(engines, rec, inner, memory)
        total = max(trip * engines, length + (trip - 1) * ii) if items else 0.0
        limit = "engines"
        if ii > engines * (1 + 1e-9):
            limit = max(
                (
                    ("carried dependence" if rec > rec_rotating else "buffers", rec),
                    ("inner loop", inner),
                    ("on-chip memory", memory),
                ),
                key=lambda kv: kv[1],
            )[0]
        self.loops.append(
            LoopEstimate(
                line=_first_line(loop),
                kind=loop.kind,
                trip=trip,
                iteration_s=length,
                ii_s=ii,
                engines_ii_s=engines,
                limit=limit,
                in_flight=in_flight if memory else 0,
                total_s=total,
            )
        )
        drop = {s for s in self.scope.values() if s >= 0 and _declared_under(s, loop)}
        accs = _lift(
            (a for it in items for lst in it.accs.values() for a in lst), loop.var, trip, drop, self.scope
        )
        return _Item(
            {r: s * trip for r, s in occ.items()},
            total,
            accs,
            trip * max(rec_rotating, inner),
            pe=False,
            loop=True,
        )

    def _in_flight(self, loop: Loop) -> int:
        """Iterations whose transient tiles fit the on-chip memory at once (0: unknown). Memory
        held across iterations is not subtracted: the compiler may spill it (priced apart)."""
        idx = self._order.get(id(loop))
        fp = self.footprints[idx] if idx is not None and idx < len(self.footprints) else None
        if not fp:
            return 0
        return min((max(1, self.capacity[buf] // f) for buf, f in fp.items() if f > 0), default=0)


def _first_line(loop: Loop) -> int:
    for n in loop.body:
        if isinstance(n, Instr):
            return n.line
        if isinstance(n, Loop):
            line = _first_line(n)
            if line:
                return line
    return 0


def _declared_under(var: int, loop: Loop) -> bool:
    if var == loop.var:
        return True
    return any(isinstance(n, Loop) and _declared_under(var, n) for n in loop.body)


__all__ = ["LoopEstimate", "Scheduler", "Timing"]
