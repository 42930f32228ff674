"""The Neuron agent's `emulate` mode: NKI kernels checked in AccelOpt's NKI emulator, timed by
nobody, priced by the trn1 cost model (chosen where the Neuron SDK is missing).

    1. compile: the kernel's sandboxed child traces the entry on each argument signature
       (shapes only; it never receives data) into program files (`emulator/children.py`);
    2. the agent reads each program (bounded), decodes it and validates every instruction
       again (`validate.check_program`): whatever the kernel's process did to its own
       tracer, what it hands over is only a program, and a program that breaks a hardware
       rule is a compile error;
    3. execute: a second sandboxed child, which imports no kernel code, runs the validated
       programs on the staged inputs of every case (the correctness seeds and adversarial
       cases) and saves the outputs;
    4. the agent judges the outputs against its float64 references as the other modes do;
    5. the estimate: the cost model prices the validated program here, in the agent
       (`emulator/cost.py`): status `unmeasured`, `Profile.estimate` holds the estimated
       latency and % of peak; `Profile.latency` and `peak_fraction` stay empty.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from accelopt.problem import Problem, Solution
from accelopt.profile import Estimate, Profile, peak_fraction
from hardware_agents.base import DeviceSpec, t_peak
from hardware_agents.neuron.data import ProblemData, stage_threads
from hardware_agents.neuron.judge import judge_cases, stage_sources
from hardware_agents.pipeline.phases import Phases
from hardware_agents.pipeline.verdict import Verdict
from hardware_agents.sandbox import Sandbox, SandboxOutcome, SandboxPolicy, default_base_dir, private_dir

MAX_PROGRAM_BYTES = 256 << 20
COMPILE_TARGET = "hardware_agents.neuron.emulator.children:compile_target"
EXECUTE_TARGET = "hardware_agents.neuron.emulator.children:execute_target"
# device memory (arguments, outputs, scratch) of the cases an execute child runs at once
EXECUTE_BATCH_BYTES = 1 << 30


def _signature(args: list[Any]) -> list[Any]:
    from hardware_agents.neuron.emulator.dtypes import canon
    from hardware_agents.neuron.emulator.kernel import ArgSpec

    out = []
    for a in args:
        if a.path:
            arr = np.load(a.path, mmap_mode="r", allow_pickle=False)
            out.append(ArgSpec(shape=[int(s) for s in arr.shape], dtype=canon(arr.dtype)))
        else:
            out.append(ArgSpec(scalar=a.scalar))
    return out


def _groups(n: int, parts: int) -> list[list[int]]:
    """0..n-1 in `parts` contiguous groups of (nearly) equal size."""
    parts = max(1, min(n, parts))
    size, extra = divmod(n, parts)
    out, lo = [], 0
    for k in range(parts):
        hi = lo + size + (1 if k < extra else 0)
        out.append(list(range(lo, hi)))
        lo = hi
    return out


def _ended(v: Verdict, out: SandboxOutcome, what: str, compiling: bool) -> Profile | None:
    """The verdict on an emulator child's end (None: it ended `ok`); `v` takes its isolation
    and output."""
    v.heard(out)
    return v.ended(
        out,
        timeout=f"{out.error} while {what}",
        crashed=f"the emulator crashed while {what}: {out.error}",
        error=f"the emulator crashed while {what}: {out.error}",
        compile_error=compiling,
    )


def profile_emulated(
    v: Verdict,
    problem: Problem,
    solution: Solution,
    data: ProblemData,
    policy: SandboxPolicy,
    entry_file: str,
    entry: str,
    timeout: float,
    *,
    kind: str,
    spec: DeviceSpec,
    sandbox_dir: Path | None,
    phases: Phases | None = None,
) -> Profile:
    """One profile in the `emulate` mode (see the module doc); `v` is the agent's verdict.
    `phases` records where the wall time goes (`compile_s`, `validate_s`, `analyse_s`,
    `execute_s`, `references_s`, `judge_s` (with `floor_s` inside it), `price_s` in the
    counters), on our clock."""
    from hardware_agents.neuron.emulator.analysis import analyze
    from hardware_agents.neuron.emulator.children import (
        CompileRequest,
        CompileResult,
        ExecCase,
        ExecRequest,
        ExecResult,
    )
    from hardware_agents.neuron.emulator.cost import COST_SPECS, estimate
    from hardware_agents.neuron.emulator.errors import NKIError
    from hardware_agents.neuron.emulator.program import decode
    from hardware_agents.neuron.emulator.validate import check_program

    phases = phases or Phases(v.counters)
    sigs: list[list[Any]] = []
    case_sig: list[int] = []
    for c in data.cases:
        sig = _signature(c.args)
        if sig not in sigs:
            sigs.append(sig)
        case_sig.append(sigs.index(sig))
    # 1. compile in the kernel's sandbox: it may read nothing but its own work dir
    cpolicy = msgspec.structs.replace(
        policy, read_paths=(), python_path=(), address_space_bytes=max(policy.address_space_bytes, 8 << 30)
    )
    with Sandbox(cpolicy, base_dir=sandbox_dir) as box:
        kernel_file = stage_sources(box, solution, entry_file)
        with phases("compile"):
            out = box.run(
                COMPILE_TARGET,
                CompileRequest(kernel_file=kernel_file, entry=entry, signatures=sigs),
                timeout_s=timeout,
            )
        failed = _ended(v, out, "compiling the kernel in the emulator", compiling=True)
        if failed is not None:
            return failed
        try:
            res = out.decode(CompileResult)
        except msgspec.DecodeError as e:
            return v.fail("compile_error", f"unreadable compile result: {e}{v.tail}")
        v.tools = dict(res.versions)
        if res.error is not None:
            err = res.error
            what = "loading the kernel module failed" if err.phase == "load" else "compilation failed"
            return v.fail("compile_error", f"{what}: {err.type}: {err.message}\n{err.traceback}{v.tail}")
        if len(res.programs) != len(sigs):
            return v.fail(
                "compile_error", f"the compiler produced {len(res.programs)} of {len(sigs)} programs"
            )
        # 2. the programs, read and validated here
        progs = []
        blobs = []
        try:
            with phases("validate"):
                for rel in res.programs:
                    raw = box.read_file(rel, MAX_PROGRAM_BYTES)
                    prog = decode(raw)
                    check_program(prog)
                    progs.append(prog)
                    blobs.append(raw)
        except NKIError as e:
            return v.fail("compile_error", f"compilation failed: {e}{v.tail}")
        except (OSError, msgspec.DecodeError, KeyError, IndexError, ValueError, TypeError) as e:
            return v.fail(
                "compile_error",
                f"the compiled program is unreadable or malformed: {type(e).__name__}: {e}{v.tail}",
            )
    analyses = []
    try:
        with phases("analyse"):
            for prog in progs:
                analyses.append(analyze(prog))  # PSUM overflow: a compile error
    except NKIError as e:
        return v.fail("compile_error", f"compilation failed: {e}")
    # 3. execute in a second sandbox that loads no kernel code
    pdir = private_dir(sandbox_dir or default_base_dir(), "accelopt-nki-programs-")
    try:
        os.chmod(pdir, 0o755)
        paths = []
        for i, raw in enumerate(blobs):
            p = pdir / f"prog{i}.msgpack"
            p.write_bytes(raw)
            os.chmod(p, 0o644)
            paths.append(str(p))
        epolicy = msgspec.structs.replace(policy, read_paths=(str(data.dir), str(pdir)), python_path=())
        cases = [
            ExecCase(name=c.case.name, program=paths[case_sig[i]], args=c.args)
            for i, c in enumerate(data.cases)
        ]
        isolation = dict(v.isolation)  # the kernel's sandbox: what every later profile records
        groups = _groups(len(cases), min(len(cases), stage_threads()))
        with contextlib.ExitStack() as stack:
            # one execute child per group of cases, side by side (each single-threaded); each
            # work dir holds its cases' outputs
            boxes = [
                stack.enter_context(
                    Sandbox(
                        msgspec.structs.replace(
                            epolicy, workdir_bytes=data.workdir_bytes(len(g), policy.workdir_bytes)
                        ),
                        base_dir=sandbox_dir,
                    )
                )
                for g in groups
            ]
            reqs = [ExecRequest(cases=[cases[i] for i in g], batch_bytes=EXECUTE_BATCH_BYTES) for g in groups]
            with phases("execute"), ThreadPoolExecutor(max_workers=len(boxes)) as pool:
                futures = [
                    pool.submit(b.run, EXECUTE_TARGET, r, timeout_s=timeout)
                    for b, r in zip(boxes, reqs, strict=True)
                ]
                eouts = [f.result() for f in futures]
            runs: list[tuple[Sandbox, str, list[str], bool]] = []
            for ebox, req, eout in zip(boxes, reqs, eouts, strict=True):  # in the cases' order
                failed = _ended(v, eout, "running the kernel in the emulator", compiling=False)
                if failed is not None:
                    return failed
                try:
                    eres = eout.decode(ExecResult)
                except msgspec.DecodeError as e:
                    return v.fail("runtime_error", f"unreadable emulator result: {e}")
                if eres.error is not None:
                    err = eres.error
                    status = "compile_error" if err.phase == "compile" else "runtime_error"
                    where = f" (case {err.case})" if err.case else ""
                    return v.fail(
                        status, f"the kernel failed in the emulator{where}: {err.type}: {err.message}"
                    )
                if [r.name for r in eres.cases] != [c.name for c in req.cases]:
                    return v.fail("runtime_error", "the emulator's results do not match the cases")
                runs.extend((ebox, r.name, r.outputs, r.returned_tuple) for r in eres.cases)
            # 4. correctness, judged here (each case once its references are computed)
            v.isolation.clear()
            v.isolation.update(isolation)
            v.tail = ""
            with phases("references"):  # waiting for the reference thread, if it is behind
                data.wait_references()
            with phases("judge"):
                v.checks.extend(judge_cases(problem, data, runs, phases))
    finally:
        shutil.rmtree(pdir, ignore_errors=True)
    wrong = v.wrong_cases()
    if wrong is not None:
        return wrong
    # 5. the estimate (the programs of all signatures are the same kernel; price the first case's)
    if kind not in COST_SPECS:
        return v.fail(
            "unmeasured",
            f"correct in AccelOpt's NKI emulator; no cost model for {kind} (not timed, not estimated)",
        )
    sig0 = case_sig[0]
    with phases("price"):
        est = estimate(progs[sig0], kind, analyses[sig0])
    tp, bound = t_peak(problem, spec)
    t_est = est.latency_s
    pct = peak_fraction(tp, t_est) or 0.0
    detail = {
        "instructions": float(est.instructions),
        "hbm_bytes": est.hbm_bytes,
        "spill_bytes": est.spill_bytes,
        "fixed_ms": est.fixed_s * 1e3,
        "peak_sbuf_bytes_per_partition": float(est.peak_sbuf_bytes),
        "peak_psum_bytes_per_partition": float(est.peak_psum_bytes),
        # model 2: perfect overlap vs the dependence-aware schedule, and how much they differ
        "engines_bound_ms": est.resource_s * 1e3,
        "critical_path_ms": est.critical_path_s * 1e3,
        "dependency_ms": est.dependency_s * 1e3,
        "engine_overlap": est.overlap,
    }
    estimate_rec = Estimate(
        latency_ms=t_est * 1e3,
        peak_fraction=pct,
        t_peak_ms=tp * 1e3,
        bound=est.bound,
        engines_ms={k: t * 1e3 for k, t in est.engines_s.items()},
        model=est.model,
        detail=detail,
    )
    # No plausibility gate on an estimate: it comes from our cost model pricing the program we
    # validated, not from the kernel's process, and the paper's roofline counts FLOPs a fused
    # instruction does not spend (softmax's subtract inside the exp's bias), so an honest
    # kernel may be estimated above 100 % of that roofline (docs/neuron.md).
    log = (
        f"correct in AccelOpt's NKI emulator ({len(v.checks)} cases); not timed: ESTIMATED {t_est * 1e3:.4g} ms "
        f"on {kind} by {est.model} ({est.bound}-bound; {pct * 100:.1f}% of the {bound} roofline, estimated)"
    )
    prof = v.fail("unmeasured", log)
    prof.estimate = estimate_rec
    return prof


__all__ = ["profile_emulated"]
