"""The Triton harness: runs inside the sandbox, imports the solution, calls its entry point.

Correctness phase, per case (each seed and adversarial case of each workload): inputs are
copied into fresh buffers with guard zones on both sides (NaN for floats, so a read past
the end poisons the result), destination-passing outputs are allocated here with guard
zones and filled with NaN (floats) or the type's minimum (integers), the entry point is
called once, then the inputs (with their guards) are compared bitwise with a pristine
copy, output guards are checked, and the outputs are saved for the parent, which judges
them against its own reference (the child never sees the reference).

Calibration (only when timing is requested), before the solution is imported: the same
timed loop with a null entry point, set up from round files of zeros of a round file's size,
in rounds the parent clocks like the timing rounds. Nothing of the kernel exists in the
process yet, so the parent's wall time of those rounds is a trustworthy figure of the
untimed work per call and of a round's set-up.

Timing phase (only when requested and every case ran), in rounds the parent drives: the
child stops itself (SIGSTOP); the parent puts the round's inputs in a directory of its own
(base contents the kernel has never been able to read, a mask per float input, the calls'
content and mask shift) and continues it; the child sets up R buffer sets with the first
calls' contents and stops again; the parent starts its own clock and continues it; the
child runs `warmup` + `reps` calls, each after an L2 flush (the call's lead on the device),
timed by CUDA events and followed by a device synchronisation, so that the parent's clock sees
every call alone (`timing.py`; the interpreter's clock is the shim's simulated device), each on
its own content (`timed_inputs`); where the round has fewer buffer sets than calls, after each
call (untimed) it compares sampled input elements with what was handed over and restocks the
set with a later call's content, else every set was stocked before the clock started and the
comparison runs once the clock has stopped; then it writes the round's readings
(`readings_file(k)`) and stops at the next round's start, where the parent's clock stops and
it reads them. The parent hands over another round (an extra one where it rejected a round)
or `END_FILE`.
Every call writes its own output buffers, kept until the round ends; the parent then names
secret positions of every call's outputs and a few calls to send back in full, and checks
them against references it had computed for exactly those calls. It bounds the child's
clock by its own (see `triton.rounds_judge.timing_clock_mismatch`). See `timing.py` for the statistics.

With the judge's region (`HarnessRequest.buffers`, `judge_buffers.py`), mapped before the
solution is imported: every case's inputs and outputs are the judge's slots (the judge wrote
the inputs and poisoned the outputs and guards; a value-returning entry point's values are
copied into the output slots), and every kept timed call's outputs end in a slot of the
judge's before the round's last stop. Nothing is saved for those and no mutation, guard or
sampled value is reported: the judge reads them itself while this process is stopped, and
the round's secret positions are never handed over (the autotune sweep's runs still go
through files, as do rounds whose outputs are not kept).

Before the solution is imported, the interpreter tier installs the CUDA shim and every tier
counts Triton launches (`cuda_shim.py`).
"""

from __future__ import annotations

import functools
import importlib
import math
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import torch
import triton
import triton.language
import triton.runtime.autotuner

try:  # the interpreter's modules load lazily; import them before the sandbox locks down
    import triton.runtime.interpreter
except ImportError:  # pragma: no cover - older Triton
    pass

from hardware_agents.triton import autotune, bf16_upcast, timed_inputs, timing
from hardware_agents.triton.cuda_shim import SIM, count_launches, install_cuda_shim
from hardware_agents.triton.inputs import TORCH_DTYPES, dtype_name
from hardware_agents.triton.judge_buffers import GUARD_BYTES, OpenedBuffers, open_buffers, poison_value
from hardware_agents.triton.records import (
    CORRECTNESS_REPORT,
    END_FILE,
    CaseRun,
    CaseSpec,
    ConfigRun,
    CorrectnessReport,
    HarnessRequest,
    HarnessResult,
    TensorMeta,
    TimingRun,
    calibration_file,
    case_slot,
    checks_file,
    readings_file,
    round_file,
    timed_slot,
)
from hardware_agents.triton.returned import returned_values

