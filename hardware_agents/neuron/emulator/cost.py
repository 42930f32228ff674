"""The trn1 cost model: an estimated latency for a compiled program, never a measurement.

Per instruction, the engine cycles of the NKI ISA reference's "estimated instruction cost"
formulas (nki.isa API docs) at the engine clocks of the Trainium architecture guide; DMA time
from the DMA engines' published bandwidth with a per-descriptor and a per-transfer overhead,
bounded by HBM bandwidth. That is each instruction's occupancy of its engine; summed per engine
(instructions the compiler may place on several engines go to the least loaded one) they give
the perfect-overlap bound of cost model 1:

    resource = max(PE, ACT, DVE, POOL, DVE(SBUF) + POOL, DVE(PSUM) + ACT(PSUM), DMA)

(VectorE and GpSimdE share SBUF's port, VectorE and ScalarE PSUM's.) SBUF live beyond its
24 MiB is spilled to HBM and reloaded (DMA), once per stretch of the program that overflows.
Model 2 adds what perfect overlap ignores (schedule.py): an instruction waits for the
instructions producing its operands, plus the fixed costs of a dependent instruction
(`latency`) and for its engine, so one loop iteration is a chain across engines; iterations
overlap only as far as loop-carried dependences, the engines and the on-chip memory allow,
a loop scheduled as its unrolled iterations would be (one rule whatever the loop's spelling).
The estimate is

    T = max(resource, critical path of the pipelined schedule) + DMA fill/drain

Every assumption, with its source, is listed in docs/neuron.md ("The trn1 cost model"). Not
fitted to measured kernel latencies.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from hardware_agents.neuron.emulator import dtypes
from hardware_agents.neuron.emulator.analysis import (
    Analysis,
    analyze,
    sbuf_spill_bytes,
    sbuf_spill_episode_bytes,
)
from hardware_agents.neuron.emulator.program import Access, Instr, Loop, Node, Program
from hardware_agents.neuron.emulator.schedule import LoopEstimate, Scheduler, Timing
from hardware_agents.neuron.emulator.validate import onezero_claims

MODEL = "accelopt-trn1-cost-model/3"
SBUF_PORT = "dve+pool (SBUF port)"
PSUM_PORT = "dve+act (PSUM port)"


class CostSpec(msgspec.Struct, frozen=True, kw_only=True):
    """Published per-NeuronCore characteristics the model prices with (see the module doc)."""

    name: str
    pe_hz: float  # Tensor Engine clock
    act_hz: float  # Scalar Engine
    dve_hz: float  # Vector Engine
    pool_hz: float  # GpSimd Engine
    min_ii: int = 64  # minimum instruction initiation interval (cycles) of ACT/DVE/POOL instructions
    mm_init: int = 64  # Tensor Engine: min(64, N_stationary) in the nc_matmul cost
    fp32_pe_factor: int = 4  # fp32 matmuls cost 4x (2x with a one/zero operand)
    dma_engines: int = 16
    dma_engine_bw: float = 27.2e9  # bytes/s per DMA engine
    hbm_bw: float = 410 * 2**30  # bytes/s per NeuronCore (half of the chip's 820 GiB/s)
    dma_descriptor_bytes: int = 512  # per-descriptor overhead, in bytes of transfer time
    hbm_burst_bytes: int = 64  # the smallest HBM access
    dma_latency_s: float = 1.3e-6  # trigger-to-start of one DMA (fill and drain of the pipeline)
    stride_penalty_bytes: int = 16  # minor-dimension stride beyond which SBUF/PSUM streaming halves
    sbuf_partition_bytes: int = 192 * 1024
    # model 2: what a dependent instruction waits for, and how far iterations overlap
    dma_transfer_s: float = 136e-9  # fixed DMA engine time per transfer (one per engine a DMA uses)
    dma_partitions_per_engine: int = 8  # SBUF partitions one DMA engine serves (128 / 16)
    dependent_cycles: int = 100  # static overhead of an instruction that waits on the previous one's output
    access_cycles: int = 60  # initiating an SBUF/PSUM tensor access
    pe_depth_cycles: int = 128  # rows of the systolic array a matmul's results drain through
    # physical buffers of a tile allocated inside a loop: 0, as many as the on-chip memory holds
    # (what an unrolled copy of the loop gets); N caps them at N (2: double buffering)
    loop_buffers: int = 0
    sbuf_usable_bytes: int = (192 - 16) * 1024  # per partition, less the compiler's reserve
    psum_partition_bytes: int = 16 * 1024
    dependencies: bool = True  # False: model 1's perfect overlap (for comparisons)
    spill_episodes: bool = True  # False: model 1's spill, once at the peak


TRN1_COST = CostSpec(name="trn1 (NeuronCore-v2)", pe_hz=2.8e9, act_hz=1.4e9, dve_hz=1.12e9, pool_hz=1.4e9)
# cost model 1 (perfect overlap), kept to show what model 2 adds
TRN1_COST_V1 = msgspec.structs.replace(
    TRN1_COST, dma_transfer_s=0.0, dependencies=False, spill_episodes=False
)
COST_SPECS: dict[str, CostSpec] = {"trn1": TRN1_COST}

ENGINES = ("pe", "act", "dve", "pool", "dma")


class Estimate(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What the model says about one program (per call of the kernel). Fields after
    `peak_psum_bytes` are model 2's (absent from model 1 records, which still decode)."""

    model: str = MODEL
    device: str = "trn1"
    latency_s: float
    engines_s: dict[str, float]  # busy time per engine (pe, act, dve, pool, dma)
    bound: str  # the engine (or shared port) that sets the estimate, or "dependencies"
    instructions: int  # instruction instances executed
    hbm_bytes: float
    spill_bytes: float = 0.0
    fixed_s: float = 0.0
    peak_sbuf_bytes: int = 0  # per partition
    peak_psum_bytes: int = 0
    resource_s: float = 0.0  # perfect overlap: the busiest engine or port (model 1's bound, less fixed_s)
    critical_path_s: float = 0.0  # the pipelined schedule: dependences, latencies, buffers
    dependency_s: float = 0.0  # what the schedule adds over perfect overlap (latency - resource - fixed)
    overlap: float = 0.0  # engines busy at once on average: sum(engines_s) / latency_s
    loops: list[LoopEstimate] = []  # per loop of the program (preorder by completion)

    @property
    def latency_ms(self) -> float:
        return self.latency_s * 1e3


