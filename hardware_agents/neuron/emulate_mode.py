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
       validated programs on the staged inputs of every case (the correctness seeds, and the
       cases drawn now, after the kernel was traced, on fresh seeds from the OS's random
       source: `fresh` and `fresh-<name>` per adversarial case, `fresh_kinds`) and save the
       outputs;
    4. the agent judges the outputs against its float64 references as the other modes do, the
       fresh cases with the others (`judge.CaseJudge`: one fused pass per output, the
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
import functools
import os
import shutil
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import numpy as np

from accelopt.problem import Problem, Solution
from accelopt.profile import Estimate, Profile, SeedCheck, peak_fraction
from hardware_agents.neuron import heap
from hardware_agents.neuron.data import (
    FreshCase,
    JudgedCase,
    ProblemData,
    TimingRound,
    one_blas_thread,
    references_base,
    stage_threads,
    write_args,
)
from hardware_agents.neuron.estimate_gate import implausible_estimate
from hardware_agents.neuron.groups import GroupRunner, plan_groups
from hardware_agents.neuron.judge import CaseJudge, decoded, stage_sources
from hardware_agents.neuron.protocol import ErrorInfo
from hardware_agents.neuron.reference import ReferenceModule
from hardware_agents.pipeline import inputgen
from hardware_agents.pipeline.cases import fresh_seed
from hardware_agents.pipeline.device_spec import DeviceSpec, t_peak
from hardware_agents.pipeline.phases import Phases
from hardware_agents.pipeline.verdict import Verdict
from hardware_agents.sandbox import Sandbox, SandboxOutcome, SandboxPolicy, default_base_dir, private_dir

_R = TypeVar("_R")
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


FRESH_CASE = "fresh"


def fresh_kinds(problem: Problem) -> list[inputgen.InputCase]:
    """What the cases drawn after tracing are drawn as: `fresh` from the problem's own
    distributions, and `fresh-<name>` from each adversarial case's. No case a kernel could know
    in advance is judged alone: the seeds are public, and so is an adversarial case's seed."""
    kinds = [inputgen.InputCase(name=FRESH_CASE, seed=0)]
    for name, inits in inputgen.adversarial_cases(problem.definition).items():
        kinds.append(inputgen.InputCase(name=f"{FRESH_CASE}-{name}", seed=0, adversarial=True, inits=inits))
    return kinds


def _fresh_case(
    problem: Problem,
    data: ProblemData,
    ref_mod: ReferenceModule,
    like: inputgen.InputCase,
    *,
    refs_dir: Path | None = None,
    tries: int = 3,
) -> TimingRound:
    """Inputs drawn now, after the kernel was traced, as `like` is (`fresh_kinds`), on a seed
    from the OS's random source (never a correctness seed): a program that carries answers for
    the known inputs fails it. Without `refs_dir` the references are left to
    `_fresh_references` (computed while the cases run); with it they are written there now
    (`TimingRound.write_references`), and a seed whose reference is not finite is drawn again."""
    if refs_dir is None:
        return TimingRound(problem, ref_mod, 0, fresh_seed(data.seeds), references=False, like=like)
    error: ValueError | None = None
    for _ in range(tries):
        rnd = TimingRound(problem, ref_mod, 0, fresh_seed(data.seeds), references=False, like=like)
        try:
            _fresh_references(rnd, refs_dir)
            return rnd
        except ValueError as e:  # a reference that is not finite on this seed: draw again
            error = e
    assert error is not None
    raise error


def _fresh_references(fresh: TimingRound, refs_dir: Path) -> None:
    """A fresh case's references, written to `refs_dir` a slice at a time, in a thread of the
    agent while the execute children run (one BLAS thread, as the problem's reference thread)."""
    with one_blas_thread():
        fresh.write_references(refs_dir)


def _exec_error(v: Verdict, err: ErrorInfo) -> Profile:
    """The verdict on an execute child's error report (the cases of a batch fail together: a
    batch's error names them all)."""
    from hardware_agents.neuron.emulator.errors import OneZeroFlagError

    where = f" (case {err.case})" if err.case else ""
    if err.type == OneZeroFlagError.__name__:  # the hardware would compute garbage: the kernel is wrong
        return v.profile("incorrect", f"the kernel is wrong on the data{where}: {err.message}")
    status = "compile_error" if err.phase == "compile" else "runtime_error"
    return v.profile(status, f"the kernel failed in the emulator{where}: {err.type}: {err.message}")


def _child_result(
    v: Verdict, out: SandboxOutcome, what: str, result: type[_R], *, compiling: bool, unreadable: str
) -> _R | Profile:
    """What an emulator child `what` sent back, or the verdict on its end (it did not end `ok`)
    or on a result that is `unreadable`; `v` takes its isolation and output."""
    v.record_outcome(out)
    failed = v.ended(
        out,
        timeout=f"{out.error} while {what}",
        crashed=f"the emulator crashed while {what}: {out.error}",
        error=f"the emulator crashed while {what}: {out.error}",
        compile_error=compiling,
    )
    if failed is not None:
        return failed
    return decoded(v, out, result, "compile_error" if compiling else "runtime_error", unreadable)


def _stage_fresh(
    v: Verdict,
    fresh: TimingRound,
    pdir: Path,
    name: str,
    sigs: list[list[Any]],
    paths: list[str],
    phases: Phases,
) -> Any:
    """A fresh case's argument files under `pdir/name`, as an ExecCase (named as the case) of
    the program of its signature (or the verdict: its shapes are none of the cases')."""
    from hardware_agents.neuron.emulator.children import ExecCase

    with phases("fresh"):
        (pdir / name).mkdir(mode=0o755)
        fresh_args, _ = write_args(fresh.args, pdir / name, digest=False)
        fresh.args = []  # staged: the arrays need not stay in memory
    fresh_sig = _signature(fresh_args)
    if fresh_sig not in sigs:
        return v.profile("runtime_error", f"the fresh inputs do not have the cases' shapes: {fresh_sig}")
    return ExecCase(name=fresh.case.name, program=paths[sigs.index(fresh_sig)], args=fresh_args)


Run = tuple[Sandbox, str, list[str], bool]  # a case's work dir, name, output files, returned a tuple


def _start_group(
    cases: list[Any],
    data: ProblemData,
    epolicy: SandboxPolicy,
    workdir_floor: int,
    sandbox_dir: Path | None,
    timeout: float,
) -> tuple[Sandbox, Any, SandboxOutcome]:
    """One execute child on `cases` (ExecCases), in a sandbox whose work dir holds their
    outputs: (its sandbox, still open: the caller closes it once the outputs are judged, the
    request, how the child ended)."""
    from hardware_agents.neuron.emulator.children import ExecRequest

    box = Sandbox(
        msgspec.structs.replace(epolicy, workdir_bytes=data.workdir_bytes(len(cases), workdir_floor)),
        base_dir=sandbox_dir,
    )
    try:
        req = ExecRequest(cases=cases, batch_bytes=EXECUTE_BATCH_BYTES)
        return box, req, box.run(EXECUTE_TARGET, req, timeout_s=timeout)
    except BaseException:
        box.close()
        raise


def _group_runs(v: Verdict, box: Sandbox, req: Any, eout: SandboxOutcome) -> list[Run] | Profile:
    """Per case of an ended execute child, in order, its run; or the verdict on a child that failed."""
    from hardware_agents.neuron.emulator.children import ExecResult

    step = "running the kernel in the emulator"
    eres = _child_result(v, eout, step, ExecResult, compiling=False, unreadable="unreadable emulator result")
    if isinstance(eres, Profile):
        return eres
    if eres.error is not None:
        return _exec_error(v, eres.error)
    if [r.name for r in eres.cases] != [c.name for c in req.cases]:
        return v.profile("runtime_error", "the emulator's results do not match the cases")
    return [(box, r.name, r.outputs, r.returned_tuple) for r in eres.cases]


class EmulateRun:
    """One profile in the `emulate` mode (see the module doc), one method per stage the agent
    runs (`neuron/stages.py`): `build` (compile, validate, analyse), `stage_inputs` (the fresh
    case drawn after tracing, the programs and arguments of the execute children),
    `correctness` (execute, judge), `roofline_gate` (the estimate and its gate), `verdict`;
    `release` always. `v` is the agent's verdict; `phases` records where the wall time goes on
    our clock (`phase_<name>_s`: compile, validate, analyse, fresh (drawing the case after
    tracing, its references included), execute, references, judge (with floor inside it),
    price)."""

    def __init__(
        self,
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
        phases: Phases,
    ) -> None:
        self.v, self.problem, self.solution, self.data, self.policy = v, problem, solution, data, policy
        self.entry_file, self.entry, self.timeout = entry_file, entry, timeout
        self.kind, self.spec, self.sandbox_dir, self.phases = kind, spec, sandbox_dir, phases
        self.sigs: list[list[Any]] = []
        self.case_sig: list[int] = []
        for c in data.cases:
            sig = _signature(c.args)
            if sig not in self.sigs:
                self.sigs.append(sig)
            self.case_sig.append(self.sigs.index(sig))
        self.progs: list[Any] = []
        self.blobs: list[bytes] = []
        self.analyses: list[Any] = []
        self.isolation: dict[str, str] = {}  # the kernel's sandbox: what every later profile records
        self.held = contextlib.ExitStack()  # the fresh references' thread, the execute children's work dirs
        self.pdir: Path | None = None
        self.paths: list[str] = []
        self.cases: list[Any] = []  # ExecCases: every case, then the fresh ones
        self.fresh: list[TimingRound] = []  # drawn after tracing, as `fresh_kinds` says
        self.ref_mod: ReferenceModule | None = None
        self.refs_dir: Path | None = None  # the fresh cases' references
        self.fresh_refs: list[Future[None]] = []
        self.estimate: Estimate | None = None
        self.log = ""

    # --- build: the kernel traced in its sandbox, the programs validated and analysed here ------

    def build(self) -> Profile | None:
        """Compile in the kernel's sandbox (it may read nothing but its own work dir), then read
        and validate the programs here: a program that breaks a hardware rule is a compile error."""
        from hardware_agents.neuron.emulator.children import CompileRequest, CompileResult, versions

        v, policy, sigs = self.v, self.policy, self.sigs
        cpolicy = msgspec.structs.replace(
            policy,
            read_paths=(),
            python_path=(),
            address_space_bytes=max(policy.address_space_bytes, 8 << 30),
            no_fork=COMPILE_NO_FORK,  # threads only: tracing starts no process (isolation the child must report)
        )
        with Sandbox(cpolicy, base_dir=self.sandbox_dir) as box:
            kernel_file = stage_sources(box, self.solution, self.entry_file)
            with self.phases("compile"):
                out = box.run(
                    COMPILE_TARGET,
                    CompileRequest(
                        kernel_file=kernel_file,
                        entry=self.entry,
                        signatures=sigs,
                        sources=[src.path for src in self.solution.sources],
                    ),
                    timeout_s=self.timeout,
                )
            step = "compiling the kernel in the emulator"
            res = _child_result(
                v, out, step, CompileResult, compiling=True, unreadable="unreadable compile result"
            )
            if isinstance(res, Profile):
                return res
            v.tools = versions()  # ours: not what the kernel's process says
            if res.error is not None:
                err = res.error
                what = "loading the kernel module failed" if err.phase == "load" else "compilation failed"
                return v.profile(
                    "compile_error", f"{what}: {err.type}: {err.message}\n{err.traceback}{v.tail}"
                )
            if len(res.programs) != len(sigs):
                return v.profile(
                    "compile_error", f"the compiler produced {len(res.programs)} of {len(sigs)} programs"
                )
            failed = self._validate(box, res.programs)
        self.isolation = dict(v.isolation)
        return failed or self._analyse()

    def _validate(self, box: Sandbox, programs: list[str]) -> Profile | None:
        from hardware_agents.neuron.emulator.errors import NKIError
        from hardware_agents.neuron.emulator.program import decode, sources_digest
        from hardware_agents.neuron.emulator.validate import check_program

        v = self.v
        digest = sources_digest((src.path, src.content.encode()) for src in self.solution.sources)
        try:
            with self.phases("validate"):
                for rel, sig in zip(programs, self.sigs, strict=True):
                    raw = box.read_file(rel, MAX_PROGRAM_BYTES)
                    prog = decode(raw)
                    if prog.source_sha256 != digest:
                        return v.profile(
                            "runtime_error",
                            "the program handed over was traced from another source (its sources' "
                            f"sha256 {prog.source_sha256[:12] or 'missing'}, this kernel's {digest[:12]}): "
                            f"a verdict belongs to the source it was asked about{v.tail}",
                        )
                    check_program(prog, sig)
                    self.progs.append(prog)
                    self.blobs.append(raw)
        except NKIError as e:
            return v.profile("compile_error", f"compilation failed: {e}{v.tail}")
        except (OSError, msgspec.DecodeError, KeyError, IndexError, ValueError, TypeError) as e:
            return v.profile(
                "compile_error",
                f"the compiled program is unreadable or malformed: {type(e).__name__}: {e}{v.tail}",
            )
        return None

    def _analyse(self) -> Profile | None:
        from hardware_agents.neuron.emulator.analysis import analyze
        from hardware_agents.neuron.emulator.errors import NKIError

        try:
            with self.phases("analyse"):
                for prog in self.progs:
                    self.analyses.append(analyze(prog))  # PSUM overflow: a compile error
        except NKIError as e:
            return self.v.profile("compile_error", f"compilation failed: {e}")
        return None

    # --- stage inputs: what the execute children read ------------------------------------------

    def stage_inputs(self) -> Profile | None:
        """The fresh cases, drawn only now that the programs exist (their references in a thread
        while the cases run), and the programs in a directory of ours the children may read."""
        from hardware_agents.neuron.emulator.children import ExecCase

        ref_mod = self.ref_mod = ReferenceModule(self.problem)
        with self.phases("fresh"):
            self.fresh = [
                _fresh_case(self.problem, self.data, ref_mod, like) for like in fresh_kinds(self.problem)
            ]
        # their references: on disk, in a private dir of this profile's (outside every read path)
        self.refs_dir = private_dir(references_base(), "accelopt-nki-fresh-refs-")
        pdir = self.pdir = private_dir(self.sandbox_dir or default_base_dir(), "accelopt-nki-programs-")
        os.chmod(pdir, 0o755)
        for i, raw in enumerate(self.blobs):
            p = pdir / f"prog{i}.msgpack"
            p.write_bytes(raw)
            os.chmod(p, 0o644)
            self.paths.append(str(p))
        self.cases = [
            ExecCase(name=c.case.name, program=self.paths[self.case_sig[i]], args=c.args)
            for i, c in enumerate(self.data.cases)
        ]
        # (on the way out: the fresh references' thread is waited for, then the work dirs go)
        refs_pool = self.held.enter_context(ThreadPoolExecutor(1, thread_name_prefix="nki-fresh-refs"))
        self.fresh_refs = [refs_pool.submit(_fresh_references, f, self.refs_dir) for f in self.fresh]
        for fresh in self.fresh:
            name = fresh.case.name
            staged = _stage_fresh(self.v, fresh, pdir, name, self.sigs, self.paths, self.phases)
            if isinstance(staged, Profile):
                return staged
            self.cases.append(staged)
        return None

    # --- correctness: execute children that import no kernel code, judged here ----------------

    def correctness(self) -> Profile | None:
        """Run every case (the fresh ones with them) in execute children, in groups whose
        outputs fit (`groups.py`), and judge each group against our references as its child
        ends, before its outputs go."""
        v, data = self.v, self.data
        judge = CaseJudge(self.problem, data, self.phases)
        checks: dict[int, SeedCheck] = {}
        case_bytes = sum(data.output_bytes.values())
        plan = plan_groups(len(self.cases), case_bytes, stage_threads())
        runner: GroupRunner[tuple[Sandbox, Any, SandboxOutcome]] = GroupRunner(
            min(len(plan), stage_threads())
        )
        epolicy = self._epolicy()
        t0 = time.perf_counter()
        try:
            for k, group in enumerate(plan):
                cases = [self.cases[i] for i in group]
                runner.submit(
                    k,
                    functools.partial(
                        _start_group,
                        cases,
                        data,
                        epolicy,
                        self.policy.workdir_bytes,
                        self.sandbox_dir,
                        self.timeout,
                    ),
                )
            for ended, (k, (box, req, eout)) in enumerate(runner.done(), 1):
                if ended == len(plan):
                    self.phases.add("execute", time.perf_counter() - t0)
                    data.help_references()  # the children's cores are free: two reference threads, if behind
                try:
                    failed = self._judge_group(judge, plan[k], _group_runs(v, box, req, eout), checks)
                finally:
                    box.close()  # its outputs are judged: their memory goes back
                    runner.release()
                if failed is not None:
                    return failed
        finally:
            runner.close()
        v.isolation.clear()  # the kernel's sandbox: what the profile records
        v.isolation.update(self.isolation)
        v.tail = ""
        v.checks.extend(checks[i] for i in sorted(checks))
        heap.release()  # the references' and inputs' arrays are gone: their memory back to the system
        self.release()
        seeds = {f.case.name: f.case.seed for f in self.fresh}
        failed_fresh = [c.case for c in v.checks if c.case in seeds and not c.passed]
        return v.wrong_cases(
            f"\n(case {', '.join(f'{n} (seed {seeds[n]})' for n in failed_fresh)}: inputs drawn after the kernel "
            "was traced: results must not depend on knowing the inputs in advance)"
            if failed_fresh
            else ""
        )

    def _judge_group(
        self, judge: CaseJudge, group: list[int], runs: list[Run] | Profile, checks: dict[int, SeedCheck]
    ) -> Profile | None:
        """Judge an ended group's cases (a fresh one once its references are there; one whose
        reference is not finite on its seed drawn again and run alone); the verdict where one
        cannot be judged."""
        if isinstance(runs, Profile):
            return runs
        first = len(self.data.cases)
        for i, run in zip(group, runs, strict=True):
            case: JudgedCase
            if i < first:
                case = self.data.cases[i]
            else:
                fresh = self._fresh_ready(i - first)
                if isinstance(fresh, Profile):
                    return fresh
                case, again = fresh
                run = again or run
            with self.phases("judge"):
                checks[i] = judge(case, run)
        return None

    def _fresh_ready(self, j: int) -> tuple[JudgedCase, Run | None] | Profile:
        """The fresh case `j` once its references are computed: (it, None: its run stands); where
        its reference is not finite on its seed, drawn again, run alone and (it, its new run), or
        the verdict where that fails. The new run's sandbox is closed with the others (`held`)."""
        assert self.pdir is not None and self.ref_mod is not None
        fresh = self.fresh[j]
        with self.phases("fresh"):  # waiting for the fresh references, if they are behind
            try:
                self.fresh_refs[j].result()
                return FreshCase(self.problem, fresh), None
            except ValueError:  # not finite on that seed: drawn again below
                pass
            like = msgspec.structs.replace(fresh.case, seed=0)
            self.fresh[j] = fresh = _fresh_case(
                self.problem, self.data, self.ref_mod, like, tries=2, refs_dir=self.refs_dir
            )
        staged = _stage_fresh(
            self.v, fresh, self.pdir, f"{fresh.case.name}-again", self.sigs, self.paths, self.phases
        )
        if isinstance(staged, Profile):
            return staged
        box, req, eout = _start_group(
            [staged], self.data, self._epolicy(), self.policy.workdir_bytes, self.sandbox_dir, self.timeout
        )
        self.held.callback(box.close)
        again = _group_runs(self.v, box, req, eout)
        if isinstance(again, Profile):
            return again
        return FreshCase(self.problem, fresh), again[0]

    def _epolicy(self) -> SandboxPolicy:
        return msgspec.structs.replace(
            self.policy,
            read_paths=(str(self.data.dir), str(self.pdir)),
            python_path=(),
            no_fork=True,
            env={**self.policy.env, **heap.CHILD_ENV},  # the executor's tiles: memory kept, not faulted again
        )

    # --- the estimate and its gate; the verdict ---------------------------------------------------

    def roofline_gate(self) -> Profile | None:
        """The cost model prices the validated program (the programs of all signatures are the
        same kernel; the first case's), held to the hard roofline: faster is `incorrect`."""
        from hardware_agents.neuron.emulator.cost import COST_SPECS, estimate

        v, kind, problem, spec = self.v, self.kind, self.problem, self.spec
        if kind not in COST_SPECS:
            self.log = (
                f"correct in AccelOpt's NKI emulator; no cost model for {kind} (not timed, not estimated)"
            )
            return None
        sig0 = self.case_sig[0]
        with self.phases("price"):
            est = estimate(self.progs[sig0], kind, self.analyses[sig0])
        tp, bound = t_peak(problem, spec)
        t_est = est.latency_s
        pct = peak_fraction(tp, t_est) or 0.0
        self.estimate = _estimate_record(est, tp, pct)
        # The plausibility gate: an estimate is held to the hard roofline, what no program can beat
        # (the paper's counts a fused instruction's work as separate FLOPs: estimate_gate.py)
        why = implausible_estimate(problem, spec, COST_SPECS[kind], t_est)
        if why is not None:
            prof = v.profile(
                "incorrect", f"{why} (model {est.model}; {pct * 100:.1f}% of the {bound} roofline)"
            )
            prof.estimate = self.estimate
            return prof
        self.log = (
            f"correct in AccelOpt's NKI emulator ({len(v.checks)} cases); not timed: ESTIMATED {t_est * 1e3:.4g} ms "
            f"on {kind} by {est.model} ({est.bound}-bound; {pct * 100:.1f}% of the {bound} roofline, estimated)"
        )
        return None

    def verdict(self) -> Profile:
        prof = self.v.profile("unmeasured", self.log)
        if self.estimate is not None:
            prof.estimate = self.estimate
        return prof

    def release(self) -> None:
        """The fresh references' thread waited for, the execute children's work dirs and the
        programs removed (once; again: nothing)."""
        try:
            self.held.close()
        finally:
            if self.pdir is not None:
                shutil.rmtree(self.pdir, ignore_errors=True)
                self.pdir = None
            if self.refs_dir is not None:
                shutil.rmtree(self.refs_dir, ignore_errors=True)
                self.refs_dir = None


def _estimate_record(est: Any, tp: float, pct: float) -> Estimate:
    """The cost model's estimate as the profile records it."""
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
    return Estimate(
        latency_ms=est.latency_s * 1e3,
        peak_fraction=pct,
        t_peak_ms=tp * 1e3,
        bound=est.bound,
        engines_ms={k: t * 1e3 for k, t in est.engines_s.items()},
        model=est.model,
        detail=detail,
    )


__all__ = ["EmulateRun"]