_now = time.perf_counter  # taken at import, before the solution exists in the process
PACKAGE = "accelopt_solution"
# Reported as `compile_error`: what Triton raises while compiling (on a GPU: also a kernel whose
# blocks exceed the SM's shared memory or registers), and a module that does not import.
COMPILE_ERRORS = {
    "CompilationError",
    "CompileTimeAssertionFailure",
    "UnsupportedLanguageConstruct",
    "OutOfResources",
    "PTXASError",
    "SolutionImportError",
    "EntrySymbolMissing",
}


class SolutionImportError(Exception):
    """The solution module failed to import (syntax error, missing module, error at import)."""


class EntrySymbolMissing(Exception):
    """The entry module has no callable with the entry point's name."""


class OutputMismatch(Exception):
    """A value-returning entry point returned the wrong number or kind of values."""


# --- buffers ---------------------------------------------------------------------------------


def as_bytes(t: torch.Tensor) -> torch.Tensor:
    return (
        t.contiguous().view(torch.uint8) if t.numel() else torch.zeros(0, dtype=torch.uint8, device=t.device)
    )


def same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(as_bytes(a), as_bytes(b))


class Guarded:
    """A tensor inside a larger allocation whose guard zones hold the poison value."""

    def __init__(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> None:
        item = torch.empty((), dtype=dtype).element_size()
        pad = max(1, GUARD_BYTES // item)
        n = math.prod(shape)
        self.base = torch.empty(pad + n + pad, dtype=dtype, device=device)
        fill = poison_value(dtype)
        self.base[:pad].fill_(fill)
        self.base[pad + n :].fill_(fill)
        self.view = self.base[pad : pad + n].view(shape)
        self._guards = (self.base[:pad], self.base[pad + n :])
        self._pristine = tuple(g.clone() for g in self._guards)

    def guards_intact(self) -> bool:
        return all(same_bytes(g, p) for g, p in zip(self._guards, self._pristine, strict=True))


# --- the solution ----------------------------------------------------------------------------


def load_entry(req: HarnessRequest, workdir: Path) -> Callable[..., Any]:
    """Import the solution as the package `accelopt_solution` (relative imports work, as in
    FlashInfer-Bench's builders; the package dir is also on sys.path for absolute ones)."""
    root = Path(req.module_dir) if req.module_dir else workdir
    pkg_dir = root / PACKAGE
    sys.path.insert(0, str(root))
    sys.path.insert(1, str(pkg_dir))
    module = PACKAGE + "." + req.entry_file.removesuffix(".py").replace("/", ".")
    try:
        mod = importlib.import_module(module)
    except BaseException as e:
        tb = _short_paths(traceback.format_exc(limit=8), root)
        raise SolutionImportError(
            f"importing {req.entry_file} failed: {type(e).__name__}: {e}\n{tb}"
        ) from None
    fn = getattr(mod, req.entry_symbol, None)
    if not callable(fn):
        raise EntrySymbolMissing(f"{req.entry_file} defines no callable `{req.entry_symbol}`")
    return fn


def error_kind(e: BaseException) -> str:
    """The exception's type name; a Triton semantic error raised while interpreting a kernel
    (what `@triton.jit` would reject at compile time on a GPU) is reported as CompilationError."""
    if type(e).__name__ == "InterpreterError":
        tb = (e.__cause__ or e.__context__ or e).__traceback__
        last = None
        while tb is not None:
            last = tb.tb_frame.f_code.co_filename
            tb = tb.tb_next
        if last and f"{os.sep}triton{os.sep}language{os.sep}" in last:
            return "CompilationError"
    return type(e).__name__


def _short_paths(text: str, workdir: Path) -> str:
    """Paths of the solution's files as the author wrote them (main.py, not the sandbox's)."""
    return text.replace(str(workdir / PACKAGE) + os.sep, "")


def describe_return(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, torch.Tensor):
        return "tensor"
    if isinstance(value, tuple | list):
        return f"tuple of {len(value)}"
    if isinstance(value, dict):
        return f"dict of {len(value)}"
    return type(value).__name__


def _sync(device: torch.device) -> None:
    """Wait for the device's queued work (on CPU tensors: the simulated device's, see cuda_shim)."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    else:
        SIM.synchronize()


def _normalize(result: Any, metas: list[TensorMeta]) -> dict[str, torch.Tensor]:
    """A value-returning entry point's outputs: one value, a tuple/list in the definition's
    order, or a dict keyed by output name (as FlashInfer-Bench accepts)."""
    values = returned_values(result, [m.name for m in metas], "the entry point", OutputMismatch)
    out = {}
    for m, v in zip(metas, values, strict=True):
        if isinstance(v, torch.Tensor):
            out[m.name] = v
        elif isinstance(v, bool | int | float):
            out[m.name] = torch.tensor(v)
        else:
            raise OutputMismatch(f"output {m.name} is a {type(v).__name__}, not a tensor")
    return out


class _Case:
    """The live buffers of one correctness case: the child's own (inputs copied from the case's
    file, guarded, pristine copies kept here), or, with the judge's region (`bufs`), the
    judge's slots, which the judge wrote, poisoned and checks itself."""

    def __init__(
        self, req: HarnessRequest, case: CaseSpec, device: torch.device, bufs: OpenedBuffers | None = None
    ) -> None:
        self.spec = case
        self.inputs: dict[str, tuple[Guarded, torch.Tensor]] = {}
        self.args: list[Any] = []
        self.slots: dict[str, torch.Tensor] = {}  # the judge's output slots (with `bufs`)
        if bufs is not None:
            for m in req.inputs:
                self.args.append(
                    case.scalars[m.name] if m.shape is None else bufs.view(case_slot(case.name, "in", m.name))
                )
            self.slots = {o.name: bufs.view(case_slot(case.name, "out", o.name)) for o in case.outputs}
            if req.destination_passing:
                self.args.extend(self.slots.values())
            return
        self.data: dict[str, torch.Tensor] = torch.load(case.inputs_file, weights_only=True)
        for m in req.inputs:
            if m.shape is None:
                self.args.append(case.scalars[m.name])
                continue
            src = self.data[m.name]
            g = Guarded(tuple(src.shape), src.dtype, device)
            g.view.copy_(src)
            self.inputs[m.name] = (g, g.base.clone())
            self.args.append(g.view)
        self.outputs: dict[str, Guarded] = {}
        if req.destination_passing:
            for o in case.outputs:
                g = Guarded(tuple(o.shape or ()), TORCH_DTYPES[o.dtype], device)
                g.view.fill_(poison_value(g.view.dtype))
                self.outputs[o.name] = g
                self.args.append(g.view)


def _into_slots(values: dict[str, torch.Tensor], slots: dict[str, torch.Tensor]) -> list[TensorMeta]:
    """A value-returning entry point's outputs copied into the judge's slots, where their dtype
    and shape are the slot's (else the slot keeps its poison); what each value was."""
    seen = []
    for name, slot in slots.items():
        v = values.get(name)
        if v is None:
            continue
        seen.append(TensorMeta(name=name, dtype=dtype_name(v.dtype), shape=list(v.shape)))
        if v.dtype == slot.dtype and tuple(v.shape) == tuple(slot.shape):
            slot.copy_(v)
    return seen


def _run_case(
    fn: Callable[..., Any],
    req: HarnessRequest,
    case: CaseSpec,
    device: torch.device,
    workdir: Path,
    launches: Callable[[], int],
    suffix: str = "",
    bufs: OpenedBuffers | None = None,
) -> tuple[CaseRun, bool]:
    """One case. Without the judge's region, its outputs saved for the parent (`output_file`);
    with it (`bufs`), they are in the judge's slots, where the judge reads them and checks
    the inputs and guards itself. (run, whether it ran to its end)."""
    run = CaseRun(name=case.name)
    try:
        live = _Case(req, case, device, bufs)
        _sync(device)
        n0 = launches()
        t0 = time.perf_counter()
        result = fn(*live.args)
        _sync(device)
        run.call_ms = (time.perf_counter() - t0) * 1e3
        run.returned = describe_return(result)
        run.launches = launches() - n0
        if bufs is not None:
            if not req.destination_passing:
                run.outputs = _into_slots(_normalize(result, case.outputs), live.slots)
                _sync(device)
            return run, True
        run.mutated = [n for n, (g, pristine) in live.inputs.items() if not same_bytes(g.base, pristine)]
        if req.destination_passing:
            outputs = {n: g.view for n, g in live.outputs.items()}
            run.overflow = [n for n, g in live.outputs.items() if not g.guards_intact()]
        else:
            outputs = _normalize(result, case.outputs)
        saved = {n: t.detach().to("cpu").clone() for n, t in outputs.items()}
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt | SystemExit):
            raise
        run.error = _short_paths(f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=12)}", workdir)
        run.error_type = error_kind(e)
        return run, False
    rel = f"out/{case.name}{suffix}.pt"
    torch.save(saved, workdir / rel)
    run.output_file = rel
    return run, True


