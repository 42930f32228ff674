"""One pass over every instruction instance of a program (loops unrolled, indices only, no
data): when each on-chip tile (a tensor, or one block of a tensor with block dimensions)
is first and last used. From it: which tiles the executor may free after which
instruction, how much SBUF and PSUM is live at the peak (PSUM that does not fit is a
compile error; SBUF beyond capacity is what the compiler would spill, and the cost model
prices it), the number of instruction instances, and for the cost model's pipelining
limit how much on-chip memory one iteration of each loop holds (`footprints`)."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from hardware_agents.neuron.emulator import dtypes
from hardware_agents.neuron.emulator.errors import NKICompileError
from hardware_agents.neuron.emulator.program import Access, Alloc, Instr, Loop, Node, Program
from hardware_agents.neuron.emulator.validate import PSUM_PARTITION_BYTES, SBUF_PARTITION_BYTES

Key = tuple[int, int, tuple[int, ...]]  # (tensor, allocation instance, block index)

MAX_INSTANCES = 20_000_000


class Analysis:
    def __init__(self) -> None:
        self.first: dict[Key, int] = {}
        self.last: dict[Key, int] = {}
        self.steps = 0
        self.peak_sbuf = 0  # bytes per partition
        self.peak_psum = 0
        self.free_at: dict[int, list[Key]] = {}
        self.per_part: dict[int, int] = {}  # tensor -> bytes per partition of one tile (block)
        self.buffer: dict[int, str] = {}  # tensor -> "sbuf" | "psum"
        # per loop (in `loop_order`): the steps [start, end) of the first iteration of its first run
        self.windows: list[tuple[int, int] | None] = []
        # inside those windows, tiles of tensors declared in a loop, one per iteration of that loop
        # (NKI allocates them afresh each iteration; `first`/`last` keep one key for all of them)
        self.fresh_first: dict[Key, int] = {}
        self.fresh_last: dict[Key, int] = {}


def _block_fn(a: Access) -> Callable[[list[int]], tuple[int, ...]]:
    lins = [(e.c, e.loops) for e in a.block]
    if not lins:
        return lambda env: ()
    if all(not loops for _, loops in lins):
        const = tuple(c for c, _ in lins)
        return lambda env: const
    return lambda env: tuple(c + sum(k * env[v] for v, k in loops) for c, loops in lins)


def analyze(prog: Program, *, check: bool = True) -> Analysis:
    """Liveness of on-chip tiles; raises NKICompileError when PSUM overflows (with `check`).
    Long because its walkers (`plan`, `walk`) fill the liveness tables the rest of it reads."""
    tensors = prog.tensors
    on_chip = {t.id for t in tensors if t.buffer in ("sbuf", "psum") and t.alias < 0}
    per_part = {
        t.id: math.prod(t.shape[t.par_axis + 1 :]) * dtypes.itemsize(t.dtype)
        for t in tensors
        if t.id in on_chip
    }
    res = Analysis()
    inst = {t: 0 for t in on_chip}
    env = [0] * (max(prog.loop_trips, default=-1) + 1)
    plans: dict[int, list[tuple[int, Callable[[list[int]], tuple[int, ...]]]]] = {}

    def plan(ins: Instr) -> list[tuple[int, Callable[[list[int]], tuple[int, ...]]]]:
        p = plans.get(id(ins))
        if p is None:
            accs = ([ins.dst] if ins.dst is not None else []) + list(ins.srcs)
            p = [(a.tensor, _block_fn(a)) for a in accs if a.tensor in on_chip]
            plans[id(ins)] = p
        return p

    first, last = res.first, res.last
    order = {id(n): i for i, n in enumerate(loop_order(prog))}
    res.windows = [None] * len(order)
    scoped = {t.id: t.scope for t in tensors if t.id in on_chip and t.scope >= 0}
    fresh = dict.fromkeys(prog.loop_trips, 0)  # iterations started, per loop
    recording = [0]  # inside a first-iteration window

    def walk(nodes: list[Node]) -> None:
        for n in nodes:
            if isinstance(n, Instr):
                step = res.steps
                for tid, fn in plan(n):
                    key = (tid, inst[tid], fn(env))
                    if key not in first:
                        first[key] = step
                    last[key] = step
                    if recording[0] and tid in scoped:
                        fkey = (tid, fresh[scoped[tid]], key[2])
                        res.fresh_first.setdefault(fkey, step)
                        res.fresh_last[fkey] = step
                res.steps += 1
                if res.steps > MAX_INSTANCES:
                    raise NKICompileError(
                        "err_program_too_large", f"the kernel executes more than {MAX_INSTANCES} instructions"
                    )
            elif isinstance(n, Loop):
                li = order[id(n)]
                for k in range(n.trip):
                    env[n.var] = k
                    fresh[n.var] += 1
                    window = k == 0 and res.windows[li] is None
                    start = res.steps
                    recording[0] += window
                    walk(n.body)
                    recording[0] -= window
                    if window:
                        res.windows[li] = (start, res.steps)
                env[n.var] = 0
            elif isinstance(n, Alloc) and n.tensor in on_chip:
                inst[n.tensor] += 1

    walk(prog.body)
    res.per_part = per_part
    res.buffer = {t.id: t.buffer for t in tensors if t.id in on_chip}
    events: dict[str, list[tuple[int, int]]] = {"sbuf": [], "psum": []}
    for key, s in first.items():
        e = last[key]
        res.free_at.setdefault(e, []).append(key)
        buf = tensors[key[0]].buffer
        events[buf].append((s, per_part[key[0]]))
        events[buf].append((e + 1, -per_part[key[0]]))
    for buf, ev in events.items():
        ev.sort(key=lambda x: (x[0], x[1]))
        live = peak = 0
        for _, b in ev:
            live += b
            peak = max(peak, live)
        if buf == "sbuf":
            res.peak_sbuf = peak
        else:
            res.peak_psum = peak
    if check and res.peak_psum > PSUM_PARTITION_BYTES:
        raise NKICompileError(
            "err_out_of_memory",
            f"PSUM overflow: the PSUM tiles live at the same time need {res.peak_psum} bytes per partition, a PSUM "
            f"partition has {PSUM_PARTITION_BYTES} bytes (8 banks of 2 KiB); copy results out of PSUM sooner",
        )
    return res


def loop_order(prog: Program) -> list[Loop]:
    """Every loop of the program in preorder: the index both the analysis and the cost model
    key loops by."""
    out: list[Loop] = []

    def walk(nodes: list[Node]) -> None:
        for n in nodes:
            if isinstance(n, Loop):
                out.append(n)
                walk(n.body)

    walk(prog.body)
    return out


def footprints(res: Analysis, prog: Program) -> list[dict[str, int] | None]:
    """Per loop (in `loop_order`), the SBUF and PSUM bytes per partition one iteration needs for
    itself: at most live at once among the tiles its first iteration allocates and frees
    (a tensor declared in a loop is a fresh tile per iteration of that loop). None for a loop
    that never ran."""
    scope = {t.id: t.scope for t in prog.tensors}
    born = {k: v for k, v in res.first.items() if scope[k[0]] < 0}  # tensors declared outside loops
    lasts = {k: res.last[k] for k in born}
    born.update(res.fresh_first)
    lasts.update(res.fresh_last)
    keys = sorted(born, key=lambda k: born[k])
    firsts = [born[k] for k in keys]
    out: list[dict[str, int] | None] = []
    for window in res.windows:
        if window is None:
            out.append(None)
            continue
        a, b = window
        ev: dict[str, list[tuple[int, int]]] = {"sbuf": [], "psum": []}
        for key in keys[bisect.bisect_left(firsts, a) : bisect.bisect_left(firsts, b)]:
            size, buf, end = res.per_part[key[0]], res.buffer[key[0]], lasts[key]
            if end < b:
                ev[buf] += [(born[key], size), (end + 1, -size)]
        fp = {}
        for buf, events in ev.items():
            events.sort()
            live = peak = 0
            for _, d in events:
                live += d
                peak = max(peak, live)
            fp[buf] = peak
        out.append(fp)
    return out


def sbuf_spill_bytes(res: Analysis, partitions: int = 128) -> int:
    """Bytes the compiler would have to spill to HBM and reload, as cost model 1 counted them:
    the live SBUF above its capacity at the peak, saved once and reloaded once."""
    over = max(0, res.peak_sbuf - SBUF_PARTITION_BYTES)
    return 2 * over * partitions


def sbuf_spill_episode_bytes(res: Analysis, partitions: int = 128) -> int:
    """Bytes that must be spilled and reloaded, episode by episode: every stretch of the program
    (in order) where the live SBUF exceeds its capacity forces its peak excess out to HBM and
    back. Tiles that were also live at the previous episode's peak may have been evicted then
    and stay out, so they are not counted twice. At least `sbuf_spill_bytes`."""
    keys = [k for k in res.first if res.buffer[k[0]] == "sbuf"]
    if not keys:
        return 0
    first = np.array([res.first[k] for k in keys], dtype=np.int64)
    last = np.array([res.last[k] for k in keys], dtype=np.int64)
    size = np.array([res.per_part[k[0]] for k in keys], dtype=np.int64)
    steps = np.concatenate([first, last + 1])
    deltas = np.concatenate([size, -size])
    order = np.lexsort((deltas, steps))
    steps, live = steps[order], np.cumsum(deltas[order])
    # the live bytes after the last event of each step
    ends = np.append(np.nonzero(np.diff(steps))[0], len(steps) - 1)
    steps, live = steps[ends], live[ends]
    over = live > SBUF_PARTITION_BYTES
    total = 0
    prev_peak = -1
    i, n = 0, len(live)
    while i < n:
        if not over[i]:
            i += 1
            continue
        j = i
        while j < n and over[j]:
            j += 1
        k = i + int(np.argmax(live[i:j]))
        peak_step, excess = int(steps[k]), int(live[k]) - SBUF_PARTITION_BYTES
        if prev_peak >= 0:  # already out since the previous episode
            kept = int(size[(first <= prev_peak) & (last >= peak_step)].sum())
            excess = max(0, excess - kept)
        total += excess
        prev_peak = peak_step
        i = j
    return 2 * total * partitions


def describe(res: Analysis) -> dict[str, Any]:
    return {
        "instructions": res.steps,
        "peak_sbuf_bytes_per_partition": res.peak_sbuf,
        "peak_psum_bytes_per_partition": res.peak_psum,
    }


__all__ = [
    "Analysis",
    "analyze",
    "describe",
    "footprints",
    "loop_order",
    "sbuf_spill_bytes",
    "sbuf_spill_episode_bytes",
]
