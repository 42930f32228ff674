"""The emulator's two sandboxed steps (the Neuron agent's `emulate` mode).

`compile_target` runs in the kernel's sandbox: it installs the emulator as `neuronxcc`,
imports the kernel module and traces the entry on each argument signature (shapes and
dtypes only: the kernel never sees data) into program files. `execute_target` runs in a
second sandbox that imports no kernel code: it executes the programs the agent validated
on the staged inputs and saves the outputs. Neither result is a verdict: the agent judges
the outputs against its own references and prices the programs itself.

Everything is imported at module level: the sandbox imports this module before it drops
privileges, after which the interpreter may not be able to read its own library.
"""

from __future__ import annotations

import functools  # noqa: F401  (for kernels: imported before the privilege drop)
import itertools  # noqa: F401
import math
import mmap  # noqa: F401  (np.load(mmap_mode=...) imports it lazily)
import time
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import numpy.lib.format
import threadpoolctl

from hardware_agents.neuron import emulator
from hardware_agents.neuron.emulator import analysis, cost, dtypes, isa, kernel, language, nt  # noqa: F401
from hardware_agents.neuron.emulator.errors import NKICompileError
from hardware_agents.neuron.emulator.execute import execute_batch
from hardware_agents.neuron.emulator.kernel import ArgSpec
from hardware_agents.neuron.emulator.program import Instr, Loop, decode, encode, sources_digest
from hardware_agents.neuron.kernel_module import load_kernel
from hardware_agents.neuron.outputs import save_outputs
from hardware_agents.neuron.protocol import CaseRun, ErrorInfo, KernelArg

PROGRAM_FILE = "prog{}.msgpack"


class CompileRequest(msgspec.Struct, frozen=True, kw_only=True):
    kernel_file: str
    entry: str
    signatures: list[list[ArgSpec]]
    sources: list[str] = []  # the kernel's files, relative to the work dir: what a program is bound to


class CompileResult(msgspec.Struct, kw_only=True):
    """What the kernel's process hands over: program files and an error, nothing the agent
    records as a figure (its compile time is the agent's clock around the child)."""

    programs: list[str] = []  # program files, relative to the work dir, one per signature
    error: ErrorInfo | None = None
    versions: dict[str, str] = {}


class ExecCase(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    program: str  # absolute path of the program file the agent wrote
    args: list[KernelArg]


class ExecRequest(msgspec.Struct, frozen=True, kw_only=True):
    cases: list[ExecCase]
    # the device memory (HBM: arguments, outputs, scratch) of the cases run at once, at most
    # (one case alone may exceed it): a batch's tiles carry a case axis (`execute_batch`)
    batch_bytes: int = 1 << 30


class ExecResult(msgspec.Struct, kw_only=True):
    cases: list[CaseRun] = []
    error: ErrorInfo | None = None
    versions: dict[str, str] = {}


def versions() -> dict[str, str]:
    """The emulator's versions, as the agent records them (from its own process)."""
    import platform

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "emulator": emulator.EMULATOR_VERSION,
    }


def _stage(workdir: Path, text: str) -> None:
    try:
        (workdir / ".stage").write_text(text)
    except OSError:
        pass


def compile_target(payload: bytes, workdir: Path) -> CompileResult:
    """Sandbox target (the kernel's process): trace the kernel into one program per signature."""
    req = msgspec.msgpack.decode(payload, type=CompileRequest)
    res = CompileResult(versions=versions())
    # before any of the kernel's code runs: the files every program of it is bound to
    digest = sources_digest((rel, (workdir / rel).read_bytes()) for rel in req.sources)
    emulator.install()
    _stage(workdir, "load")
    try:
        fn = load_kernel(req.kernel_file, req.entry)
    except BaseException as e:
        res.error = ErrorInfo.of("load", e)
        return res
    _stage(workdir, "compile")
    for i, sig in enumerate(req.signatures):
        try:
            prog = kernel.compile_kernel(fn, sig)
        except BaseException as e:
            res.error = ErrorInfo.of("compile", e)
            return res
        prog.source_sha256 = digest
        rel = PROGRAM_FILE.format(i)
        (workdir / rel).write_bytes(encode(prog))
        res.programs.append(rel)
    _stage(workdir, "done")
    return res


def _hbm_bytes(prog: Any) -> int:
    """The device memory one case of a program holds: its arguments, outputs and scratch."""
    return sum(
        math.prod(t.shape) * dtypes.itemsize(t.dtype)
        for t in prog.tensors
        if t.alias < 0 and t.buffer in ("input", "shared_hbm", "hbm")
    )


