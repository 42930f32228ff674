"""Inputs and references of one problem, staged for sandboxed NKI runs.

Correctness (`ProblemData`, one per (problem, seeds), kept by the generic LRU of
`hardware_agents.datacache`): per case (the seeds, then the adversarial cases of the
validity layer) inputs drawn from the definition's `x_input_init` (NKIBench's `get_inputs`
distributions), transformed into the kernel's arguments with the problem's
`transform_to_nki_inputs`, and saved as .npy files in a directory the sandbox may read (the
cases in parallel threads); the float64 reference outputs are computed in a thread of their
own while the kernel compiles and runs, into a private 0700 directory in the temp dir, outside
the data dir and every sandbox read path (a kernel must not be able to copy them), with each
one's norm; the float32 floor of a case's tolerance (`fp32.Fp32Floor`) is computed there
on first use.

Timing (`TimingRound`, one per timing round, made by the agent when that round starts):
inputs drawn on a fresh seed from the OS's random source (never a correctness seed), so a
cache keyed on content seen in the correctness runs never hits; their float64 references
stay in the agent's memory. The agent writes a round's argument files into the timing
child's work dir only when the child waits for that round. The emulate mode draws one such
round after the kernel was traced and judges it as one more correctness case (`FreshCase`).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import msgspec
import numpy as np
import threadpoolctl

from accelopt.problem import Problem, Tolerance
from hardware_agents.neuron import heap, slices
from hardware_agents.neuron.protocol import KernelArg
from hardware_agents.neuron.reference import ReferenceModule
from hardware_agents.neuron.refstore import Entry, ReferenceStore, case_key
from hardware_agents.pipeline import compare, fp32, inputgen, numpy_ref
from hardware_agents.pipeline.cases import adversarial_overflow
from hardware_agents.sandbox import private_dir

WORKDIR_SLACK = 256 << 20  # a child's work dir beyond the outputs it writes (headers, its stage file)


_blas_lock = threading.Lock()
_blas_users = 0
_blas_limits: Any = None


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS on one thread while any thread of this process is inside (the reference threads:
    the execute children have the other cores, and a multi-threaded BLAS whose threads wait
    for a busy core spins instead of computing, the executor's reason). BLAS's thread count
    is the process's, not a thread's: the first to enter sets it, the last to leave restores
    it (nested `threadpool_limits` in two threads would restore out of order)."""
    global _blas_users, _blas_limits
    with _blas_lock:
        if _blas_users == 0:
            _blas_limits = threadpoolctl.threadpool_limits(limits=1)
        _blas_users += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_users -= 1
            if _blas_users == 0:
                _blas_limits.restore_original_limits()
                _blas_limits = None


def references_base() -> Path:
    """Where the private reference dirs go: the temp dir, not `/dev/shm` (the sandboxes'
    base). NKIBench's bmm holds 12 GiB of float64 references over its six cases: in RAM
    they would take the machine's memory; on a disk-backed temp dir the page cache keeps
    what fits."""
    return Path(tempfile.gettempdir())


