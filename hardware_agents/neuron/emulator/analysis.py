"""One pass over every instruction instance of a program (loops unrolled, indices only, no
data): when each on-chip tile (a tensor, or one block of a tensor with block dimensions)
is first and last used. From it: which tiles the executor may free after which
instruction, how much SBUF and PSUM is live at the peak (PSUM that does not fit is a
compile error; SBUF beyond capacity is what the compiler would spill, and the cost model
prices it), and the number of instruction instances."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

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


def _block_fn(a: Access) -> Callable[[list[int]], tuple[int, ...]]:
    lins = [(e.c, e.loops) for e in a.block]
    if not lins:
        return lambda env: ()
    if all(not loops for _, loops in lins):
        const = tuple(c for c, _ in lins)
        return lambda env: const
    return lambda env: tuple(c + sum(k * env[v] for v, k in loops) for c, loops in lins)


def analyze(prog: Program, *, check: bool = True) -> Analysis:
    """Liveness of on-chip tiles; raises NKICompileError when PSUM overflows (with `check`)."""
    tensors = prog.tensors
    on_chip = {t.id for t in tensors if t.buffer in ("sbuf", "psum") and t.alias < 0}
    per_part = {t.id: math.prod(t.shape[t.par_axis + 1:]) * dtypes.itemsize(t.dtype) for t in tensors if t.id in on_chip}
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

    def walk(nodes: list[Node]) -> None:
        for n in nodes:
            if isinstance(n, Instr):
                step = res.steps
                for tid, fn in plan(n):
                    key = (tid, inst[tid], fn(env))
                    if key not in first:
                        first[key] = step
                    last[key] = step
                res.steps += 1
                if res.steps > MAX_INSTANCES:
                    raise NKICompileError("err_program_too_large",
                                          f"the kernel executes more than {MAX_INSTANCES} instructions")
            elif isinstance(n, Loop):
                for k in range(n.trip):
                    env[n.var] = k
                    walk(n.body)
                env[n.var] = 0
            elif isinstance(n, Alloc) and n.tensor in on_chip:
                inst[n.tensor] += 1

    walk(prog.body)
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
            f"partition has {PSUM_PARTITION_BYTES} bytes (8 banks of 2 KiB); copy results out of PSUM sooner")
    return res


def sbuf_spill_bytes(res: Analysis, partitions: int = 128) -> int:
    """Bytes the compiler would have to spill to HBM and reload: the live SBUF above its
    capacity at the peak, saved once and reloaded once."""
    over = max(0, res.peak_sbuf - SBUF_PARTITION_BYTES)
    return 2 * over * partitions


def describe(res: Analysis) -> dict[str, Any]:
    return {"instructions": res.steps, "peak_sbuf_bytes_per_partition": res.peak_sbuf,
            "peak_psum_bytes_per_partition": res.peak_psum}


__all__ = ["Analysis", "analyze", "describe", "sbuf_spill_bytes"]