def _sweep_configs(
    fn: Callable[..., Any],
    req: HarnessRequest,
    device: torch.device,
    workdir: Path,
    launches: Callable[[], int],
    result: HarnessResult,
) -> None:
    """Every further config group of the autotuned kernels (`autotune.py`), at one case: the
    first case of the smallest workload (by output elements); back to group 0 after."""
    result.autotune = autotune.launched()
    case = min(req.cases, key=lambda c: sum(math.prod(o.shape or ()) for o in c.outputs))
    try:
        for k in range(1, autotune.sweep_count()):
            autotune.force(k)
            run_, _ = _run_case(fn, req, case, device, workdir, launches, suffix=f"@config-group{k}")
            result.config_runs.append(ConfigRun(index=k, configs=autotune.launched(), run=run_))
    finally:
        autotune.force(0)


# --- timing ----------------------------------------------------------------------------------


def stop_for_parent() -> None:
    """Stop this process until the parent continues it (the timing handshake): the parent
    stages a round's inputs, or starts / stops its own clock, while we are stopped."""
    os.kill(os.getpid(), signal.SIGSTOP)


class RanAheadOfItsInputs(RuntimeError):
    """A round's inputs are missing: something continued this process while it was stopped
    (its name is records.RAN_AHEAD; the agent judges it `incorrect`)."""


