"""The Neuron agent's `emulate` mode: NKI kernels checked in AccelOpt's NKI emulator, timed by
nobody, priced by the trn1 cost model (chosen where the Neuron SDK is missing).

    1. compile: the kernel's sandboxed child (no new processes: seccomp `no_fork`) traces
       the entry on each argument signature (shapes only; it never receives data) into
       program files (`emulator/children.py`); it hands over nothing else we believe (its
       compile time is our clock around it);
    2. the agent reads each program (bounded), decodes it and validates every instruction
       again (`validate.check_program`, against the signature it asked for): whatever the
       kernel's process did to its own tracer, what it hands over is only a program, and a
       program that breaks a hardware rule, or claims what the executor would not do, is a
       compile error;
    3. execute: a second sandboxed child, which imports no kernel code, runs the validated
       programs on the staged inputs of every case (the correctness seeds, the adversarial
       cases, and one case drawn now, after the kernel was traced, on a fresh seed from the
       OS's random source) and saves the outputs;
    4. the agent judges the outputs against its float64 references as the other modes do (a
       one/zero flag the data contradicts is `incorrect` too);
    5. the estimate: the cost model prices the validated program here, in the agent
       (`emulator/cost.py`): status `unmeasured`, `Profile.estimate` holds the estimated
       latency and % of peak; `Profile.latency` and `peak_fraction` stay empty. An estimate
       faster than the hard roofline (`estimate_gate.py`) is rejected (`incorrect`), as a
       measurement faster than the roofline is.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from accelopt.problem import Problem, Solution
from accelopt.profile import Estimate, Profile, peak_fraction
from hardware_agents.base import DeviceSpec, t_peak
from hardware_agents.neuron.data import ProblemData, TimingRound
from hardware_agents.neuron.estimate_gate import implausible_estimate
from hardware_agents.neuron.judge import check_outputs, output_cap, stage_sources
from hardware_agents.neuron.reference import ReferenceModule
from hardware_agents.pipeline.cases import fresh_seed
from hardware_agents.pipeline.verdict import Verdict
from hardware_agents.sandbox import Sandbox, SandboxOutcome, SandboxPolicy, default_base_dir, private_dir

MAX_PROGRAM_BYTES = 256 << 20
COMPILE_NO_FORK = True  # the compile child starts no process (the tests take this wall down to see it hold)
COMPILE_TARGET = "hardware_agents.neuron.emulator.children:compile_target"
EXECUTE_TARGET = "hardware_agents.neuron.emulator.children:execute_target"


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


FRESH_CASE = "fresh"


def _fresh_case(problem: Problem, data: ProblemData, ref_mod: ReferenceModule) -> TimingRound:
    """Inputs drawn now, after the kernel was traced, on a seed from the OS's random source
    (never a correctness seed): a program that carries answers for the known inputs fails it."""
    error: ValueError | None = None
    for _ in range(3):
        try:
            return TimingRound(problem, ref_mod, 0, fresh_seed(data.seeds))
        except ValueError as e:  # a reference that is not finite on this seed: draw again
            error = e
    assert error is not None
    raise error


def _ended(v: Verdict, out: SandboxOutcome, what: str, compiling: bool) -> Profile | None:
    """The verdict on an emulator child's end (None: it ended `ok`); `v` takes its isolation
    and output."""
    v.record_outcome(out)
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
) -> Profile:
    """One profile in the `emulate` mode (see the module doc); `v` is the agent's verdict."""
    from hardware_agents.neuron.emulator.analysis import analyze
    from hardware_agents.neuron.emulator.children import (
        CompileRequest,
        CompileResult,
        ExecCase,
        ExecRequest,
        ExecResult,
        versions,
    )
    from hardware_agents.neuron.emulator.cost import COST_SPECS, estimate
    from hardware_agents.neuron.emulator.errors import NKIError, OneZeroFlagError
    from hardware_agents.neuron.emulator.program import decode
    from hardware_agents.neuron.emulator.validate import check_program

    sigs: list[list[Any]] = []
    case_sig: list[int] = []
    for c in data.cases:
        sig = _signature(c.args)
        if sig not in sigs:
            sigs.append(sig)
        case_sig.append(sigs.index(sig))
    # 1. compile in the kernel's sandbox: it may read nothing but its own work dir
    cpolicy = msgspec.structs.replace(
        policy,
        read_paths=(),
        python_path=(),
        address_space_bytes=max(policy.address_space_bytes, 8 << 30),
        no_fork=COMPILE_NO_FORK,  # threads only: tracing starts no process (isolation the child must report)
    )
    with Sandbox(cpolicy, base_dir=sandbox_dir) as box:
        kernel_file = stage_sources(box, solution, entry_file)
        out = box.run(
            COMPILE_TARGET,
            CompileRequest(kernel_file=kernel_file, entry=entry, signatures=sigs),
            timeout_s=timeout,
        )
        failed = _ended(v, out, "compiling the kernel in the emulator", compiling=True)
        if failed is not None:
            return failed
        compile_s = out.wall_s  # our clock around the child, never a figure of its own
        try:
            res = out.decode(CompileResult)
        except msgspec.DecodeError as e:
            return v.profile("compile_error", f"unreadable compile result: {e}{v.tail}")
        v.tools = versions()  # ours: not what the kernel's process says
        if res.error is not None:
            err = res.error
            what = "loading the kernel module failed" if err.phase == "load" else "compilation failed"
            return v.profile("compile_error", f"{what}: {err.type}: {err.message}\n{err.traceback}{v.tail}")
        if len(res.programs) != len(sigs):
            return v.profile(
                "compile_error", f"the compiler produced {len(res.programs)} of {len(sigs)} programs"
            )
        # 2. the programs, read and validated here
        progs = []
        blobs = []
        try:
            for rel, sig in zip(res.programs, sigs, strict=True):
                raw = box.read_file(rel, MAX_PROGRAM_BYTES)
                prog = decode(raw)
                check_program(prog, sig)
                progs.append(prog)
                blobs.append(raw)
        except NKIError as e:
            return v.profile("compile_error", f"compilation failed: {e}{v.tail}")
        except (OSError, msgspec.DecodeError, KeyError, IndexError, ValueError, TypeError) as e:
            return v.profile(
                "compile_error",
                f"the compiled program is unreadable or malformed: {type(e).__name__}: {e}{v.tail}",
            )
    analyses = []
    try:
        for prog in progs:
            analyses.append(analyze(prog))  # PSUM overflow: a compile error
    except NKIError as e:
        return v.profile("compile_error", f"compilation failed: {e}")
    # 3. execute in a second sandbox that loads no kernel code
    ref_mod = ReferenceModule(problem)
    fresh = _fresh_case(problem, data, ref_mod)  # drawn only now that the programs exist
    pdir = private_dir(sandbox_dir or default_base_dir(), "accelopt-nki-programs-")
    try:
        os.chmod(pdir, 0o755)
        paths = []
        for i, raw in enumerate(blobs):
            p = pdir / f"prog{i}.msgpack"
            p.write_bytes(raw)
            os.chmod(p, 0o644)
            paths.append(str(p))
        fresh_args = fresh.stage(pdir / FRESH_CASE)
        fresh_sig = _signature(fresh_args)
        if fresh_sig not in sigs:
            return v.profile("runtime_error", f"the fresh inputs do not have the cases' shapes: {fresh_sig}")
        epolicy = msgspec.structs.replace(
            policy, read_paths=(str(data.dir), str(pdir)), python_path=(), no_fork=True
        )
        cases = [
            ExecCase(name=c.case.name, program=paths[case_sig[i]], args=c.args)
            for i, c in enumerate(data.cases)
        ]
        cases.append(ExecCase(name=FRESH_CASE, program=paths[sigs.index(fresh_sig)], args=fresh_args))
        names = [c.name for c in cases]
        isolation = dict(v.isolation)  # the kernel's sandbox: what every later profile records
        with Sandbox(epolicy, base_dir=sandbox_dir) as ebox:
            eout = ebox.run(EXECUTE_TARGET, ExecRequest(cases=cases), timeout_s=timeout)
            failed = _ended(v, eout, "running the kernel in the emulator", compiling=False)
            if failed is not None:
                return failed
            try:
                eres = eout.decode(ExecResult)
            except msgspec.DecodeError as e:
                return v.profile("runtime_error", f"unreadable emulator result: {e}")
            if eres.error is not None:
                err = eres.error
                where = f" (case {err.case})" if err.case else ""
                if err.type == OneZeroFlagError.__name__:  # the hardware would compute garbage
                    return v.profile("incorrect", f"the kernel is wrong on the data{where}: {err.message}")
                status = "compile_error" if err.phase == "compile" else "runtime_error"
                return v.profile(
                    status, f"the kernel failed in the emulator{where}: {err.type}: {err.message}"
                )
            if [r.name for r in eres.cases] != names:
                return v.profile("runtime_error", "the emulator's results do not match the cases")
            # 4. correctness, judged here
            v.isolation.clear()
            v.isolation.update(isolation)
            v.tail = ""
            refs = [c.refs() for c in data.cases] + [fresh.refs]
            for case_refs, run in zip(refs, eres.cases, strict=True):
                v.checks.append(
                    check_outputs(
                        problem,
                        ref_mod,
                        case_refs,
                        ebox,
                        run.name,
                        run.outputs,
                        run.returned_tuple,
                        output_cap(data),
                    )
                )
    finally:
        shutil.rmtree(pdir, ignore_errors=True)
    fresh_failed = any(c.case == FRESH_CASE and not c.passed for c in v.checks)
    wrong = v.wrong_cases(
        f"\n(case {FRESH_CASE}: inputs drawn after the kernel was traced, on seed {fresh.case.seed}: "
        "results must not depend on knowing the inputs in advance)"
        if fresh_failed
        else ""
    )
    if wrong is not None:
        return wrong
    # 5. the estimate (the programs of all signatures are the same kernel; price the first case's)
    v.counters.update({"compile_s": compile_s, "emulate_s": sum(r.wall_s for r in eres.cases)})
    if kind not in COST_SPECS:
        return v.profile(
            "unmeasured",
            f"correct in AccelOpt's NKI emulator; no cost model for {kind} (not timed, not estimated)",
        )
    sig0 = case_sig[0]
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
    # The plausibility gate: an estimate is held to the hard roofline, what no program can beat
    # (the paper's counts a fused instruction's work as separate FLOPs: estimate_gate.py)
    why = implausible_estimate(problem, spec, COST_SPECS[kind], t_est)
    if why is not None:
        prof = v.profile("incorrect", f"{why} (model {est.model}; {pct * 100:.1f}% of the {bound} roofline)")
        prof.estimate = estimate_rec
        return prof
    log = (
        f"correct in AccelOpt's NKI emulator ({len(v.checks)} cases); not timed: ESTIMATED {t_est * 1e3:.4g} ms "
        f"on {kind} by {est.model} ({est.bound}-bound; {pct * 100:.1f}% of the {bound} roofline, estimated)"
    )
    prof = v.profile("unmeasured", log)
    prof.estimate = estimate_rec
    return prof


__all__ = ["profile_emulated"]
