"""The dependency and pipelining half of the trn1 cost model: how long one call takes when
instructions wait for their operands, their engines and on-chip memory.

Engines run their own instruction streams and synchronise through semaphores: an instruction
starts once every instruction whose result it reads (RAW), whose operand it overwrites (WAR)
or whose result it overwrites (WAW) has finished (`deps.py`: exact, every pair tested), once
its engine (and port) is free for as long as it holds it, and once its new tiles fit in
on-chip memory beside the dead tiles not yet released (`resources.py`). Each instruction has
an occupancy (how long it holds its engine: the ISA cost, priced in cost.py) and a latency
(how long until a consumer may start: occupancy plus the fixed costs of a dependent
instruction).

One rule for every block, whatever its spelling: a block's items (instructions, and inner
loops as single items) are list-scheduled in program order, and a loop is that list schedule
run over its iterations one after another, as if unrolled: iteration `n` of an item waits for
the items it depends on in iteration `n` and, for loop-carried dependences (memory written in
one iteration and read or overwritten in a later one), in iterations `n - d`. So a loop, its
unrolled straight-line copy, a Python loop in a helper function and `nl.static_range` are
the same program to the schedule and get the same figure; iterations overlap exactly as far as
their dependences, engines and memory allow, and no further whatever the loop is called.

- A tile declared in a loop body is fresh memory each iteration (the executor allocates it so);
  it takes memory from its first access to its last, so iterations overlap only as far as their
  tiles fit (`loop_buffers > 0` instead caps a tile at that many physical buffers, the old
  double-buffering reading; 0, the default, lets the on-chip memory decide);
- an inner loop is one item: its latency is its whole scheduled time, its engines are counted
  in the enclosing loop's bound (`trip x busiest engine per iteration`) but not booked on the
  engines' timelines (its work is spread over its run), and it holds the most memory its own
  tiles took at once;
- a loop longer than `SIMULATED` item placements is scheduled for as many iterations as fit
  and extrapolated at the steady rate of the last half of those.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import msgspec

from hardware_agents.neuron.emulator import dtypes
from hardware_agents.neuron.emulator.deps import Acc, Dep, find_deps, instr_accs, lift
from hardware_agents.neuron.emulator.program import Instr, Loop, Node, Program
from hardware_agents.neuron.emulator.resources import Memory, Timelines

SIMULATED = 4096  # item placements per loop schedule; longer loops extrapolate their steady state


class LoopEstimate(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What the schedule says about one loop (per run of the loop)."""

    line: int  # kernel source line of the loop body's first instruction
    kind: str  # "affine" or "sequential"
    trip: int
    iteration_s: float  # one iteration's critical path
    ii_s: float  # initiation interval: steady-state time between iterations
    engines_ii_s: float  # the busiest engine or port per iteration
    limit: str  # what sets ii: "engines", "carried dependence", "buffers", "on-chip memory"
    in_flight: int = 0  # iterations the on-chip memory holds at once, when fewer than `trip` (else 0)
    total_s: float


class Timing(NamedTuple):
    """One instruction's timing, from the cost model's pricing."""

    occ: dict[str, float]  # seconds it holds each engine or shared port
    lat: float  # seconds from its start until a dependent instruction may start
    pe: bool  # a Tensor Engine instruction (PSUM accumulation pipelines in the engine)
    # every engine it may run on, as (occ, lat), the cheapest first; the schedule takes, per
    # instance, the one that completes soonest (empty: `occ`, `lat` only)
    alts: tuple[tuple[dict[str, float], float], ...] = ()


class _Item(NamedTuple):
    occ: dict[str, float]
    lat: float
    accs: dict[int, list[Acc]]  # by tensor
    pe: bool
    loop: bool
    mem: dict[str, int]  # loops: the most on-chip memory their own tiles take at once
    alts: tuple[tuple[dict[str, float], float], ...] = ()


class _Run(NamedTuple):
    """A block's schedule: its length, its first iteration's, and what held it up."""

    total: float
    first: float
    per_iteration: dict[str, float]  # engine and port time per iteration (inner loops' included)
    peak: dict[str, int]
    in_flight: int
    delays: dict[str, float]


_LIMITS = ("carried dependence", "buffers", "on-chip memory", "engines")