def load_handed_over(path: Path) -> Any:
    """A file the agent hands over while this process is stopped (a round's inputs, what to
    send back of a round's outputs); missing, it means this process ran before it was there."""
    if not path.exists():
        raise RanAheadOfItsInputs(
            f"{path.name} is not there: this process ran while the agent held it "
            "stopped, before it had handed the file over"
        )
    return torch.load(path, weights_only=True)


class RoundData:
    """One round's contents on the device: base contents, a mask per float input, the
    (content, shift) of every call, and (outputs not kept) the positions to sample."""

    def __init__(
        self,
        contents: list[dict[str, torch.Tensor]],
        masks: dict[str, torch.Tensor],
        calls: list[tuple[int, int]],
        positions: dict[str, torch.Tensor] | None = None,
    ) -> None:
        self.contents, self.masks, self.calls, self.positions = contents, masks, calls, positions

    @classmethod
    def load(cls, path: Path, device: torch.device) -> RoundData:
        raw = load_handed_over(path)
        contents = [{n: t.to(device) for n, t in c.items()} for c in raw["contents"]]
        masks = {n: t.to(device) for n, t in raw["masks"].items()}
        calls = [(int(c), int(s)) for c, s in raw["calls"].tolist()]
        positions = {n: t.to(device) for n, t in raw["positions"].items()} if "positions" in raw else None
        return cls(contents, masks, calls, positions)


def _like_case(req: HarnessRequest) -> CaseSpec:
    assert req.timing is not None
    return next(c for c in req.cases if c.name == req.timing.like)


def _null_entry(req: HarnessRequest, device: torch.device) -> Callable[..., Any]:
    """The calibration rounds' entry point: does nothing (or returns preallocated outputs)."""
    if req.destination_passing:
        return lambda *args: None
    like = _like_case(req)
    outs = tuple(
        torch.empty(tuple(o.shape or ()), dtype=TORCH_DTYPES[o.dtype], device=device) for o in like.outputs
    )
    return lambda *args: outs if len(outs) != 1 else outs[0]


