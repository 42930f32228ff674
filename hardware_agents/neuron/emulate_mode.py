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
    3. execute: sandboxed children that import no kernel code (side by side, the cases split
       between them, each running its cases in batches: `emulator/execute.py`) run the
       validated programs on the staged inputs of every case (the correctness seeds, the
       adversarial cases, and one case drawn now, after the kernel was traced, on a fresh
       seed from the OS's random source) and save the outputs;
    4. the agent judges the outputs against its float64 references as the other modes do, the
       fresh case with the others (`judge.judge_cases`: one fused pass per output, the
       float32 floor where the tolerance is missed; a one/zero flag the data contradicts is
       `incorrect` too);
    5. the estimate: the cost model prices the validated program here, in the agent
       (`emulator/cost.py`): status `unmeasured`, `Profile.estimate` holds the estimated
       latency and % of peak; `Profile.latency` and `peak_fraction` stay empty. An estimate
       faster than the hard roofline (`estimate_gate.py`) is rejected (`incorrect`), as a
       measurement faster than the roofline is.
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
from hardware_agents.neuron import heap
from hardware_agents.neuron.data import (
    FreshCase,
    JudgedCase,
    ProblemData,
    TimingRound,
    one_blas_thread,
    stage_threads,
    write_args,
)
from hardware_agents.neuron.estimate_gate import implausible_estimate
from hardware_agents.neuron.judge import judge_cases, stage_sources
from hardware_agents.neuron.protocol import ErrorInfo
from hardware_agents.neuron.reference import ReferenceModule
from hardware_agents.pipeline.cases import fresh_seed
from hardware_agents.pipeline.phases import Phases
from hardware_agents.pipeline.verdict import Verdict
from hardware_agents.sandbox import Sandbox, SandboxOutcome, SandboxPolicy, default_base_dir, private_dir

MAX_PROGRAM_BYTES = 256 << 20
COMPILE_NO_FORK = True  # the compile child starts no process (the tests take this wall down to see it hold)
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


FRESH_CASE = "fresh"


def _fresh_case(
    problem: Problem, data: ProblemData, ref_mod: ReferenceModule, *, references: bool = True, tries: int = 3
) -> TimingRound:
    """Inputs drawn now, after the kernel was traced, on a seed from the OS's random source
    (never a correctness seed): a program that carries answers for the known inputs fails it.
    With `references=False` the references are left to `_fresh_references` (computed while the
    cases run); otherwise a seed whose reference is not finite is drawn again."""
    if not references:
        return TimingRound(problem, ref_mod, 0, fresh_seed(data.seeds), references=False)
    error: ValueError | None = None
    for _ in range(tries):
        try:
            return TimingRound(problem, ref_mod, 0, fresh_seed(data.seeds))
        except ValueError as e:  # a reference that is not finite on this seed: draw again
            error = e
    assert error is not None
    raise error


def _fresh_references(fresh: TimingRound) -> None:
    """The fresh case's references, in a thread of the agent while the execute children run
    (one BLAS thread, as the problem's reference thread)."""
    with one_blas_thread():
        fresh.compute_references()


def _exec_error(v: Verdict, err: ErrorInfo) -> Profile:
    """The verdict on an execute child's error report (the cases of a batch fail together: a
    batch's error names them all)."""
    from hardware_agents.neuron.emulator.errors import OneZeroFlagError

    where = f" (case {err.case})" if err.case else ""
    if err.type == OneZeroFlagError.__name__:  # the hardware would compute garbage: the kernel is wrong
        return v.profile("incorrect", f"the kernel is wrong on the data{where}: {err.message}")
    status = "compile_error" if err.phase == "compile" else "runtime_error"
    return v.profile(status, f"the kernel failed in the emulator{where}: {err.type}: {err.message}")


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


def _stage_fresh(
    v: Verdict,
    fresh: TimingRound,
    pdir: Path,
    name: str,
    sigs: list[list[Any]],
    paths: list[str],
    phases: Phases,
) -> Any:
    """The fresh case's argument files under `pdir/name`, as an ExecCase of the program of its
    signature (or the verdict: its shapes are none of the cases')."""
    from hardware_agents.neuron.emulator.children import ExecCase

    with phases("fresh"):
        (pdir / name).mkdir(mode=0o755)
        fresh_args, _ = write_args(fresh.args, pdir / name, digest=False)
    fresh_sig = _signature(fresh_args)
    if fresh_sig not in sigs:
        return v.profile("runtime_error", f"the fresh inputs do not have the cases' shapes: {fresh_sig}")
    return ExecCase(name=FRESH_CASE, program=paths[sigs.index(fresh_sig)], args=fresh_args)


Run = tuple[Sandbox, str, list[str], bool]  # a case's work dir, name, output files, returned a tuple


def _execute(
    v: Verdict,
    stack: contextlib.ExitStack,
    cases: list[Any],
    data: ProblemData,
    epolicy: SandboxPolicy,
    workdir_floor: int,
    sandbox_dir: Path | None,
    timeout: float,
    phases: Phases,
) -> list[Run] | Profile:
    """Run `cases` (ExecCases) in execute children side by side, one per group of cases (each
    single-threaded; each work dir holds its cases' outputs, and stays open in `stack`): per
    case in order, its run, or the verdict on a child that failed."""
    from hardware_agents.neuron.emulator.children import ExecRequest, ExecResult

    groups = _groups(len(cases), min(len(cases), stage_threads()))
    boxes = [
        stack.enter_context(
            Sandbox(
                msgspec.structs.replace(epolicy, workdir_bytes=data.workdir_bytes(len(g), workdir_floor)),
                base_dir=sandbox_dir,
            )
        )
        for g in groups
    ]
    reqs = [ExecRequest(cases=[cases[i] for i in g], batch_bytes=EXECUTE_BATCH_BYTES) for g in groups]
    with phases("execute"), ThreadPoolExecutor(max_workers=len(boxes)) as pool:
        futures = [
            pool.submit(b.run, EXECUTE_TARGET, r, timeout_s=timeout) for b, r in zip(boxes, reqs, strict=True)
        ]
        eouts = [f.result() for f in futures]
    runs: list[Run] = []
    for ebox, req, eout in zip(boxes, reqs, eouts, strict=True):  # in the cases' order
        failed = _ended(v, eout, "running the kernel in the emulator", compiling=False)
        if failed is not None:
            return failed
        try:
            eres = eout.decode(ExecResult)
        except msgspec.DecodeError as e:
            return v.profile("runtime_error", f"unreadable emulator result: {e}")
        if eres.error is not None:
            return _exec_error(v, eres.error)
        if [r.name for r in eres.cases] != [c.name for c in req.cases]:
            return v.profile("runtime_error", "the emulator's results do not match the cases")
        runs.extend((ebox, r.name, r.outputs, r.returned_tuple) for r in eres.cases)
    return runs


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
    `phases` records where the wall time goes, on our clock (`phase_<name>_s` in the counters:
    compile, validate, analyse, fresh (drawing the case after tracing, its references
    included), execute, references, judge (with floor inside it), price)."""
    from hardware_agents.neuron.emulator.analysis import analyze
    from hardware_agents.neuron.emulator.children import (
        CompileRequest,
        CompileResult,
        ExecCase,
        versions,
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
        policy,
        read_paths=(),
        python_path=(),
        address_space_bytes=max(policy.address_space_bytes, 8 << 30),
        no_fork=COMPILE_NO_FORK,  # threads only: tracing starts no process (isolation the child must report)
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
            with phases("validate"):
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
        with phases("analyse"):
            for prog in progs:
                analyses.append(analyze(prog))  # PSUM overflow: a compile error
    except NKIError as e:
        return v.profile("compile_error", f"compilation failed: {e}")
    # 3. execute in a second sandbox that loads no kernel code
    ref_mod = ReferenceModule(problem)
    with phases("fresh"):  # drawn only now that the programs exist; its references while the cases run
        fresh = _fresh_case(problem, data, ref_mod, references=False)
    pdir = private_dir(sandbox_dir or default_base_dir(), "accelopt-nki-programs-")
    try:
        os.chmod(pdir, 0o755)
        paths = []
        for i, raw in enumerate(blobs):
            p = pdir / f"prog{i}.msgpack"
            p.write_bytes(raw)
            os.chmod(p, 0o644)
            paths.append(str(p))
        epolicy = msgspec.structs.replace(
            policy,
            read_paths=(str(data.dir), str(pdir)),
            python_path=(),
            no_fork=True,
            env={**policy.env, **heap.CHILD_ENV},  # the executor's tiles: memory kept, not faulted again
        )
        cases = [
            ExecCase(name=c.case.name, program=paths[case_sig[i]], args=c.args)
            for i, c in enumerate(data.cases)
        ]
        isolation = dict(v.isolation)  # the kernel's sandbox: what every later profile records
        with contextlib.ExitStack() as stack:
            # (on the way out: the fresh references' thread is waited for, then the work dirs go)
            refs_pool = stack.enter_context(ThreadPoolExecutor(1, thread_name_prefix="nki-fresh-refs"))
            fresh_refs = refs_pool.submit(_fresh_references, fresh)
            staged = _stage_fresh(v, fresh, pdir, FRESH_CASE, sigs, paths, phases)
            if isinstance(staged, Profile):
                return staged
            got = _execute(
                v, stack, [*cases, staged], data, epolicy, policy.workdir_bytes, sandbox_dir, timeout, phases
            )
            if isinstance(got, Profile):
                return got
            runs = got
            data.help_references()  # the children's cores are free: two reference threads, if behind
            with phases("fresh"):  # waiting for the fresh references, if they are behind
                try:
                    fresh_refs.result()
                    redraw = False
                except ValueError:  # not finite on that seed: drawn again, as the other cases were
                    redraw = True
            if redraw:
                with phases("fresh"):
                    fresh = _fresh_case(problem, data, ref_mod, tries=2)
                staged = _stage_fresh(v, fresh, pdir, FRESH_CASE + "-again", sigs, paths, phases)
                if isinstance(staged, Profile):
                    return staged
                got = _execute(
                    v, stack, [staged], data, epolicy, policy.workdir_bytes, sandbox_dir, timeout, phases
                )
                if isinstance(got, Profile):
                    return got
                runs[-1] = got[0]
            # 4. correctness, judged here (each case once its references are computed), the
            # fresh case with the others
            v.isolation.clear()
            v.isolation.update(isolation)
            v.tail = ""
            judged: list[JudgedCase] = [*data.cases, FreshCase(problem, fresh)]
            with phases("judge"):
                v.checks.extend(judge_cases(problem, data, judged, runs, phases))
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
    if kind not in COST_SPECS:
        return v.profile(
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
