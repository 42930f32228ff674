"""The Neuron harness: runs inside the sandbox, imports the NKI kernel, compiles and runs it.

`run` (correctness or timing, as the request says):
- loads the kernel module (a failure here, or a missing entry, is a compile error);
- correctness: for each case, the kernel's positional arguments (already transformed by
  the agent with the problem's `transform_to_nki_inputs`) are loaded from .npy files and
  the kernel is called through `nki.baremetal(kernel, save_neff_name=..., additional_
  compile_opt=...)` on a device or `nki.simulate_kernel(kernel, *args)` without one; the
  outputs are saved for the agent, which judges them;
- timing (device only): rounds the agent drives (see protocol.py): per round, the fresh
  inputs the agent hands over when the round starts, `warmup` unsaved runs, then `runs`
  runs that each save a NEFF, an NTFF and their outputs (the agent checks every one against
  its own reference). How many rounds is the agent's decision; it re-derives every number
  from the profiler files in a separate child and bounds them by its own clock.

Compile versus runtime errors: a NEFF on disk means compilation finished, so an exception
after it is a runtime error (also when the message names the Neuron runtime); before it, a
compile error. The current phase is also written to `.stage`, so a crash or timeout that
leaves no result can be attributed.

Everything is imported at module level: the sandbox imports this module before it drops
privileges, after which the interpreter may not be able to read its own library.
"""

from __future__ import annotations

import functools  # noqa: F401  (for kernels: imported before the privilege drop)
import importlib
import importlib.util
import itertools  # noqa: F401
import math  # noqa: F401
import mmap  # noqa: F401  (np.load(mmap_mode=...) imports it lazily)
import os
import platform
import re
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import numpy.lib.format
import numpy.random

from hardware_agents.neuron.kernel_module import load_kernel
from hardware_agents.neuron.outputs import save_outputs
from hardware_agents.neuron.profile_summary import SummaryError, parse_summary
from hardware_agents.neuron.profile_view import profile_total_time
from hardware_agents.neuron.protocol import (
    CaseRun,
    ErrorInfo,
    HarnessRequest,
    HarnessResult,
    KernelArg,
    Phase,
    TimedRun,
    TimingRound,
    profiled_pair,
    report_file,
    round_file,
    timed_output,
)
from hardware_agents.pipeline import buffers

# The SDK, when this Python has it (the agent never imports it itself).
_SDK_MODULES = (
    "neuronxcc",
    "neuronxcc.nki",
    "neuronxcc.nki.language",
    "neuronxcc.nki.isa",
    "neuronxcc.nki.typing",
    "neuronxcc.nki.compiler",
)
_sdk_errors: dict[str, str] = {}
for _name in _SDK_MODULES:
    try:
        importlib.import_module(_name)
    except Exception as _e:  # a missing optional submodule is fine
        _sdk_errors[_name] = f"{type(_e).__name__}: {_e}"

_RUNTIME_HINTS = re.compile(
    r"\bnrt[_.]|\bNRT\b|NRT_|neuron[ _-]?runtime|\bNERR|libnrt|execution (?:failed|timed out)|nrt_execute|nrt_load",
    re.IGNORECASE,
)
_STAGE = ".stage"


def _stage(workdir: Path, text: str) -> None:
    try:
        (workdir / _STAGE).write_text(text)
    except OSError:
        pass


def _nki() -> Any:
    mod = sys.modules.get("neuronxcc.nki")
    if mod is None:
        raise ImportError(
            "neuronxcc.nki is not importable in the sandbox: "
            + (_sdk_errors.get("neuronxcc.nki") or _sdk_errors.get("neuronxcc") or "unknown")
        )
    return mod


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "numpy": np.__version__}
    cc = sys.modules.get("neuronxcc")
    if cc is not None:
        out["neuronx-cc"] = str(getattr(cc, "__version__", "unknown"))
    for key in (
        "NEURON_RT_VISIBLE_CORES",
        "NEURON_RT_NUM_CORES",
        "NEURON_CC_FLAGS",
        "NEURON_PLATFORM_TARGET_OVERRIDE",
    ):
        if os.environ.get(key):
            out[key.lower()] = os.environ[key]
    return out


def _load_args(args: list[KernelArg]) -> list[Any]:
    out: list[Any] = []
    for a in args:
        out.append(np.load(a.path, allow_pickle=False) if a.path else a.scalar)
    return out


def _phase_of(e: BaseException, neff: Path | None, compiled_before: bool) -> Phase:
    if compiled_before:
        return "run"
    if _RUNTIME_HINTS.search(f"{type(e).__name__}: {e}"):
        return "run"
    if neff is not None and neff.is_file() and neff.stat().st_size > 0:
        return "run"
    return "compile"


def _call(
    req: HarnessRequest, kernel: Any, args: list[Any], *, neff: Path | None = None, ntff: Path | None = None
) -> Any:
    nki = _nki()
    if req.mode == "simulate":
        if hasattr(nki, "simulate_kernel"):
            return nki.simulate_kernel(kernel, *args)
        return nki.simulate(kernel)(*args)  # newer SDKs: nki.simulate(kernel) returns the simulated callable
    opts: dict[str, Any] = {}
    if neff is not None:
        opts["save_neff_name"] = str(neff)
    if ntff is not None:
        opts["save_trace_name"] = str(ntff)
    if req.compile_options:
        opts["additional_compile_opt"] = req.compile_options
    return nki.baremetal(kernel, **opts)(*args)