def _calibrate(
    req: HarnessRequest,
    device: torch.device,
    workdir: Path,
    timer: timing.Timer,
    flush: Callable[[], Any],
    gen: torch.Generator,
    result: HarnessResult,
    grapher: timing.Grapher | None,
    bufs: OpenedBuffers | None = None,
) -> None:
    """Before the solution exists in this process: the same rounds with a null entry point,
    set up from round files of zeros of a round file's size. The parent's clock over them is
    the untimed work of a call on this host (flush, restock, bookkeeping, the handshake) and
    of a round's set-up (loading its file, stocking the sets), which bound the kernel's clock
    and its set-ups later. Protocol: like a timing round."""
    assert req.timing is not None
    fn = _null_entry(req, device)
    inputs = Path(req.timing.inputs_dir) if req.timing.inputs_dir else workdir
    late: Callable[[], None] | None = None
    for k in range(req.timing.calibration_rounds):
        stop_for_parent()  # the parent stages calibration round k's file
        if late is not None:
            late()
        rd = RoundData.load(inputs / calibration_file(k), device)
        run, _, late = _round(
            fn, req, rd, device, timer, flush, gen, workdir / f"out/calibration-{k}.msgpack", grapher, bufs
        )
        result.calibration.append(run)
    stop_for_parent()  # the last calibration round's clock stops
    if late is not None:
        late()


def _time(
    fn: Callable[..., Any],
    req: HarnessRequest,
    device: torch.device,
    workdir: Path,
    timer: timing.Timer,
    flush: Callable[[], Any],
    gen: torch.Generator,
    result: HarnessResult,
    grapher: timing.Grapher | None,
    bufs: OpenedBuffers | None = None,
) -> None:
    """The timing rounds (see TimingSpec): per round, stop for the inputs (and send back what
    the parent names of the previous round's outputs; with the judge's region and kept outputs,
    nothing: the judge reads them from its slots at that stop), set up the buffer sets, stop
    again (the parent starts its clock when it continues us), run the calls, and stop at the
    next round's start (the parent's clock stops there)."""
    spec = req.timing
    assert spec is not None
    (workdir / "out").mkdir(exist_ok=True)
    inputs = Path(spec.inputs_dir) if spec.inputs_dir else workdir
    kept: list[Any] = []
    late: Callable[[], None] | None = None
    k = 0
    while True:
        stop_for_parent()  # the parent's clock (previous round) stops; it stages round k or the end
        if late is not None:
            late()
        if k and (bufs is None or not spec.keep_outputs):
            _send_checks(k - 1, kept, req, inputs, workdir, result)
        kept = []
        if k == spec.trials + spec.extra_rounds or (inputs / END_FILE).exists():
            return
        rd = RoundData.load(inputs / round_file(k), device)
        run, kept, late = _round(
            fn, req, rd, device, timer, flush, gen, workdir / readings_file(k), grapher, bufs
        )
        result.timing.append(run)
        k += 1


def _outputs_of(value: Any, req: HarnessRequest, like: CaseSpec) -> dict[str, torch.Tensor]:
    return value if req.destination_passing else _normalize(value, like.outputs)


def _send_checks(
    k: int, kept: list[Any], req: HarnessRequest, inputs: Path, workdir: Path, result: HarnessResult
) -> None:
    """Round k is over: save the values at the positions the parent names now (kept outputs),
    or those gathered during the round (outputs not kept), and the calls it wants in full."""
    spec = req.timing
    assert spec is not None
    like = _like_case(req)
    if spec.keep_outputs:
        checks = load_handed_over(inputs / checks_file(k))
        samples: dict[str, list[torch.Tensor]] = {o.name: [] for o in like.outputs}
        full = [int(t) for t in checks["full"].tolist()]
        for t, value in enumerate(kept):
            try:
                outs = _outputs_of(value, req, like)
            except OutputMismatch:
                outs = {}
            for o in like.outputs:
                pos = checks["positions"][o.name][t % spec.calls]  # graph replays follow the calls
                got = outs.get(o.name)
                if got is None or got.numel() != math.prod(o.shape or ()):
                    got_vals = torch.full((pos.numel(),), float("nan"), dtype=torch.float64)
                else:
                    got_vals = got.reshape(-1)[pos.to(got.device)].to("cpu", torch.float64)
                samples[o.name].append(got_vals)
            if t in full:
                rel = f"out/timed-{k}-{t}.pt"
                torch.save({n: v.detach().to("cpu").clone() for n, v in outs.items()}, workdir / rel)
                result.timed_full[f"{k}-{t}"] = rel
        stacked = {
            n: torch.stack(v) if v else torch.zeros((0, 0), dtype=torch.float64) for n, v in samples.items()
        }
    else:
        stacked = {n: v.to("cpu", torch.float64) for n, v in kept[0].items()}
        last = kept[1]
        rel = f"out/timed-{k}-{spec.calls - 1}.pt"
        torch.save({n: v.detach().to("cpu").clone() for n, v in last.items()}, workdir / rel)
        result.timed_full[f"{k}-{spec.calls - 1}"] = rel
    rel = f"out/timed-samples-{k}.pt"
    torch.save(stacked, workdir / rel)
    result.timed_samples[k] = rel
    kept.clear()