# A batch walks the program once for all its cases (the Python around each instruction
# instance), but copies every case's inputs into stacked arrays and makes each tile as many times
# larger (fresh memory the kernel zeroes, on every big temporary): worth it only where the walk is
# long for the inputs' size. Measured on NKIBench's baselines at real sizes (CPU s per case, one
# case alone vs three at once, this 2-core machine): adamw (18 instances per MiB of inputs) 0.40
# vs 1.36, rope_single_freq_apply (22) 0.47 vs 0.97, silu (20) 0.59 vs 0.62; mamba (28: few
# instances, but each scan a Python loop along its tile) 2.68 vs 1.57, rmsnorm_matmul (92) 0.39
# vs 0.33, gqa_full (1338) ~2x faster in a batch.
BATCH_MIN_INSTANCES_PER_MIB = 25


def _instances(nodes: list[Any]) -> int:
    """Instruction instances a walk of `nodes` runs."""
    n = 0
    for node in nodes:
        if isinstance(node, Instr):
            n += 1
        elif isinstance(node, Loop):
            n += node.trip * _instances(node.body)
    return n


def _on_chip_bytes(prog: Any) -> int:
    """The on-chip tiles one case of a program may hold (every SBUF and PSUM tensor whole: a
    bound; gqa_full's baseline declares 8.5 MB a partition, which a batch holds per case)."""
    return sum(
        math.prod(t.shape) * dtypes.itemsize(t.dtype)
        for t in prog.tensors
        if t.alias < 0 and t.buffer in ("sbuf", "psum")
    )


def _input_bytes(prog: Any) -> int:
    return sum(math.prod(t.shape) * dtypes.itemsize(t.dtype) for t in prog.tensors if t.buffer == "input")


def _batches(req: ExecRequest, programs: dict[str, Any]) -> list[list[ExecCase]]:
    """Consecutive cases of one program, as many at once as `batch_bytes` holds (at least one;
    a case counts its device memory and its on-chip tiles), one at a time where a batch would
    not pay (`BATCH_MIN_INSTANCES_PER_MIB`)."""
    out: list[list[ExecCase]] = []
    pays = {
        key: _instances(prog.body) >= BATCH_MIN_INSTANCES_PER_MIB * _input_bytes(prog) / (1 << 20)
        for key, prog in programs.items()
    }
    for case in req.cases:
        prog = programs[case.program]
        per_case = _hbm_bytes(prog) + _on_chip_bytes(prog)
        cap = max(1, req.batch_bytes // max(1, per_case)) if pays[case.program] else 1
        if out and out[-1][0].program == case.program and len(out[-1]) < cap:
            out[-1].append(case)
        else:
            out.append([case])
    return out


def _run_batch(
    batch: list[ExecCase], prog: Any, an: Any, workdir: Path
) -> tuple[list[CaseRun], ErrorInfo | None]:
    names = ",".join(c.name for c in batch)
    try:
        args = [
            [np.load(a.path, mmap_mode="r", allow_pickle=False) if a.path else None for a in c.args]
            for c in batch
        ]
        t0 = time.perf_counter()
        outs = execute_batch(prog, args, an)
        wall = (time.perf_counter() - t0) / len(batch)
        del args
    except NKICompileError as e:
        return [], ErrorInfo.of("compile", e, names)
    except Exception as e:  # NKIError and anything else: the run failed (a OneZeroFlagError,
        # a one/zero flag the data contradicts, keeps its name: the agent says `incorrect`)
        return [], ErrorInfo.of("run", e, names)
    runs = []
    for case, case_outs in zip(batch, outs, strict=True):
        run = CaseRun(name=case.name, wall_s=wall, returned_tuple=prog.returned_tuple)
        save_outputs(workdir, run, case_outs)
        runs.append(run)
    return runs, None


def execute_target(payload: bytes, workdir: Path) -> ExecResult:
    """Sandbox target (no kernel code): run the validated programs on each case's inputs, the
    cases of one program in batches (`execute_batch`: one walk of the program for all of
    them). One thread: two threads running batches take turns at the GIL for every numpy
    call of the program's walk (the agent's reference thread has the other core)."""
    req = msgspec.msgpack.decode(payload, type=ExecRequest)
    res = ExecResult(versions=versions())
    programs: dict[str, Any] = {}
    (workdir / "out").mkdir(exist_ok=True)
    try:
        for case in req.cases:
            if case.program not in programs:
                programs[case.program] = decode(Path(case.program).read_bytes())
        analyses = {key: analysis.analyze(prog, check=False) for key, prog in programs.items()}
    except Exception as e:
        res.error = ErrorInfo.of("run", e, req.cases[0].name if req.cases else "")
        return res
    done = []
    with threadpoolctl.threadpool_limits(limits=1):
        for b in _batches(req, programs):
            _stage(workdir, "run:" + ",".join(c.name for c in b))
            done.append(_run_batch(b, programs[b[0].program], analyses[b[0].program], workdir))
            if done[-1][1] is not None:
                break
    for runs, error in done:  # in the cases' order
        if error is not None:
            res.error = error
            return res
        res.cases.extend(runs)
    _stage(workdir, "done")
    return res


__all__ = [
    "PROGRAM_FILE",
    "CompileRequest",
    "CompileResult",
    "ExecCase",
    "ExecRequest",
    "ExecResult",
    "compile_target",
    "execute_target",
    "versions",
]
