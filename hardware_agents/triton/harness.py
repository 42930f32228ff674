"""The Triton harness: runs inside the sandbox, imports the solution, calls its entry point.

Correctness phase, per case (each seed and adversarial case of each workload): inputs are
copied into fresh buffers with guard zones on both sides (NaN for floats, so a read past
the end poisons the result), destination-passing outputs are allocated here with guard
zones and filled with NaN (floats) or the type's minimum (integers), the entry point is
called once, then the inputs (with their guards) are compared bitwise with a pristine
copy, output guards are checked, and the outputs are saved for the parent, which judges
them against its own reference (the child never sees the reference).

Timing phase (only when requested and every case ran), in rounds the parent drives: the
child stops itself (SIGSTOP); the parent puts the round's inputs in the work dir (fresh
contents the kernel has never been able to read) and continues it; the child sets up R > S
buffer sets (R not a multiple of S, so contents move between buffers) and stops again; the
parent starts its own clock and continues it; the child runs `warmup` + `reps` calls, each
after an L2 flush and timed by the timer (CUDA events, or the host clock in the
interpreter), and after each (untimed) spot-checks a few output elements against that
content's first output of the round, compares the inputs with what was handed over,
restocks and re-poisons; then it stops at the next round's start, where the parent's clock
stops. The last output of every content of every round goes back to the parent for a full
check against its references; the parent bounds the child's clock by its own (see
`TritonAgent._clock_mismatch`). See `timing.py` for the statistics.

Before the solution is imported, the interpreter tier installs the CUDA shim and every tier
counts Triton launches (`cuda_shim.py`).
"""

from __future__ import annotations

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

from hardware_agents.triton import timing
from hardware_agents.triton.cuda_shim import count_launches, install_cuda_shim
from hardware_agents.triton.inputs import TORCH_DTYPES
from hardware_agents.triton.records import (
    CaseRun,
    CaseSpec,
    HarnessRequest,
    HarnessResult,
    TensorMeta,
    TimingRun,
    TimingSpec,
    round_file,
)

GUARD_BYTES = 4096
PACKAGE = "accelopt_solution"
# Reported as `compile_error`: what Triton raises while compiling (on a GPU: also a kernel whose
# blocks exceed the SM's shared memory or registers), and a module that does not import.
COMPILE_ERRORS = {"CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct",
                  "OutOfResources", "PTXASError", "SolutionImportError", "EntrySymbolMissing"}


class SolutionImportError(Exception):
    """The solution module failed to import (syntax error, missing module, error at import)."""


class EntrySymbolMissing(Exception):
    """The entry module has no callable with the entry point's name."""


class OutputMismatch(Exception):
    """A value-returning entry point returned the wrong number or kind of values."""


# --- buffers ---------------------------------------------------------------------------------

def poison_value(dtype: torch.dtype) -> Any:
    if dtype.is_floating_point:
        return float("nan")
    if dtype == torch.bool:
        return True
    return torch.iinfo(dtype).min


def as_bytes(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8) if t.numel() else torch.zeros(0, dtype=torch.uint8, device=t.device)


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
        self.base[pad + n:].fill_(fill)
        self.view = self.base[pad:pad + n].view(shape)
        self._guards = (self.base[:pad], self.base[pad + n:])
        self._pristine = tuple(g.clone() for g in self._guards)

    def guards_intact(self) -> bool:
        return all(same_bytes(g, p) for g, p in zip(self._guards, self._pristine, strict=True))


# --- the solution ----------------------------------------------------------------------------

def interpreter_autotune() -> None:
    """Under TRITON_INTERPRET there is no GPU to benchmark autotune configs on (Triton's
    benchmarker needs a driver): rank the configs by their order, so the first one runs."""

    def _bench(self: Any, *args: Any, config: Any, **meta: Any) -> list[float]:
        rank = float(self.configs.index(config)) if config in self.configs else 0.0
        return [rank, rank, rank]

    triton.runtime.autotuner.Autotuner._bench = _bench


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
        raise SolutionImportError(f"importing {req.entry_file} failed: {type(e).__name__}: {e}\n{tb}") from None
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


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _normalize(result: Any, metas: list[TensorMeta]) -> dict[str, torch.Tensor]:
    values = list(result) if isinstance(result, tuple | list) else [result]
    if len(values) != len(metas):
        raise OutputMismatch(f"the entry point returned {len(values)} value(s); the definition has "
                             f"{len(metas)} output(s): {', '.join(m.name for m in metas)}")
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
    """The live buffers of one correctness case."""

    def __init__(self, req: HarnessRequest, case: CaseSpec, device: torch.device) -> None:
        self.spec = case
        self.data: dict[str, torch.Tensor] = torch.load(case.inputs_file, weights_only=True)
        self.inputs: dict[str, tuple[Guarded, torch.Tensor]] = {}
        self.args: list[Any] = []
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