def _round(
    fn: Callable[..., Any],
    req: HarnessRequest,
    rd: RoundData,
    device: torch.device,
    timer: timing.Timer,
    flush: Callable[[], Any],
    gen: torch.Generator,
    readings: Path,
    grapher: timing.Grapher | None = None,
    bufs: OpenedBuffers | None = None,
) -> tuple[TimingRun, list[Any], Callable[[], None] | None]:
    """One round: set up, stop (ready: the parent's clock starts when it continues us), run
    every call with its own content, collect the timer readings. Returns the run, what the
    checks need (every call's outputs (kept), or [samples, last outputs] (not kept)) and, where
    every call had a buffer set of its own (stocked before the clock started, so nothing is
    restocked between calls), the comparison of the sets' sampled inputs with what was handed
    over, to run once the parent's clock has stopped (`late`; it fills `run.mutated`).

    Long because its closures (`stock`, `call`, `check_inputs`, `after`) share the round's
    buffers and are the body of the timed loop: as methods of an object they would add
    attribute lookups to every timed call on the GPU, which the null entry's calibration
    would have to absorb."""
    spec = req.timing
    assert spec is not None
    like = _like_case(req)
    n, R = spec.calls, min(spec.rotation, spec.calls)
    base = rd.contents[0]
    sets = [{name: torch.empty_like(t) for name, t in base.items()} for _ in range(R)]
    # input elements compared after each call with what was handed over (sampled: a full
    # comparison would double the untimed work; the restock overwrites the set anyway)
    mpos = {
        name: torch.randint(0, max(t.numel(), 1), (n, spec.mutation_samples), generator=gen).to(device)
        for name, t in base.items()
        if t.numel()
    }
    expected: list[dict[str, torch.Tensor]] = [{} for _ in range(R)]

    def stock(b: int, t: int) -> None:
        c, shift = rd.calls[t]
        for name, dst in sets[b].items():
            timed_inputs.derive_into(dst, rd.contents[c][name], rd.masks.get(name), shift)
            if name in mpos:
                expected[b][name] = dst.reshape(-1)[mpos[name][t]]

    for b in range(R):
        stock(b, b)
    keep = spec.keep_outputs
    slotted = bufs is not None and keep  # every call's outputs end in the judge's slots
    n_out = n if keep else R
    outs: list[dict[str, torch.Tensor]] = []
    if req.destination_passing:
        for t in range(n_out):
            d = {
                o.name: bufs.view(timed_slot(t, o.name))
                if slotted and bufs is not None
                else torch.empty(tuple(o.shape or ()), dtype=TORCH_DTYPES[o.dtype], device=device)
                for o in like.outputs
            }
            for v in d.values():
                v.fill_(poison_value(v.dtype))
            outs.append(d)
    kept: list[Any] = []
    samples: dict[str, torch.Tensor] = {}
    if rd.positions is not None:
        samples = {
            o: torch.zeros(p.shape, dtype=torch.float64, device=device) for o, p in rd.positions.items()
        }
    last: dict[str, torch.Tensor] = {}
    mutated = torch.zeros((), dtype=torch.int64, device=device)
    malformed = [0]

    def call(t: int) -> None:
        b = t % R
        args = [like.scalars[m.name] if m.shape is None else sets[b][m.name] for m in req.inputs]
        if req.destination_passing:
            d = outs[t if keep else b]
            fn(*args, *d.values())
            value: Any = d
        else:
            value = fn(*args)
        if keep:
            kept.append(value)
        else:
            try:
                got = _outputs_of(value, req, like)
            except OutputMismatch:
                malformed[0] += 1
                got = {}
            for o, pos in (rd.positions or {}).items():
                g = got.get(o)
                if g is not None and g.numel() == math.prod(
                    next(m.shape or () for m in like.outputs if m.name == o)
                ):
                    samples[o][t] = g.reshape(-1)[pos[t]].to(torch.float64)
                else:
                    samples[o][t] = float("nan")
            if t == n - 1:
                last.update({k: v.detach().clone() for k, v in got.items()})

    def check_inputs(t: int) -> None:
        nonlocal mutated
        b = t % R
        for name, want in expected[b].items():
            mutated = mutated + (sets[b][name].reshape(-1)[mpos[name][t]] != want).any().to(torch.int64)

    prestocked = n <= R  # every call has its own set: nothing to restock between calls

    def after(t: int) -> None:
        if prestocked:
            return
        check_inputs(t)
        b = t % R
        if t + R < n:
            stock(b, t + R)
        if not keep and req.destination_passing:
            for v in outs[b].values():
                v.fill_(poison_value(v.dtype))

    graphs: list[Any] | None = None
    gkept: list[Any] = []
    note = ""
    if grapher is not None:
        if not (prestocked and keep):
            note = "not captured: the round's calls share buffer sets or its outputs are not all kept"
        else:
            graphs, gkept, note = _capture(fn, req, like, grapher, sets, device)
    _sync(device)  # the set-up's device work (restocks, output fills) ends before the clock starts
    stop_for_parent()  # set up; the parent's clock starts when it continues us
    grun = None
    if grapher is not None and graphs is not None:
        # the calls replayed (the device figure) before the eager calls: an eager call cannot
        # do its replay's work for it (write the replay's outputs, its replay then idle)
        gs, replay = graphs, grapher.replay
        grun = timing.measure(
            call=lambda t: replay(gs[t]),
            after=lambda t: None,
            flush=flush,
            timer=timer,
            warmup=spec.warmup,
            reps=spec.reps,
        )
        gkept = [_frozen(v) for v in gkept]  # as the replays left them, whatever the eager calls write
    run = timing.measure(call=call, after=after, flush=flush, timer=timer, warmup=spec.warmup, reps=spec.reps)
    run.malformed = malformed[0]
    run.graph_note = note
    if grun is not None:
        run.graph_samples_ms, run.graph_warmup_ms = grun.samples_ms, grun.warmup_ms
        kept.extend(gkept)
    if slotted and bufs is not None:  # before the round's last stop: the judge reads them there
        _kept_into_slots(kept, req, like, bufs)
        _sync(device)
    readings.write_bytes(msgspec.msgpack.encode(run))  # read by the parent while this process is stopped
    out = kept if keep else [samples, last]
    if not prestocked:
        run.mutated = int(mutated.item())
        return run, out, None

    def late() -> None:
        for t in range(n):
            check_inputs(t)
        run.mutated = int(mutated.item())

    return run, out, late