def _outputs(result: Any) -> tuple[list[np.ndarray], bool]:
    if result is None:
        return [], False
    if isinstance(result, tuple | list):
        return [np.asarray(r) for r in result], True
    return [np.asarray(result)], False


def _correctness(req: HarnessRequest, kernel: Any, workdir: Path, res: HarnessResult) -> None:
    compiled = False
    art = workdir / "art"
    art.mkdir(exist_ok=True)
    for i, case in enumerate(req.cases):
        _stage(workdir, f"{'run' if compiled else 'compile'}:{case.name}")
        try:
            args = _load_args(case.args)
        except Exception as e:
            res.error = ErrorInfo.of("run", e, case.name)
            return
        neff = art / f"case{i}.neff" if req.mode == "device" else None
        t0 = time.perf_counter()
        try:
            with np.errstate(all="ignore"):
                out = _call(req, kernel, args, neff=neff)
        except BaseException as e:
            res.error = ErrorInfo.of(_phase_of(e, neff, compiled), e, case.name)
            return
        wall = time.perf_counter() - t0
        if not compiled:
            res.compile_s = wall
        compiled = True
        run = CaseRun(name=case.name, wall_s=wall)
        outs, run.returned_tuple = _outputs(out)
        save_outputs(workdir, run, outs)
        for j, (spec, arg) in enumerate(zip(case.args, args, strict=True)):
            if spec.path and isinstance(arg, np.ndarray):
                pristine = np.load(spec.path, mmap_mode="r", allow_pickle=False)
                if not buffers.same_bytes(arg, np.asarray(pristine)):
                    run.mutated.append(j)
        res.cases.append(run)


def stop_for_parent() -> None:
    """Stop until the agent continues us (the timing handshake, see protocol.py)."""
    os.kill(os.getpid(), signal.SIGSTOP)


def _save_outputs(workdir: Path, k: int, i: int, out: Any, run: TimedRun) -> None:
    outs, run.returned_tuple = _outputs(out)
    for j, arr in enumerate(outs):
        np.save(workdir / timed_output(k, i, j), np.ascontiguousarray(arr), allow_pickle=False)
    run.outputs = len(outs)


def _time(req: HarnessRequest, kernel: Any, workdir: Path, res: HarnessResult) -> None:
    """The timing rounds the agent drives: per round, stop for its inputs, load them, stop
    (the agent starts its clock when it continues us), run `warmup` calls and `runs` profiled
    calls (saving every profiled run's outputs), write the round's report and stop (the
    agent's clock stops there). No inputs for the next round: done. The agent reads a
    round's files while we are stopped; we remove them when it continues us."""
    spec = req.timing
    assert spec is not None
    (workdir / "art").mkdir(exist_ok=True)
    (workdir / "out").mkdir(exist_ok=True)
    inputs = Path(spec.inputs_dir)
    k = 0
    while True:
        _stage(workdir, f"timing:wait{k}")
        stop_for_parent()
        if res.rounds:  # the agent has read the previous round's files
            for i, prev in enumerate(res.rounds[-1].runs):
                for rel in (
                    *profiled_pair(k - 1, i),
                    *(timed_output(k - 1, i, j) for j in range(prev.outputs)),
                ):
                    (workdir / rel).unlink(missing_ok=True)
        if not (inputs / round_file(k)).is_file():
            return
        specs = msgspec.msgpack.decode((inputs / round_file(k)).read_bytes(), type=list[KernelArg])
        args = _load_args(specs)
        rnd = TimingRound()
        res.rounds.append(rnd)
        _stage(workdir, f"timing:round{k}")
        stop_for_parent()  # ready: the agent's clock starts when it continues us
        for _ in range(spec.warmup):
            _call(req, kernel, args)
        for i in range(spec.runs):
            neff, ntff = (workdir / p for p in profiled_pair(k, i))
            out = _call(req, kernel, args, neff=neff, ntff=ntff)
            run = TimedRun()
            _save_outputs(workdir, k, i, out, run)
            if req.neuron_profile:
                text, _err = profile_total_time(req.neuron_profile, neff, ntff)
                try:
                    run.total_time_s = parse_summary(text).total_time_s if text else None
                except SummaryError:
                    run.total_time_s = None
            rnd.runs.append(run)
        for j, (a, arg) in enumerate(zip(specs, args, strict=True)):
            if a.path and isinstance(arg, np.ndarray):
                pristine = np.load(a.path, mmap_mode="r", allow_pickle=False)
                if not buffers.same_bytes(arg, np.asarray(pristine)):
                    rnd.mutated.append(j)
        (workdir / report_file(k)).write_bytes(msgspec.msgpack.encode(rnd))
        k += 1


def run(payload: bytes, workdir: Path) -> HarnessResult:
    """Sandbox target: correctness cases, or the timing loop."""
    req = msgspec.msgpack.decode(payload, type=HarnessRequest)
    res = HarnessResult(versions=versions())
    _stage(workdir, "load")
    try:
        _nki()
        kernel = load_kernel(req.kernel_file, req.entry)
    except BaseException as e:
        res.error = ErrorInfo.of("load", e)
        return res
    if req.cases:
        _correctness(req, kernel, workdir, res)
    if req.timing is not None and res.error is None:
        try:
            with np.errstate(all="ignore"):
                _time(req, kernel, workdir, res)
        except BaseException as e:
            res.timing_error = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=20)}"[-20000:]
    _stage(workdir, "done")
    return res


__all__ = ["run", "stop_for_parent", "versions"]