def _run_case(fn: Callable[..., Any], req: HarnessRequest, case: CaseSpec, device: torch.device,
              workdir: Path, launches: Callable[[], int]) -> tuple[CaseRun, dict[str, torch.Tensor] | None, _Case | None]:
    run = CaseRun(name=case.name)
    try:
        live = _Case(req, case, device)
        _sync(device)
        n0 = launches()
        t0 = time.perf_counter()
        result = fn(*live.args)
        _sync(device)
        run.call_ms = (time.perf_counter() - t0) * 1e3
        run.launches = launches() - n0
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
        return run, None, None
    rel = f"out/{case.name}.pt"
    torch.save(saved, workdir / rel)
    run.output_file = rel
    return run, saved, live


# --- timing ----------------------------------------------------------------------------------

def _spot_ok(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], spec: TimingSpec,
             gen: torch.Generator) -> bool:
    for name, exp in expected.items():
        g = got.get(name)
        if g is None or g.shape != exp.shape:
            return False
        n = exp.numel()
        if n == 0:
            continue
        idx = torch.randint(0, n, (min(spec.spot_checks, n),), generator=gen)
        a = g.reshape(-1)[idx.to(g.device)].to("cpu", torch.float64)
        b = exp.reshape(-1)[idx].to(torch.float64)
        if not bool(torch.isclose(a, b, rtol=spec.rtol, atol=spec.atol, equal_nan=True).all()):
            return False
    return True


def stop_for_parent() -> None:
    """Stop this process until the parent continues it (the timing handshake): the parent
    stages a round's inputs, or starts / stops its own clock, while we are stopped."""
    os.kill(os.getpid(), signal.SIGSTOP)


def _time(fn: Callable[..., Any], req: HarnessRequest, device: torch.device, workdir: Path,
          result: HarnessResult) -> None:
    """The timing rounds (see TimingSpec): per round, stop for the inputs, set up the buffer
    sets, stop again (the parent starts its clock when it continues us), run the calls, and
    stop at the next round's start (the parent's clock stops there)."""
    spec = req.timing
    assert spec is not None
    (workdir / "out").mkdir(exist_ok=True)
    gen = torch.Generator().manual_seed(req.seed)
    flush_buf = torch.empty(max(spec.flush_bytes, 1), dtype=torch.uint8, device=device)
    timer = timing.make_timer(spec.timer) if spec.timer != "do_bench" else None
    result.timer = timer.name if timer is not None else "do_bench"
    kept: dict[str, dict[str, torch.Tensor]] = {}  # last outputs of the previous round, saved outside the clock
    for k in range(spec.trials):
        stop_for_parent()  # the parent's clock (previous round) stops; it stages round k
        _save_kept(kept, workdir, result)
        inputs = Path(spec.inputs_dir) if spec.inputs_dir else workdir
        data: dict[str, dict[str, torch.Tensor]] = torch.load(inputs / round_file(k), weights_only=True)
        run, kept = _round(fn, req, data, device, timer, flush_buf, gen, result)
        result.timing.append(run)
    stop_for_parent()  # the last round's clock stops
    _save_kept(kept, workdir, result)


def _save_kept(kept: dict[str, dict[str, torch.Tensor]], workdir: Path, result: HarnessResult) -> None:
    for c, out in kept.items():
        rel = f"out/timed-{c}.pt"
        torch.save(out, workdir / rel)
        result.timed_outputs[c] = rel