def _kept_into_slots(kept: list[Any], req: HarnessRequest, like: CaseSpec, bufs: OpenedBuffers) -> None:
    """Every kept call's outputs in the judge's slot of that call (a destination-passing call's
    eager outputs are there already), the slot poisoned where a value is missing or has
    another number of elements (wrong at every position, as the judge reads it)."""
    for t, value in enumerate(kept):
        try:
            outs = _outputs_of(value, req, like)
        except OutputMismatch:
            outs = {}
        for o in like.outputs:
            slot = bufs.view(timed_slot(t, o.name))
            got = outs.get(o.name)
            if not isinstance(got, torch.Tensor) or got.numel() != slot.numel():
                slot.fill_(poison_value(slot.dtype))
            elif got.data_ptr() != slot.data_ptr():
                slot.copy_(got.reshape(slot.shape))


def _frozen(value: Any) -> Any:
    """A copy of a call's outputs (tensors cloned, containers rebuilt)."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, dict):
        return {k: _frozen(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_frozen(v) for v in value)
    return value


def _capture(
    fn: Callable[..., Any],
    req: HarnessRequest,
    like: CaseSpec,
    grapher: timing.Grapher,
    sets: list[dict[str, torch.Tensor]],
    device: torch.device,
) -> tuple[list[Any] | None, list[Any], str]:
    """Every call of the round captured as a graph on its own buffer set, with outputs of its
    own (destination-passing: poisoned like the eager calls'): (graphs, what each call's
    outputs are, ""), or (None, [], why not): a wrapper that cannot be captured (it syncs,
    reads a value on the host, ...) or that spends more than `capture_budget_s` a call of host
    time capturing (the set-up's allowance has that much room) is timed eagerly only."""
    spec = req.timing
    assert spec is not None
    graphs: list[Any] = []
    kept: list[Any] = []
    outs = [
        {
            o.name: torch.full(
                tuple(o.shape or ()),
                poison_value(TORCH_DTYPES[o.dtype]),
                dtype=TORCH_DTYPES[o.dtype],
                device=device,
            )
            for o in like.outputs
        }
        if req.destination_passing
        else {}
        for _ in range(spec.calls)
    ]
    budget = spec.capture_budget_s * spec.calls
    t0 = _now()
    try:
        for t in range(spec.calls):
            args = [like.scalars[m.name] if m.shape is None else sets[t][m.name] for m in req.inputs]
            if req.destination_passing:
                d = outs[t]
                g, _ = grapher.capture(functools.partial(fn, *args, *d.values()))
                kept.append(d)
            else:
                g, value = grapher.capture(functools.partial(fn, *args))
                kept.append(value)
            graphs.append(g)
            if _now() - t0 > budget:
                return (
                    None,
                    [],
                    (
                        f"not captured: capturing took more than {spec.capture_budget_s * 1e6:.0f} us "
                        "a call of host time"
                    ),
                )
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return None, [], f"not captured: {type(e).__name__}: {first}"[:300]
    return graphs, kept, ""


# --- entry -----------------------------------------------------------------------------------


def run(payload: bytes, workdir: Path) -> HarnessResult:
    """Sandbox target."""
    t_start = time.perf_counter()
    req = msgspec.msgpack.decode(payload, type=HarnessRequest)
    device = torch.device(req.device)
    result = HarnessResult(
        cases=[], versions={"torch": str(torch.__version__), "triton": str(triton.__version__)}
    )
    if device.type == "cuda":
        result.device_name = torch.cuda.get_device_name(device)
        result.versions["cuda"] = str(torch.version.cuda)
    (workdir / "out").mkdir(exist_ok=True)
    # the judge's region, mapped before the solution exists (`judge_buffers.py`)
    bufs = open_buffers(req.buffers) if req.buffers is not None else None
    timer, flush, grapher = None, None, None
    gen = torch.Generator().manual_seed(req.seed)
    if req.timing is not None:  # calibrated before the solution is imported: nothing of it runs yet
        timer = timing.make_timer(req.timing.timer, req.timing.device_flush_s)
        result.timer = timer.name
        flush_buf = torch.empty(max(req.timing.flush_bytes, 1), dtype=torch.uint8, device=device)
        flush = timing.bound_flush(flush_buf, req.timing.timer)
        grapher = timing.make_grapher(req.timing.timer) if req.timing.graphs else None
        _calibrate(req, device, workdir, timer, flush, gen, result, grapher, bufs)
        result.phase_s["calibration"] = time.perf_counter() - t_start
    if os.environ.get("TRITON_INTERPRET") == "1":
        autotune.install()
        if device.type == "cpu":
            install_cuda_shim()
        if req.upcast_bf16:
            bf16_upcast.install()
    launches = count_launches()
    t_import = time.perf_counter()
    fn = load_entry(req, workdir)
    result.phase_s["import"] = time.perf_counter() - t_import
    ok = True
    for case in req.cases:
        run_, ran = _run_case(fn, req, case, device, workdir, launches, bufs=bufs)
        result.cases.append(run_)
        if not ran:
            ok = False
            break
        ok = ok and not run_.mutated and not run_.overflow
    if os.environ.get("TRITON_INTERPRET") == "1" and result.cases and not any(r.error for r in result.cases):
        _sweep_configs(fn, req, device, workdir, launches, result)
    t_correct = time.perf_counter()
    result.phase_s["correctness"] = t_correct - t_import
    if req.timing is None or timer is None or flush is None:
        return result
    if not ok:
        result.skipped_timing = "not timed: a correctness case failed"
        return result
    report = CorrectnessReport(cases=result.cases, autotune=result.autotune, config_runs=result.config_runs)
    (workdir / CORRECTNESS_REPORT).write_bytes(msgspec.msgpack.encode(report))  # read at the next stop
    _time(fn, req, device, workdir, timer, flush, gen, result, grapher, bufs)
    result.phase_s["timing"] = time.perf_counter() - t_correct
    return result