def _free(a: Access) -> int:
    return math.prod(a.shape[1:]) if len(a.shape) > 1 else 1


def _strides(a: Access, prog: Program) -> list[int]:
    """Element stride of each tile axis in the accessed tensor's memory."""
    t = prog.tensors[a.tensor]
    on_chip = t.buffer in ("sbuf", "psum") and t.alias < 0
    inner = t.shape[t.par_axis :] if on_chip and t.par_axis > 0 else t.shape
    st = [math.prod(inner[i + 1 :]) for i in range(len(inner))]
    out = [0] * len(a.shape)
    for d, e in enumerate(a.dims):
        for axis, k in e.axes:
            out[axis] += k * st[d]
    return out


def _contiguous_run(a: Access, prog: Program, skip_partition: bool) -> int:
    """Elements of the access that lie contiguously in memory, from the innermost tile axis
    outwards (per partition on chip)."""
    strides = _strides(a, prog)
    run = 1
    expect = 1
    for axis in range(len(a.shape) - 1, 0 if skip_partition else -1, -1):
        size = a.shape[axis]
        if size == 1:
            continue
        if strides[axis] != expect:
            break
        run *= size
        expect *= size
    return max(run, 1)


def _strided_penalty(ins: Instr, prog: Program, spec: CostSpec) -> float:
    """The SBUF/PSUM streaming penalty of a large minor-dimension stride (2x, else 1x)."""
    for a in ([ins.dst] if ins.dst is not None else []) + list(ins.srcs):
        t = prog.tensors[a.tensor]
        if t.buffer not in ("sbuf", "psum") or len(a.shape) < 2 or a.shape[-1] < 2:
            continue
        stride = abs(_strides(a, prog)[-1]) * dtypes.itemsize(t.dtype)
        if stride > spec.stride_penalty_bytes:
            return 2.0
    return 1.0


def _buf(a: Access | None, prog: Program) -> str:
    if a is None:
        return ""
    b = prog.tensors[a.tensor].buffer
    return b if b in ("sbuf", "psum") else "hbm"


class _Costed(msgspec.Struct, kw_only=True):
    """One instruction's price: seconds per engine it may run on, DMA numbers."""

    options: dict[str, float]  # engine -> seconds
    psum: bool = False
    sbuf: bool = False
    hbm_bytes: float = 0.0
    extra: dict[str, float] = {}  # seconds on other engines besides the chosen one (e.g. a broadcast's copy)
    latency: float = 0.0  # DMA: seconds from start to completion; others: see `latency`