def _round(fn: Callable[..., Any], req: HarnessRequest, data: dict[str, dict[str, torch.Tensor]],
           device: torch.device, timer: timing.Timer | None, flush_buf: torch.Tensor, gen: torch.Generator,
           result: HarnessResult) -> tuple[TimingRun, dict[str, dict[str, torch.Tensor]]]:
    """One timing round on the contents in `data`; returns its run and the last output of
    each content (for the parent's full check)."""
    spec = req.timing
    assert spec is not None
    like = next(c for c in req.cases if c.name == spec.like)
    R = spec.rotation
    contents = sorted(data)
    S = len(contents)
    pristine = {c: {n: t.to(device) for n, t in ins.items()} for c, ins in data.items()}
    sets: list[dict[str, Any]] = []
    mutated = [0]
    for b in range(R):
        c = contents[b % S]
        ins = {n: t.clone() for n, t in pristine[c].items()}
        outs = {o.name: torch.empty(tuple(o.shape or ()), dtype=TORCH_DTYPES[o.dtype], device=device)
                for o in like.outputs} if req.destination_passing else {}
        args = [like.scalars[m.name] if m.shape is None else ins[m.name] for m in req.inputs]
        args += list(outs.values())
        sets.append({"content": c, "ins": ins, "outs": outs, "args": args, "last": None})
    result.footprint_bytes = R * sum(t.numel() * t.element_size()
                                     for t in (*sets[0]["ins"].values(), *sets[0]["outs"].values()))
    for st in sets:
        for t in st["outs"].values():
            t.fill_(poison_value(t.dtype))
    first: dict[str, dict[str, torch.Tensor]] = {}
    kept: dict[str, dict[str, torch.Tensor]] = {}
    warm: list[float] = []
    total = spec.warmup + spec.reps

    def outputs_of(st: dict[str, Any]) -> dict[str, torch.Tensor]:
        if req.destination_passing:
            return st["outs"]
        return _normalize(st["last"], like.outputs)

    def call(t: int) -> None:
        st = sets[t % R]

        def once() -> None:
            res = fn(*st["args"])
            if not req.destination_passing:
                st["last"] = res

        if t < spec.warmup and timer is not None:  # the same timer: the parent's bound counts every call
            warm.append(timer.time(once))
        else:
            once()

    def after(t: int) -> bool:
        st = sets[t % R]
        c = contents[t % S]
        try:
            got = outputs_of(st)
            if st["content"] != c:
                ok = False
            elif c not in first:  # the content's first output this round: later calls must agree with it
                first[c] = {n: v.detach().to("cpu").clone() for n, v in got.items()}
                ok = True
            else:
                ok = _spot_ok(got, first[c], spec, gen)
        except OutputMismatch:
            got, ok = {}, False
        if t >= total - S:  # the last call of this content in the round: checked in full by the parent
            kept[c] = {n: v.detach().to("cpu").clone() for n, v in got.items()}
        if not all(same_bytes(v, pristine[st["content"]][n]) for n, v in st["ins"].items()):
            mutated[0] += 1  # inputs are read-only in timed calls too
        nxt = contents[(t + R) % S]
        for n, dst in st["ins"].items():  # restocked every call: a mutation cannot reach the next one
            dst.copy_(pristine[nxt][n])
        st["content"] = nxt
        for v in st["outs"].values():
            v.fill_(poison_value(v.dtype))
        return ok

    stop_for_parent()  # set up; the parent's clock starts when it continues us
    if timer is None:  # triton.testing.do_bench: its own flush and loop, on one buffer set
        s0 = sets[0]
        run = timing.do_bench_trials(lambda: fn(*s0["args"]), warmup_ms=25, rep_ms=100, trials=1)[0]
        got = outputs_of(s0) if req.destination_passing else _normalize(fn(*s0["args"]), like.outputs)
        kept[s0["content"]] = {n: v.detach().to("cpu").clone() for n, v in got.items()}
        return run, kept
    run = timing.measure(call=call, after=after, flush=flush_buf.zero_, timer=timer, warmup=spec.warmup,
                         reps=spec.reps, trials=1)[0]
    run.warmup_ms = warm
    run.mutated = mutated[0]
    return run, kept


# --- entry -----------------------------------------------------------------------------------

def run(payload: bytes, workdir: Path) -> HarnessResult:
    """Sandbox target."""
    t_start = time.perf_counter()
    req = msgspec.msgpack.decode(payload, type=HarnessRequest)
    device = torch.device(req.device)
    result = HarnessResult(cases=[], versions={"torch": str(torch.__version__), "triton": str(triton.__version__)})
    if device.type == "cuda":
        result.device_name = torch.cuda.get_device_name(device)
        result.versions["cuda"] = str(torch.version.cuda)
    (workdir / "out").mkdir(exist_ok=True)
    if os.environ.get("TRITON_INTERPRET") == "1":
        interpreter_autotune()
        if device.type == "cpu":
            install_cuda_shim()
    launches = count_launches()
    fn = load_entry(req, workdir)
    result.phase_s["import"] = time.perf_counter() - t_start
    ok = True
    for case in req.cases:
        run_, saved, live = _run_case(fn, req, case, device, workdir, launches)
        result.cases.append(run_)
        if saved is None or live is None:
            ok = False
            break
        ok = ok and not run_.mutated and not run_.overflow
    t_correct = time.perf_counter()
    result.phase_s["correctness"] = t_correct - t_start
    if req.timing is None:
        return result
    if not ok:
        result.skipped_timing = "not timed: a correctness case failed"
        return result
    _time(fn, req, device, workdir, result)
    result.phase_s["timing"] = time.perf_counter() - t_correct
    return result
