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
import math  # noqa: F401
import mmap  # noqa: F401  (np.load(mmap_mode=...) imports it lazily)
import time
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import numpy.lib.format
import threadpoolctl  # noqa: F401  (the executor limits BLAS threads)

from hardware_agents.neuron import emulator
from hardware_agents.neuron.emulator import analysis, cost, isa, kernel, language, nt  # noqa: F401
from hardware_agents.neuron.emulator.errors import NKICompileError, NKIError, OneZeroFlagError
from hardware_agents.neuron.emulator.execute import execute
from hardware_agents.neuron.emulator.kernel import ArgSpec
from hardware_agents.neuron.emulator.program import decode, encode
from hardware_agents.neuron.kernel_module import load_kernel
from hardware_agents.neuron.protocol import CaseRun, ErrorInfo, KernelArg

PROGRAM_FILE = "prog{}.msgpack"


class CompileRequest(msgspec.Struct, frozen=True, kw_only=True):
    kernel_file: str
    entry: str
    signatures: list[list[ArgSpec]]


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
        rel = PROGRAM_FILE.format(i)
        (workdir / rel).write_bytes(encode(prog))
        res.programs.append(rel)
    _stage(workdir, "done")
    return res


def execute_target(payload: bytes, workdir: Path) -> ExecResult:
    """Sandbox target (no kernel code): run the validated programs on each case's inputs."""
    req = msgspec.msgpack.decode(payload, type=ExecRequest)
    res = ExecResult(versions=versions())
    programs: dict[str, Any] = {}
    (workdir / "out").mkdir(exist_ok=True)
    for case in req.cases:
        _stage(workdir, f"run:{case.name}")
        try:
            prog = programs.get(case.program)
            if prog is None:
                prog = programs[case.program] = decode(Path(case.program).read_bytes())
            args = [np.load(a.path, allow_pickle=False) if a.path else None for a in case.args]
            t0 = time.perf_counter()
            outs = execute(prog, args)
            wall = time.perf_counter() - t0
        except NKICompileError as e:
            res.error = ErrorInfo.of("compile", e, case.name)
            return res
        except OneZeroFlagError as e:  # a wrong answer the hardware would give: the agent says `incorrect`
            res.error = ErrorInfo.of("run", e, case.name)
            return res
        except NKIError as e:
            res.error = ErrorInfo.of("run", e, case.name)
            return res
        except Exception as e:
            res.error = ErrorInfo.of("run", e, case.name)
            return res
        run = CaseRun(name=case.name, wall_s=wall, returned_tuple=prog.returned_tuple)
        odir = workdir / "out" / case.name
        odir.mkdir(parents=True, exist_ok=True)
        for j, arr in enumerate(outs):
            rel = f"out/{case.name}/{j}.npy"
            np.save(workdir / rel, np.ascontiguousarray(arr), allow_pickle=False)
            run.outputs.append(rel)
        res.cases.append(run)
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