class Scheduler:
    """The schedule of one program, given each instruction's `Timing` (keyed by id())."""

    def __init__(
        self, prog: Program, timing: dict[int, Timing], loop_buffers: int, capacity: dict[str, int]
    ) -> None:
        self.prog = prog
        self.timing = timing
        self.buffers = max(0, loop_buffers)
        self.capacity = capacity
        # where a tensor was declared matters for on-chip tiles only (a tile declared in a loop body
        # is fresh memory each iteration: the executor allocates it so); HBM keeps its contents
        self.scope = {t.id: t.scope if t.buffer in ("sbuf", "psum") else -1 for t in prog.tensors}
        self.bytes = {
            t.id: (
                t.buffer,
                math.prod(t.shape[: t.par_axis])
                * math.prod(t.shape[t.par_axis + 1 :])
                * dtypes.itemsize(t.dtype),
            )
            for t in prog.tensors
            if t.buffer in ("sbuf", "psum") and t.alias < 0
        }
        self.trips = dict(prog.loop_trips)
        self.loops: list[LoopEstimate] = []

    def run(self) -> float:
        """The critical path of one kernel call (seconds); fills `loops`."""
        return self._schedule(self._items(self.prog.body, -1), -1, 1).total

    # --- one block ------------------------------------------------------------------------
    def _items(self, nodes: list[Node], var: int) -> list[_Item]:
        out = []
        for n in nodes:
            if isinstance(n, Instr):
                t = self.timing[id(n)]
                alts = t.alts or ((t.occ, t.lat),)
                out.append(_Item(t.occ, t.lat, instr_accs(n, self.prog, t.lat), t.pe, False, {}, alts))
            elif isinstance(n, Loop):
                out.append(self._loop(n))
        return out

    @staticmethod
    def _weight(x: _Item, y: _Item, a: Acc, b: Acc) -> float | None:
        """How long after `x` starts `y` may start, given that `y`'s access `b` depends on `x`'s
        access `a`: `x`'s latency (None: on whichever engine it ran), with two exceptions. PSUM
        accumulation into the same bank pipelines in the Tensor Engine (its occupancy). Between
        two loops that both touch the memory part by part, each part waits only for its own
        producer: `y` cannot start before `x`'s first part is done, nor end before its last part
        is (not the whole of `x`)."""
        if x.loop and y.loop and a.swept and b.swept:
            return max(a.own, x.lat - y.lat + b.own)
        if a.acc and b.acc and x.pe and y.pe:
            return x.occ.get("pe", x.lat)
        return None

    def _tiles(
        self, items: list[_Item], var: int
    ) -> tuple[list[dict[str, int]], list[list[tuple[str, int]]]]:
        """Per item, the memory it allocates (the tiles of this block it touches first, and a
        loop's own) and the memory that is dead once it is done (tiles it touches last)."""
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for j, it in enumerate(items):
            for tensor in it.accs:
                if tensor in self.bytes and self.scope.get(tensor, -1) == var:
                    first.setdefault(tensor, j)
                    last[tensor] = j
        alloc: list[dict[str, int]] = [dict(it.mem) for it in items]
        dead: list[list[tuple[str, int]]] = [list(it.mem.items()) for it in items]
        for tensor, j in first.items():
            buf, size = self.bytes[tensor]
            alloc[j][buf] = alloc[j].get(buf, 0) + size
            dead[last[tensor]].append((buf, size))
        return alloc, dead

    def _rotating(self, items: list[_Item], var: int, trip: int) -> list[list[Dep]]:
        """With `loop_buffers` set: a tile declared in the loop body reuses the physical buffer of
        `loop_buffers` iterations back; its first access waits for every access of that one."""
        out: list[list[Dep]] = [[] for _ in items]
        b = self.buffers
        if not b or trip <= b:
            return out
        users: dict[int, list[int]] = {}
        for j, it in enumerate(items):
            for tensor in it.accs:
                if self.scope.get(tensor, -1) == var >= 0:
                    users.setdefault(tensor, []).append(j)
        for js in users.values():
            out[js[0]] += [Dep(x, b, b, items[x].lat) for x in js]
        return out

    def _schedule(self, items: list[_Item], var: int, trip: int) -> _Run:
        """List-schedule `trip` iterations of `items` (see the module doc). Long because one
        loop places every item instance and keeps the figures the loop's record reports."""
        n_items = len(items)
        if not n_items:
            return _Run(0.0, 0.0, {}, {}, 0, {})
        deps = find_deps(
            [it.accs for it in items],
            var,
            trip,
            self.trips,
            lambda i, j, a, b: self._weight(items[i], items[j], a, b),
            fresh=[t for t in self.bytes if self.scope.get(t) == var >= 0],
        )
        rotating = self._rotating(items, var, trip)
        alloc, dead = self._tiles(items, var)
        sim = min(trip, max(8, SIMULATED // n_items))
        lines, memory = Timelines(), Memory(self.capacity)
        # per item and iteration: the latest start and the latest completion up to that iteration
        begun = [[0.0] * sim for _ in items]
        done_by = [[0.0] * sim for _ in items]
        it_start, it_end = [math.inf] * sim, [0.0] * sim
        events: list[tuple[float, int, str]] = []
        booked: dict[str, float] = {}
        delays = dict.fromkeys(_LIMITS, 0.0)
        for n in range(sim):
            for j, it in enumerate(items):
                same = carried = rot = 0.0
                for src, lo, _hi, w in deps[j]:
                    if lo <= n:
                        at = done_by[src][n - lo] if w is None else begun[src][n - lo] + w
                        if lo == 0:
                            same = max(same, at)
                        else:
                            carried = max(carried, at)
                for src, lo, _hi, _w in rotating[j]:
                    if lo <= n:
                        rot = max(rot, done_by[src][n - lo])
                ready = max(same, carried, rot)
                fits = memory.ready(alloc[j], ready) if alloc[j] else ready
                if it.loop:
                    t, end = fits, fits + it.lat
                else:
                    occ, lat, t = lines.best(it.alts, fits)
                    end = t + lat
                    for res, d in occ.items():
                        booked[res] = booked.get(res, 0.0) + d
                if n:
                    delays["carried dependence"] += max(0.0, carried - max(same, rot))
                    delays["buffers"] += max(0.0, rot - max(same, carried))
                    delays["on-chip memory"] += fits - ready
                    delays["engines"] += t - fits
                begun[j][n] = max(t, begun[j][n - 1]) if n else t
                done_by[j][n] = max(end, done_by[j][n - 1]) if n else end
                it_start[n] = min(it_start[n], t)
                it_end[n] = max(it_end[n], end)
                for buf, size in alloc[j].items():
                    memory.take(buf, size)
                    events.append((t, size, buf))
                for buf, size in dead[j]:
                    memory.dead(buf, size, end)
                    events.append((end, -size, buf))
        done = [0.0] * (sim + 1)  # done[k]: when iterations 0..k-1 are all complete
        for n in range(sim):
            done[n + 1] = max(done[n], it_end[n])
        total = done[sim]
        if sim < trip:
            half = sim // 2
            total += (trip - sim) * (done[sim] - done[half]) / (sim - half)
        # the engines' bound: what the schedule booked per iteration, and what inner loops hold
        per_it = {res: d / sim for res, d in booked.items()}
        for it in items:
            if it.loop:
                for res, d in it.occ.items():
                    per_it[res] = per_it.get(res, 0.0) + d
        if var >= 0:  # a loop: inner loops' engine time is not on the timelines
            total = max(total, trip * max(per_it.values(), default=0.0))
        first = it_end[0] - it_start[0]
        return _Run(total, first, per_it, _peak(events), _overlap(it_start, it_end), delays)

    def _loop(self, loop: Loop) -> _Item:
        items = self._items(loop.body, loop.var)
        trip = loop.trip
        run = self._schedule(items, loop.var, trip)
        engines, total = max(run.per_iteration.values(), default=0.0), run.total
        ii = (total - run.first) / (trip - 1) if trip > 1 else engines
        limit = "engines"
        if ii > engines * (1 + 1e-9) and trip > 1:
            limit = max(_LIMITS, key=lambda k: run.delays.get(k, 0.0))
        self.loops.append(
            LoopEstimate(
                line=_first_line(loop),
                kind=loop.kind,
                trip=trip,
                iteration_s=run.first,
                ii_s=ii,
                engines_ii_s=engines,
                limit=limit,
                in_flight=run.in_flight if limit == "on-chip memory" and run.in_flight < trip else 0,
                total_s=total,
            )
        )
        drop = {s for s in self.scope.values() if s >= 0 and _declared_under(s, loop)}
        accs = lift(
            (a for it in items for lst in it.accs.values() for a in lst), loop.var, trip, drop, self.scope
        )
        occ = {r: s * trip for r, s in run.per_iteration.items()}
        return _Item(occ, total, accs, pe=False, loop=True, mem=run.peak)


def _peak(events: list[tuple[float, int, str]]) -> dict[str, int]:
    """The most bytes per partition live at once, per buffer (a release before an allocation
    at the same time)."""
    live: dict[str, int] = {}
    peak: dict[str, int] = {}
    for _, size, buf in sorted(events):
        live[buf] = live.get(buf, 0) + size
        peak[buf] = max(peak.get(buf, 0), live[buf])
    return peak


def _overlap(starts: list[float], ends: list[float]) -> int:
    """The most iterations running at once (of those scheduled)."""
    most = 0
    for n, s in enumerate(starts):
        most = max(most, 1 + sum(1 for m in range(max(0, n - 64), n) if ends[m] > s + 1e-15))
    return most


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


__all__ = ["SIMULATED", "LoopEstimate", "Scheduler", "Timing"]