class CaseData:
    """One case: its staged kernel arguments at once, its float64 references when the
    problem's reference thread has computed them (`refs()` waits for them)."""

    def __init__(
        self,
        case: inputgen.InputCase,
        args: list[KernelArg],
        private: Path,
        store: ReferenceStore | None = None,
        key: str = "",
    ) -> None:
        self.case = case
        self.args = args
        self.ref_files: dict[str, str] = {}
        self.stats: dict[str, compare.RefStats] = {}
        self.store, self.key = store, key
        self.entry: Entry | None = None  # the case's entry in the reference store, if it has one
        self.draw_s = 0.0  # drawing and staging its inputs took (0: staged from the store)
        self._private = private
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._floor_lock = threading.Lock()
        self._floor: dict[str, tuple[str, float]] | None = None

    def refs(self) -> dict[str, np.ndarray]:
        """The references (memory-mapped), once computed; re-raises what computing them raised."""
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return {
            n: np.asarray(np.load(p, mmap_mode="r", allow_pickle=False)) for n, p in self.ref_files.items()
        }

    def floor(self, problem: Problem) -> dict[str, fp32.Fp32Floor]:
        """float32's own error on this case's inputs (`fp32.Fp32Floor`), computed on first
        use (the inputs drawn again: they are deterministic) and kept with the references."""
        with self._floor_lock:
            if self._floor is None:
                refs = self.refs()
                floors = self.entry.floor() if self.entry is not None else None
                if floors is None:
                    inputs = inputgen.make_inputs(problem, self.case)
                    with one_blas_thread():
                        floors = slices.fp32_floor(problem, inputs, refs, self.case.seed)
                    del inputs
                    if self.entry is not None and self.store is not None:
                        self.store.put_floor(self.entry, floors)
                kept = {}
                for name, f in floors.items():
                    path = self._private / f"{self.case.name}-{name}.floor.npy"
                    np.save(path, f.rows, allow_pickle=False)
                    kept[name] = (str(path), f.rel_l2)
                self._floor = kept
        return {
            n: fp32.Fp32Floor(rows=np.load(p, allow_pickle=False), rel_l2=rel)
            for n, (p, rel) in self._floor.items()
        }

    def _done(
        self,
        ref_files: dict[str, str] | None,
        stats: dict[str, compare.RefStats] | None = None,
        error: BaseException | None = None,
    ) -> None:
        self.ref_files = ref_files or {}
        self.stats = stats or {}
        self._error = error
        self._ready.set()


