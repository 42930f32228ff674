"""What an instruction holds besides its operands, for the schedule (schedule.py): engine and
port time (`Timelines`) and on-chip memory (`Memory`).

Engines, shared ports and the DMA queues' common bandwidth are capacities: an instruction,
placed in program order, takes the free time of every resource it holds from the time its
operands are ready on, until it has had its occupancy of each, pausing while earlier-placed work
holds them (`Timelines.best`). For the DMA bandwidth that is what transfers do (they share the
16 queues). For an engine it is a relaxation: the compiler orders each engine's stream and may
interleave the next iteration's instructions between this one's, which a placement in program
order that waited for a gap as long as the whole instruction would not (it left gaps no later
instruction fits, and priced a pipelined loop as if its iterations barely overlapped); taking
the free time piecewise lets the engines' time, not the order of placement, set the pace, as
a lower bound should.

On-chip memory, per block (a loop body, whose tiles are fresh each iteration, or the kernel
body): a tile takes its bytes per partition from the start of its first access until its last
access completes. When a tile is allocated (its first access), the block's tiles live at that
point of the program (allocated before it, last used after it) take their bytes, and the tiles
already dead in program order take theirs until they are released: the new tile waits until it
fits beside both. Where the live tiles alone leave no room, the compiler spills (priced apart,
`analysis.sbuf_spill_episode_bytes`) and the new tile waits for every dead tile to be released.
Memory the blocks around a loop hold while it runs is not subtracted from the loop's: the
compiler may spill it (priced apart), as model 2 did.
"""

from __future__ import annotations

import bisect
import math

_EPS = 1e-15  # seconds: interval ends closer than this touch


class Timeline:
    """One resource's busy intervals: sorted, disjoint, merged where they touch."""

    __slots__ = ("ends", "starts")

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []

    def busy_until(self, t: float) -> float | None:
        """The end of the busy interval `t` falls in, if it falls in one."""
        i = bisect.bisect_right(self.ends, t + _EPS)
        if i < len(self.starts) and self.starts[i] <= t + _EPS:
            return self.ends[i]
        return None

    def free_until(self, t: float) -> float:
        """The start of the next busy interval after `t` (a free `t`)."""
        i = bisect.bisect_right(self.ends, t + _EPS)
        return self.starts[i] if i < len(self.starts) else math.inf

    def reserve(self, t: float, d: float) -> None:
        e = t + d
        i = bisect.bisect_left(self.starts, t)
        if i > 0 and self.ends[i - 1] >= t - _EPS:  # touches the previous interval
            i -= 1
            t = self.starts[i]
            e = max(e, self.ends[i])
            del self.starts[i], self.ends[i]
        if i < len(self.starts) and self.starts[i] <= e + _EPS:  # touches the next one
            e = max(e, self.ends[i])
            del self.starts[i], self.ends[i]
        self.starts.insert(i, t)
        self.ends.insert(i, e)


Alt = tuple[dict[str, float], float]  # (seconds held per resource, latency)