def price(ins: Instr, prog: Program, spec: CostSpec) -> _Costed:
    """The cost of one instance of an instruction (see the module doc)."""
    op = ins.op
    data = ins.srcs[0] if ins.srcs else ins.dst
    assert data is not None, "an instruction without operands"
    # a streaming engine reads its inputs and writes its output element by element: the largest
    # operand per partition (a result broadcast along the free axis is written in full)
    n = max(_free(a) for a in ([ins.dst] if ins.dst is not None else []) + list(ins.srcs))
    mi = spec.min_ii
    bufs = {_buf(a, prog) for a in ([ins.dst] if ins.dst is not None else []) + list(ins.srcs)}
    psum, sbuf = "psum" in bufs, "sbuf" in bufs
    hz = {"pe": spec.pe_hz, "act": spec.act_hz, "dve": spec.dve_hz, "pool": spec.pool_hz}
    if op == "dma":
        return _dma(ins, prog, spec)
    if op in ("matmul", "transpose") and ins.engine == "pe":
        if op == "matmul":
            stat, mov = ins.srcs[0], ins.srcs[1]
            n_stat, n_mov = _free(stat), _free(mov)
            fp32 = "float32" in (prog.tensors[stat.tensor].dtype, prog.tensors[mov.tensor].dtype)
            onezero = bool(onezero_claims(ins.args))  # checked on the data by the executor
        else:
            n_stat, n_mov = _free(data), data.shape[0]  # data is stationary, an identity streams through
            fp32 = prog.tensors[data.tensor].dtype == "float32"
            onezero = True
        factor = (spec.fp32_pe_factor // 2 if onezero else spec.fp32_pe_factor) if fp32 else 1
        cycles = factor * max(min(spec.mm_init, n_stat), n_mov)
        return _Costed(options={"pe": cycles / spec.pe_hz}, psum=True, sbuf=True)
    if op == "broadcast":
        f = _free(ins.dst) if ins.dst is not None else n
        p = ins.dst.shape[0] if ins.dst is not None else 128
        chunks = max(1, math.ceil(f / 512))
        fp32 = prog.tensors[data.tensor].dtype == "float32"
        factor = spec.fp32_pe_factor // 2 if fp32 else 1
        pe = chunks * factor * max(min(spec.mm_init, p), min(f, 512)) / spec.pe_hz
        copy = max(mi, f) / spec.act_hz
        return _Costed(
            options={"pe": pe},
            psum=True,
            sbuf=True,
            extra={"act": copy},
            latency=copy + (spec.dependent_cycles + spec.access_cycles) / spec.act_hz,
        )
    # the streaming engines
    if op == "act":
        cyc = {"act": max(mi, n), "dve": max(mi, 8 * n) if ins.args.get("fn") == "reciprocal" else max(mi, n)}
    elif op == "reduce":
        cyc = {"act": mi, "dve": mi} if ins.args.get("pipelined") else {"dve": max(mi, n), "act": max(mi, n)}
    elif op == "tensor_scalar":
        cyc = {"act": max(mi, n), "dve": max(mi, n)}
    elif op in ("tensor_tensor", "loop_reduce"):
        one_psum = sum(1 for a in ins.srcs if _buf(a, prog) == "psum") == 1
        cyc = {"dve": max(mi, n if one_psum else 2 * n), "pool": max(mi, 2 * n)}
    elif op in ("scan", "scalar_tensor_tensor", "select"):
        cyc = {"dve": max(mi, 2 * n)}
    elif op in ("copy", "memset", "transpose"):
        cyc = {"act": max(mi, n), "dve": max(mi, n), "pool": max(mi, n)}
    elif op in ("iota", "affine_select"):
        cyc = {"pool": 150 + n}
    elif op == "bn_stats":
        cyc = {"dve": max(mi, n)}
    elif op == "bn_aggr":
        cyc = {"dve": max(mi, 13 * n // 3)}
    else:
        cyc = {"dve": max(mi, 2 * n)}
    allowed = ins.engine[4:].split(",") if ins.engine.startswith("any:") else [ins.engine]
    pen = _strided_penalty(ins, prog, spec)
    options = {e: pen * cyc.get(e, max(mi, n)) / hz[e] for e in allowed if e in hz}
    if not options:
        options = {"dve": pen * max(mi, n) / spec.dve_hz}
    return _Costed(options=options, psum=psum, sbuf=sbuf)


def _dma(ins: Instr, prog: Program, spec: CostSpec) -> _Costed:
    src, dst = ins.srcs[0], ins.dst
    assert dst is not None
    elems = math.prod(dst.shape)
    item = max(
        dtypes.itemsize(prog.tensors[src.tensor].dtype), dtypes.itemsize(prog.tensors[dst.tensor].dtype)
    )
    nbytes = elems * item
    runs = []
    hbm_sides = 0
    for a in (src, dst):
        if _buf(a, prog) == "hbm":
            hbm_sides += 1
            runs.append(_contiguous_run(a, prog, skip_partition=False))
        else:
            runs.append(_contiguous_run(a, prog, skip_partition=True))
    chunk_elems = max(1, min(runs))
    chunk = chunk_elems * item
    descriptors = max(1, math.ceil(elems / chunk_elems))
    # one transfer per DMA engine used: an engine serves `dma_partitions_per_engine` SBUF partitions
    on_chip = [a for a in (src, dst) if _buf(a, prog) != "hbm"]
    spread = math.ceil(on_chip[0].shape[0] / spec.dma_partitions_per_engine) if on_chip else descriptors
    engines = max(1, min(spec.dma_engines, spread))
    payload = nbytes + descriptors * spec.dma_descriptor_bytes
    engine_s = (payload + engines * spec.dma_transfer_s * spec.dma_engine_bw) / (
        spec.dma_engines * spec.dma_engine_bw
    )
    hbm = hbm_sides * descriptors * max(chunk, spec.hbm_burst_bytes)
    return _Costed(
        options={"dma": engine_s},
        hbm_bytes=float(hbm),
        latency=spec.dma_transfer_s + payload / (engines * spec.dma_engine_bw),
    )


def latency(c: _Costed, engine: str, spec: CostSpec) -> float:
    """Seconds from an instruction's start until an instruction that waits on it may start: its
    occupancy, plus for a DMA the per-transfer overhead, for the Tensor Engine the SBUF access
    and the drain through the systolic array, for the other engines the static overhead of a
    dependent instruction and the tensor access (a broadcast adds its PSUM -> SBUF copy)."""
    t = c.options[engine]
    if engine == "dma":
        return c.latency
    if engine == "pe":
        return t + (spec.access_cycles + spec.pe_depth_cycles) / spec.pe_hz + c.latency
    hz = {"act": spec.act_hz, "dve": spec.dve_hz, "pool": spec.pool_hz}[engine]
    return t + (spec.dependent_cycles + spec.access_cycles) / hz + c.latency


def _occupancy(c: _Costed, eng: str) -> dict[str, float]:
    """Seconds an instruction priced `c` holds each engine and shared port when it runs on `eng`."""
    occ = {eng: c.options[eng]}
    for e, s in c.extra.items():
        occ[e] = occ.get(e, 0.0) + s
    if eng == "pool" or (eng == "dve" and c.sbuf):
        occ[SBUF_PORT] = c.options[eng]
    if c.psum and eng in ("dve", "act"):
        occ[PSUM_PORT] = c.options[eng]
    if c.psum and "act" in c.extra:
        occ[PSUM_PORT] = occ.get(PSUM_PORT, 0.0) + c.extra["act"]
    return occ


class _EngineWalk:
    """Every instruction priced once, and the engines' busy time over the whole call. Where an
    instruction may run on several engines, the compiler's choice is the one that finishes this
    work soonest: model 1 chose once per instruction for all its loop iterations (`nodes`);
    model 2 chooses per instance, in program order (`instances`), so a loop and its unrolled
    copy load the engines alike. Each instruction's `Timing` lists every engine it may run on
    (the schedule chooses per instance too)."""

    def __init__(self, prog: Program, spec: CostSpec) -> None:
        self.prog, self.spec = prog, spec
        self.busy = dict.fromkeys(ENGINES, 0.0)
        self.ports = {SBUF_PORT: 0.0, PSUM_PORT: 0.0}
        self.hbm = 0.0
        self.count = 0
        self.timing: dict[int, Timing] = {}
        self.costed: dict[int, _Costed] = {}
        self.choosy: dict[int, bool] = {}  # a loop with an instruction of several engines in it

    def _price(self, n: Instr) -> _Costed:
        c = self.costed.get(id(n))
        if c is None:
            c = self.costed[id(n)] = price(n, self.prog, self.spec)
            alts = tuple(
                (_occupancy(c, e), latency(c, e, self.spec))
                for e in sorted(c.options, key=lambda e: (c.options[e], ENGINES.index(e)))
            )
            self.timing[id(n)] = Timing(occ=alts[0][0], lat=alts[0][1], pe="pe" in c.options, alts=alts)
        return c

    def _add(self, n: Instr, c: _Costed, eng: str, mult: int) -> None:
        for r, s in _occupancy(c, eng).items():
            (self.busy if r in self.busy else self.ports)[r] += s * mult

    def nodes(self, nodes: list[Node], mult: int) -> None:
        """Model 1: per instruction, one engine for all `mult` instances."""
        for n in nodes:
            if isinstance(n, Loop):
                self.nodes(n.body, mult * n.trip)
            elif isinstance(n, Instr):
                c = self._price(n)
                self.count += mult
                self.hbm += c.hbm_bytes * mult
                eng = min(c.options, key=lambda e: self.busy[e] + c.options[e] * mult)
                self._add(n, c, eng, mult)

    def _choosy(self, loop: Loop) -> bool:
        got = self.choosy.get(id(loop))
        if got is None:
            got = self.choosy[id(loop)] = any(
                (isinstance(n, Instr) and len(self._price(n).options) > 1)
                or (isinstance(n, Loop) and self._choosy(n))
                for n in loop.body
            )
        return got

    def instances(self, nodes: list[Node]) -> None:
        """Model 2: per instance, in program order (loops without a choice in them at once)."""
        for n in nodes:
            if isinstance(n, Loop):
                if self._choosy(n):
                    for _ in range(n.trip):
                        self.instances(n.body)
                else:
                    self.nodes(n.body, n.trip)
            elif isinstance(n, Instr):
                c = self._price(n)
                self.count += 1
                self.hbm += c.hbm_bytes
                eng = min(c.options, key=lambda e: self.busy[e] + c.options[e])
                self._add(n, c, eng, 1)


def estimate(
    prog: Program, device: str = "trn1", analysis: Analysis | None = None, *, spec: CostSpec | None = None
) -> Estimate:
    """The estimated latency of one call of a (validated) program on `device` (`spec` overrides
    the device's published figures, e.g. `TRN1_COST_V1` for model 1). Long because its walker
    fills the per-engine occupancy tables that the model's terms (spills, dependencies) then
    combine."""
    spec = spec or COST_SPECS.get(device)
    if spec is None:
        raise ValueError(f"no cost model for {device!r}; known: {', '.join(COST_SPECS)}")
    an = analysis or analyze(prog, check=False)
    walk = _EngineWalk(prog, spec)
    if spec.dependencies:
        walk.instances(prog.body)
    else:
        walk.nodes(prog.body, 1)
    busy, ports, hbm, count, timing = walk.busy, walk.ports, walk.hbm, walk.count, walk.timing
    spill = float(sbuf_spill_bytes(an))
    if spec.spill_episodes:
        spill = max(spill, float(sbuf_spill_episode_bytes(an)))
    if spill:
        busy["dma"] += (spill + spill / (64 * 1024) * spec.dma_descriptor_bytes) / (
            spec.dma_engines * spec.dma_engine_bw
        )
        hbm += spill
    busy["dma"] = max(busy["dma"], hbm / spec.hbm_bw)
    bounds = {**busy, **ports}
    bound = max(bounds, key=lambda k: bounds[k])
    resource = bounds[bound]
    fixed = 2 * spec.dma_latency_s
    critical = 0.0
    loops: list[LoopEstimate] = []
    if spec.dependencies:
        sched = Scheduler(
            prog,
            timing,
            spec.loop_buffers,
            {"sbuf": spec.sbuf_usable_bytes, "psum": spec.psum_partition_bytes},
        )
        critical = sched.run()
        loops = sched.loops
    if critical > resource * (1 + 1e-9):
        bound = "dependencies"
    total = max(resource, critical) + fixed
    return Estimate(
        device=device,
        latency_s=total,
        engines_s={k: busy[k] for k in ENGINES},
        bound=bound,
        instructions=count,
        hbm_bytes=hbm,
        spill_bytes=spill,
        fixed_s=fixed,
        peak_sbuf_bytes=an.peak_sbuf,
        peak_psum_bytes=an.peak_psum,
        resource_s=resource,
        critical_path_s=critical,
        dependency_s=total - resource - fixed,
        overlap=sum(busy.values()) / total if total > 0 else 0.0,
        loops=loops,
    )


def describe(est: Estimate) -> dict[str, Any]:
    return msgspec.to_builtins(est)


__all__ = [
    "COST_SPECS",
    "MODEL",
    "TRN1_COST",
    "TRN1_COST_V1",
    "CostSpec",
    "Estimate",
    "LoopEstimate",
    "describe",
    "estimate",
    "latency",
    "price",
]