def _reference(problem: Problem, case: inputgen.InputCase, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
    ref64 = numpy_ref.reference_outputs(problem, inputs)
    overflow = adversarial_overflow(problem.name, case, ref64)
    if overflow is not None:
        raise ValueError(overflow)
    return {n: np.asarray(r, dtype=np.float64) for n, r in ref64.items()}


def overflow_message(name: str, case: inputgen.InputCase, ref: slices.ReferenceFiles) -> str:
    """`adversarial_overflow`'s message for a reference written to files."""
    bad = [n for n, st in ref.stats.items() if not st.finite]
    return adversarial_overflow(name, case, {n: np.array([np.nan]) for n in bad}) or f"{name}: non-finite"


def output_bytes_of(problem: Problem) -> dict[str, int]:
    """Each output's size as the references hold it in fp32 (at least 4 bytes an element),
    from the definition's shapes: known before any reference is computed."""
    out = {}
    for name, shape in problem.output_shapes().items():
        item = max(4, np.dtype(inputgen.numpy_dtype(problem.definition.outputs[name].dtype)).itemsize)
        out[name] = math.prod(shape or ()) * item
    return out


class ProblemData:
    """All correctness cases of one (problem, seeds), under `root` (the cache's staging dir).

    The inputs are drawn and staged here; the float64 references are computed in a thread of
    their own, case by case in the cases' order, while the kernel compiles and runs (they are
    needed only to judge it: `CaseData.refs()` waits). numpy releases the GIL in the
    references' array work, so on a machine with two cores they cost no wall time of their
    own when the kernel's run takes longer."""

    def __init__(
        self,
        problem: Problem,
        seeds: tuple[int, ...],
        root: Path,
        store: ReferenceStore | None = None,
        *,
        adversarial: bool = True,
    ) -> None:
        heap.keep_freed_memory()  # the inputs and references: big arrays, case after case
        self.store = store
        self.dir = Path(tempfile.mkdtemp(prefix="nki-data-", dir=root))
        os.chmod(self.dir, 0o755)
        # outside the data dir (which is on the sandbox's read list) and 0700: the kernel's uid
        # reaches it neither through Landlock nor through permissions
        self.private = private_dir(references_base(), "accelopt-nki-refs-")
        self.cases: list[CaseData] = []
        self.output_bytes = output_bytes_of(problem)
        self._cancel = threading.Event()
        self._threads: list[threading.Thread] = []  # the reference threads started
        self._running = 0  # of them, still computing (under `_running_lock`)
        self._running_lock = threading.Lock()
        pending: list[tuple[CaseData, dict[str, Any] | None]] = []
        try:
            ref_mod = ReferenceModule(problem)
            # (adversarial=False: the emulate mode draws its adversarial cases fresh, per profile)
            cases = [
                c for c in inputgen.input_cases(problem.definition, seeds) if adversarial or not c.adversarial
            ]
            # the cases' inputs drawn and written in parallel (numpy's generators and file
            # writes release the GIL): NKIBench's adamw draws 90 M numbers a case
            with ThreadPoolExecutor(max_workers=stage_threads()) as pool:
                staged = list(pool.map(lambda c: self._stage(problem, ref_mod, c), cases))
            for cd, inputs in staged:
                self.cases.append(cd)
                if not self._stored(cd, compare.tolerance_of(problem.definition)):
                    pending.append((cd, inputs))
        except BaseException:
            self.remove()
            raise
        self.seeds = frozenset(c.case.seed for c in self.cases)
        self._problem = problem
        self._pending = pending  # what the reference threads take, case by case, in order
        self._failed: BaseException | None = None
        self._start_references(f"nki-refs-{problem.name}")

    def help_references(self) -> bool:
        """One more reference thread, taking the next pending case (the emulate mode's, once its
        execute children are done and their cores free); True: one was started. What the
        threads hold at once is bounded by `slices.EVALUATIONS`, however many there are."""
        if not self._pending:
            return False
        self._start_references(f"nki-refs-help-{self._problem.name}")
        return True

    def _start_references(self, name: str) -> None:
        with self._running_lock:  # counted before it starts: a `remove` right after sees it
            self._running += 1
        thread = threading.Thread(
            target=self._references, args=(self._problem, self._pending), name=name, daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _stage(
        self, problem: Problem, ref_mod: ReferenceModule, case: inputgen.InputCase
    ) -> tuple[CaseData, dict[str, Any] | None]:
        """A case's argument files in the data dir, and its inputs (None: its references and
        arguments come from the store, so nothing is drawn; the reference thread draws them
        should the entry go before it is read)."""
        cdir = self.dir / case.name
        cdir.mkdir(mode=0o755)
        key = case_key(problem, case) if self.store is not None else ""
        entry = self.store.get(key) if self.store is not None else None
        if entry is not None:
            kept = entry.args(cdir)
            if kept is not None:
                return CaseData(case, kept, self.private, self.store, key), None
        t0 = time.perf_counter()
        inputs = inputgen.make_inputs(problem, case)
        specs, _ = write_args(ref_mod.kernel_args(inputs), cdir, digest=False)
        cd = CaseData(case, specs, self.private, self.store, key)
        cd.draw_s = time.perf_counter() - t0
        if entry is not None and self.store is not None:  # kept by a profile before arguments were
            self.store.put_args(entry, specs, cd.draw_s)
        return cd, inputs

    def _stored(self, cd: CaseData, tol: Tolerance) -> bool:
        """Take a case's references from the store (linked into the private dir, so that an
        eviction by another process cannot take them away mid-profile); False: not stored."""
        entry = self.store.get(cd.key) if self.store is not None else None
        if entry is None:
            return False
        try:
            files = {}
            for name, src in entry.files.items():
                dst = self.private / f"{cd.case.name}-{name}.npy"
                try:
                    os.link(src, dst)
                except OSError:
                    shutil.copyfile(src, dst)
                files[name] = str(dst)
        except OSError:
            return False
        cd.entry = entry
        cd._done(files, {n: compare.RefStats.of_norm(*v, tol) for n, v in entry.norms.items()})
        return True

    def _references(self, problem: Problem, pending: list[tuple[CaseData, dict[str, Any] | None]]) -> None:
        try:
            with one_blas_thread():
                self._compute_references(problem, pending)
        finally:
            with self._running_lock:
                self._running -= 1
                last = self._running == 0
            if last and self._cancel.is_set():
                # removed while a case was computed: a reference it saved while `remove` emptied the
                # private dir kept that dir (its rmdir failed); the last thread out removes it again
                shutil.rmtree(self.private, ignore_errors=True)

    def _compute_references(
        self, problem: Problem, pending: list[tuple[CaseData, dict[str, Any] | None]]
    ) -> None:
        while True:
            try:
                cd, inputs = pending.pop(0)  # (atomic: a helper thread may take cases too)
            except IndexError:
                return
            failed = self._failed
            if failed is not None or self._cancel.is_set():
                cd._done(None, error=failed or RuntimeError("the problem's data was removed"))
                continue
            try:
                if inputs is None:  # staged from the store, whose entry went since
                    inputs = inputgen.make_inputs(problem, cd.case)
                ref = slices.ReferenceFiles(problem, inputs, self.private, cd.case.name)
                del inputs
                if not ref.finite and cd.case.adversarial:
                    raise ValueError(overflow_message(problem.name, cd.case, ref))
                nbytes = sum(os.path.getsize(f) for f in ref.files.values())
                if self.store is not None and self.store.worth_keeping(ref.seconds, nbytes):
                    cd.entry = self.store.put(cd.key, ref.files, ref.stats, ref.seconds)
                    if cd.entry is not None:  # a later profile stages these without drawing them
                        self.store.put_args(cd.entry, cd.args, cd.draw_s)
                cd._done(ref.files, ref.stats)
            except BaseException as e:  # handed to whoever waits for these references
                self._failed = e
                cd._done(None, error=e)

    def wait_references(self) -> None:
        """Block until every case's references are computed (or failed)."""
        for cd in self.cases:
            cd._ready.wait()

    def staged_bytes(self) -> int:
        """What the staged inputs take (files in the sandboxes' base, `/dev/shm`: memory)."""
        total = 0
        for f in self.dir.rglob("*"):
            with contextlib.suppress(OSError):
                if f.is_file() and not f.is_symlink():
                    total += f.stat().st_size
        return total

    def workdir_bytes(self, files: int, floor: int) -> int:
        """The work-dir cap of a child that writes `files` sets of this problem's outputs: their
        size (as fp32, what the references hold) + 256 MiB for the rest, at least `floor`."""
        return max(floor, files * sum(self.output_bytes.values()) + WORKDIR_SLACK)

    def remove(self) -> None:
        """The staged inputs and the references gone; a reference thread still computing stops
        after its case, and the last one out removes the private dir once more (`_references`)."""
        self._cancel.set()
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.private, ignore_errors=True)


def build_problem_data(
    problem: Problem,
    seeds: tuple[int, ...],
    root: Path | None,
    store: ReferenceStore | None = None,
    *,
    adversarial: bool = True,
) -> ProblemData:
    """The `build` of the agent's `DataCache` (which stages under a 0755 root)."""
    assert root is not None, "the Neuron agent's DataCache stages files: it needs a prefix"
    return ProblemData(problem, seeds, root, store, adversarial=adversarial)


def stage_threads() -> int:
    """Threads that draw and write the cases' inputs: the CPUs this process may use, at most 4."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(4, cpus))


def write_args(args: list[Any], cdir: Path, *, digest: bool = True) -> tuple[list[KernelArg], dict[str, str]]:
    """Save the array arguments as world-readable .npy files in `cdir`; (their specs, sha256 of
    each file by path, when `digest`: a timing round re-hashes them to see a changed input)."""
    specs: list[KernelArg] = []
    digests: dict[str, str] = {}
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            path = cdir / f"arg{i}.npy"
            np.save(path, np.ascontiguousarray(a), allow_pickle=False)
            os.chmod(path, 0o644)
            specs.append(KernelArg(path=str(path)))
            if digest:
                digests[str(path)] = file_digest(path)
        else:
            specs.append(KernelArg(scalar=_scalar(a)))
    return specs, digests


def file_digest(path: Path | str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


class TimingRound:
    """One timing round's fresh inputs (as kernel arguments) and their float64 references,
    held in the agent's memory; `stage(dir)` writes the argument files for the timing child."""

    def __init__(
        self,
        problem: Problem,
        ref_mod: ReferenceModule,
        index: int,
        seed: int,
        *,
        references: bool = True,
        like: inputgen.InputCase | None = None,
    ) -> None:
        self.index = index
        # `like`: drawn as that case is (its name, an adversarial case's distributions), on `seed`
        self.case = (
            inputgen.InputCase(name=f"timing-r{index}", seed=seed)
            if like is None
            else msgspec.structs.replace(like, seed=seed)
        )
        self._problem = problem
        self._inputs: dict[str, Any] | None = inputgen.make_inputs(problem, self.case)
        self.args = ref_mod.kernel_args(self._inputs)
        self.refs: dict[str, np.ndarray] = {}
        self.stats: dict[str, compare.RefStats] = {}  # `write_references`' norms of `refs`
        self.digests: dict[str, str] = {}
        if references:
            self.compute_references()

    def compute_references(self) -> None:
        """The inputs' float64 references (a ValueError where one is not finite on this seed);
        `references=False` leaves them to this call (the emulate mode: while the cases run)."""
        inputs, self._inputs = self._inputs, None
        assert inputs is not None, "the references are computed once"
        refs = _reference(self._problem, self.case, inputs)
        bad = [n for n, r in refs.items() if not np.all(np.isfinite(r))]
        if bad:
            raise ValueError(
                f"{self._problem.name}: the reference is non-finite in {bad} on timing seed {self.case.seed}"
            )
        self.refs = refs

    def write_references(self, directory: Path) -> None:
        """The emulate mode's `compute_references`: the references written to `directory` a
        slice at a time (`slices.ReferenceFiles`) and mapped read-only into `refs` (never whole
        in memory), their norms in `stats`; a ValueError where one is not finite on this seed."""
        inputs, self._inputs = self._inputs, None
        assert inputs is not None, "the references are computed once"
        ref = slices.ReferenceFiles(self._problem, inputs, directory, f"{self.case.name}-{self.case.seed}")
        del inputs
        if not ref.finite:
            bad = [n for n, st in ref.stats.items() if not st.finite]
            raise ValueError(
                f"{self._problem.name}: the reference is non-finite in {bad} on timing seed {self.case.seed}"
            )
        self.refs = ref.arrays()
        self.stats = ref.stats

    def stage(self, cdir: Path) -> list[KernelArg]:
        cdir.mkdir(mode=0o755, parents=True)
        specs, self.digests = write_args(self.args, cdir)
        return specs

    def changed_files(self) -> list[str]:
        """Staged argument files whose bytes are no longer what was written (or are gone)."""
        out = []
        for path, digest in self.digests.items():
            try:
                same = file_digest(path) == digest
            except OSError:
                same = False
            if not same:
                out.append(Path(path).name)
        return out


class JudgedCase(Protocol):
    """What the judge needs of a case (`judge.CaseJudge`): `CaseData`, `FreshCase`."""

    case: inputgen.InputCase
    stats: dict[str, compare.RefStats]

    def refs(self) -> dict[str, np.ndarray]: ...

    def floor(self, problem: Problem) -> dict[str, fp32.Fp32Floor]: ...


class FreshCase:
    """A `TimingRound` judged as one more correctness case (the emulate mode's case drawn after
    the kernel was traced): its in-memory references, their norms, and its float32 floor on
    first use (`CaseData.floor`'s rule, the inputs drawn again: they are deterministic)."""

    def __init__(self, problem: Problem, rnd: TimingRound) -> None:
        self.round = rnd
        self.case = rnd.case
        tol = compare.tolerance_of(problem.definition)
        self.stats = rnd.stats or {
            n: compare.RefStats(r, tol, bound=False, threads=1) for n, r in rnd.refs.items()
        }
        self._floor: dict[str, fp32.Fp32Floor] | None = None

    def refs(self) -> dict[str, np.ndarray]:
        return self.round.refs

    def floor(self, problem: Problem) -> dict[str, fp32.Fp32Floor]:
        if self._floor is None:
            inputs = inputgen.make_inputs(problem, self.case)
            with one_blas_thread():
                self._floor = slices.fp32_floor(problem, inputs, self.round.refs, self.case.seed)
        return self._floor


def _scalar(a: Any) -> float | int | bool:
    if isinstance(a, np.generic):
        a = a.item()
    if isinstance(a, bool | int | float):
        return a
    raise TypeError(f"kernel argument of type {type(a).__name__} is neither an array nor a scalar")


__all__ = [
    "CaseData",
    "FreshCase",
    "JudgedCase",
    "ProblemData",
    "TimingRound",
    "build_problem_data",
    "file_digest",
    "one_blas_thread",
    "write_args",
]