class Timelines:
    """Every resource's timeline; `best` books an instruction on the engine that suits it best."""

    def __init__(self) -> None:
        self.lines: dict[str, Timeline] = {}

    def _fill(
        self, occ: dict[str, float], ready: float
    ) -> tuple[list[tuple[str, float, float]], float, float]:
        """The free time from `ready` on, on all of `occ`'s resources at once, that adds up to
        what each holds: (pieces, first start, last end)."""
        left = {r: d for r, d in occ.items() if d > _EPS}
        lines = {r: self.lines.setdefault(r, Timeline()) for r in left}
        pieces: list[tuple[str, float, float]] = []
        p, first = ready, None
        while left:
            moved = True
            while moved:  # to where every resource still needed is free
                moved = False
                for r in left:
                    end = lines[r].busy_until(p)
                    if end is not None and end > p:
                        p, moved = end, True
            take = min(min(left.values()), min(lines[r].free_until(p) for r in left) - p)
            first = p if first is None else first
            for r in left:
                pieces.append((r, p, take))
                left[r] -= take
            p += take
            left = {r: d for r, d in left.items() if d > _EPS}
        return pieces, ready if first is None else first, p

    def best(self, alts: tuple[Alt, ...], ready: float) -> tuple[dict[str, float], float, float]:
        """Of an instruction's engines, the one on which it completes soonest (the first of
        equals); books it and returns (occ, latency, start), the latency stretched by the pauses
        its work took (it completes `latency` after its start, or its last share of work plus
        what the latency adds to the work, if later)."""
        pick: tuple[float, float, Alt, list[tuple[str, float, float]]] | None = None
        for alt in alts:
            occ, lat = alt
            pieces, start, last = self._fill(occ, ready)
            done = max(start + lat, last + max(0.0, lat - max(occ.values(), default=0.0)))
            if pick is None or done < pick[1] - _EPS:
                pick = (start, done, alt, pieces)
        assert pick is not None, "an instruction without an engine"
        start, done, (occ, _), pieces = pick
        for r, t, d in pieces:
            self.lines[r].reserve(t, d)
        return occ, done - start, start


class Memory:
    """One block's on-chip memory per buffer: the bytes per partition of its tiles still live in
    program order, and its dead tiles not known to be released at every time still asked
    about, as (release time, bytes) by time."""

    def __init__(self, capacity: dict[str, int]) -> None:
        self.capacity = capacity
        self.live = dict.fromkeys(capacity, 0)
        self.release: dict[str, list[float]] = {b: [] for b in capacity}
        self.size: dict[str, list[int]] = {b: [] for b in capacity}
        self.below: dict[str, list[int]] = {b: [0] for b in capacity}  # prefix sums of `size`

    def ready(self, need: dict[str, int], t: float) -> float:
        """The earliest time at or after `t` when `need` bytes fit beside the live tiles and the
        dead tiles not yet released. Where the live tiles and `need` alone overflow the buffer,
        the compiler spills (priced apart) and the new tile waits for every dead one."""
        for buf, n in need.items():
            cap = self.capacity.get(buf)
            if not n or cap is None or not self.release[buf]:
                continue
            below = self.below[buf]
            room = cap - min(cap, self.live[buf] + n)  # for dead tiles not yet released
            # the lowest k such that the tiles from k up fit in `room`: tile k - 1 must be released
            k = bisect.bisect_left(below, below[-1] - room)
            if k > 0:
                t = max(t, self.release[buf][k - 1])
        return t

    def take(self, buf: str, size: int) -> None:
        """A tile of `size` bytes is allocated (live from here on in program order)."""
        if buf in self.live:
            self.live[buf] += size

    def dead(self, buf: str, size: int, at: float) -> None:
        """A tile of `size` bytes is dead from here on in program order; released at `at`."""
        if buf not in self.capacity or size <= 0:
            return
        self.live[buf] -= size
        rel, sizes, below = self.release[buf], self.size[buf], self.below[buf]
        i = bisect.bisect_right(rel, at)
        rel.insert(i, at)
        sizes.insert(i, size)
        if i == len(sizes) - 1:
            below.append(below[-1] + size)
        else:
            del below[i + 1 :]
            for s in sizes[i:]:
                below.append(below[-1] + s)
        self._prune(buf)

    def _prune(self, buf: str) -> None:
        """Drop tiles below a buffer's worth of later releases: no question reaches them."""
        rel, sizes, below = self.release[buf], self.size[buf], self.below[buf]
        if len(rel) < 64:
            return
        # tiles 0..k-1 have more than the capacity released after them
        k = bisect.bisect_left(below, below[-1] - self.capacity[buf]) - 1
        if k > len(rel) // 2:
            del rel[:k], sizes[:k]
            base = [0]
            for s in sizes:
                base.append(base[-1] + s)
            self.below[buf] = base


__all__ = ["Memory", "Timeline", "Timelines"]
